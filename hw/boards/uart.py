"""A small 8N1 UART: a receiver and a transmitter at a fixed clocks-per-bit.

The board top's host link talks to the host through these. ``clocks_per_bit``
is the clock frequency divided by the baud rate (at least 4; the receiver
samples each bit once, in its middle, which tolerates the few per cent of
clock mismatch a USB-serial bridge has at such ratios).

`UartReceiver` drives a stream of received bytes. It has no buffer beyond its
output register: a byte not taken before the next one completes is lost (the
host link always takes a byte within a few cycles, far inside one character).
`UartTransmitter` takes a stream of bytes and sends each with a start and a
stop bit; ``ready`` is high while the line is idle.
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UartReceiver", "UartTransmitter", "MIN_CLOCKS_PER_BIT"]

MIN_CLOCKS_PER_BIT = 4


def _check(component, clocks_per_bit: int) -> int:
    if not isinstance(clocks_per_bit, int) or clocks_per_bit < MIN_CLOCKS_PER_BIT:
        component._MustUse__silence = True  # never elaborated: no "unused" warning
        raise ValueError(f"clocks_per_bit: at least {MIN_CLOCKS_PER_BIT}, got {clocks_per_bit!r}")
    return clocks_per_bit


class UartReceiver(wiring.Component):
    """8N1 receiver: ``rx`` pin in, a stream of bytes out."""

    def __init__(self, clocks_per_bit: int):
        self.clocks_per_bit = _check(self, clocks_per_bit)
        super().__init__({"rx": In(1, init=1), "data": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)
        timer = Signal(range(self.clocks_per_bit + 1))
        bits = Signal(range(9))
        shift = Signal(8)

        with m.If(self.data.ready):
            m.d.sync += self.data.valid.eq(0)
        with m.FSM():
            with m.State("idle"):
                with m.If(~rx):  # start bit's edge: sample it again half a bit later
                    m.d.sync += timer.eq(self.clocks_per_bit // 2)
                    m.next = "start"
            with m.State("start"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    m.d.sync += [timer.eq(self.clocks_per_bit - 1), bits.eq(0)]
                    m.next = "data"
                    with m.If(rx):  # a glitch, not a start bit
                        m.next = "idle"
            with m.State("data"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    m.d.sync += [timer.eq(self.clocks_per_bit - 1), shift.eq(Cat(shift[1:], rx)),
                                 bits.eq(bits + 1)]
                    with m.If(bits == 7):
                        m.next = "stop"
            with m.State("stop"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    with m.If(rx):  # a framing error (low stop bit) drops the byte
                        m.d.sync += [self.data.payload.eq(shift), self.data.valid.eq(1)]
                    m.next = "idle"
        return m


class UartTransmitter(wiring.Component):
    """8N1 transmitter: a stream of bytes in, ``tx`` pin out."""

    def __init__(self, clocks_per_bit: int):
        self.clocks_per_bit = _check(self, clocks_per_bit)
        super().__init__({"data": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.clocks_per_bit))
        # Stop bit, 8 data bits (LSB first), start bit: shifted out from bit 0.
        frame = Signal(10, init=0x3FF)
        bits_left = Signal(range(11))

        m.d.comb += [self.tx.eq(frame[0]), self.data.ready.eq(bits_left == 0)]
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += [frame.eq(Cat(0, self.data.payload, 1)), bits_left.eq(10),
                         timer.eq(self.clocks_per_bit - 1)]
        with m.Elif(bits_left != 0):
            m.d.sync += timer.eq(timer - 1)
            with m.If(timer == 0):
                m.d.sync += [frame.eq(Cat(frame[1:], 1)), bits_left.eq(bits_left - 1),
                             timer.eq(self.clocks_per_bit - 1)]
        return m
