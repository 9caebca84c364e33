"""The board's host link: decodes the UART byte protocol of `hw.boards.protocol`.

Dataflow: bytes arrive on ``rx`` (from `UartReceiver`); the command byte picks
how many argument bytes follow (`board_protocol.ARGUMENT_BYTES`), which are
gathered little-endian into one register; then the command runs: ``WRITE``
stores each following data byte through the on-chip memory's host port,
``READ`` reads bytes one at a time and sends each on ``tx`` (to
`UartTransmitter`), ``SET_REG`` sets the accelerator's program address or
count, ``START`` pulses the accelerator's ``start``, and the reply of
``INFO``/``STATUS``/``COUNTERS`` is sent from one byte multiplexer (no wide
shift register). With a DRAM, ``CSR_WRITE`` writes a word of its controller's
CSR bus and ``CSR_READ`` reads one (the bus sees an unmapped address
otherwise, so nothing else reads a CSR). Every command ends with its `Status`
byte.

``running`` rises with ``start`` and falls when the accelerator's ``done`` is
seen after it (``done`` is ignored for the first cycles after ``start``, while
the accelerator clears it). While ``running`` the memory belongs to the
accelerator (``host_owns`` low) and memory commands are refused.
"""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.boards import protocol
from vdla.hw.boards.dram import DRAM_KINDS, csr_ports
from vdla.hw.boards.memory import read_latency
from vdla.hw.config import HwConfig
from vdla.hw.counters import rtl_counters
from vdla.hw.layouts import log2

__all__ = ["HostLink"]

Command, Status = protocol.Command, protocol.Status
# Cycles after `start` during which a stale `done` of the previous program is ignored.
DONE_SETTLE_CYCLES = 3


def info_bytes(config: HwConfig, memory_bytes: int, memory_kind: str = "bram",
               dram_phy: bool = False) -> list[int]:
    """INFO's reply, as `board_protocol` lays it out."""
    data = [protocol.PROTOCOL_VERSION, config.dram_bus_bytes, log2(memory_bytes)]
    data += list(bytes.fromhex(config.hash))
    data.append(protocol.memory_code(DRAM_KINDS, memory_kind if memory_kind in DRAM_KINDS
                                     else None, dram_phy))
    assert len(data) == protocol.INFO_BYTES
    return data


class HostLink(wiring.Component):
    """The protocol engine between the UART and the accelerator with its memory.

    ``memory_kind`` is the memory's (`board_memory.MEMORY_KINDS`, or a DRAM of
    `board_dram.DRAM_KINDS`): it sets the read latency the link waits for. A
    DRAM raises ``host_busy`` while a host access is under way; the link then
    holds its next byte access, and a read's byte until it falls (on-chip
    memories leave it low). A DRAM's CSR bus is driven by the CSR commands;
    ``dram_phy`` says in INFO that it is the real PHY's controller.
    """

    def __init__(self, config: HwConfig, memory_bytes: int, memory_kind: str = "bram",
                 dram_phy: bool = False):
        self.config = config
        self.memory_bytes = memory_bytes
        self.memory_kind = memory_kind
        self.dram_phy = dram_phy
        self.has_csr = memory_kind in DRAM_KINDS
        # A DRAM keeps a read's word in a register once ``host_busy`` falls.
        self.read_latency = 1 if self.has_csr else read_latency(memory_kind)
        members = {
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "host_owns": Out(1),
            "host_addr": Out(32),
            "host_write": Out(1),
            "host_wdata": Out(8),
            "host_read": Out(1),
            "host_rdata": In(8),
            "host_busy": In(1),
            "start": Out(1),
            "insn_addr": Out(32),
            "insn_count": Out(32),
            "done": In(1),
            "running": Out(1),
        }
        members.update({f"counter_{name}": In(32) for name in rtl_counters(config)})
        if self.has_csr:   # the DRAM's CSR bus, flipped: the link drives it
            members.update({name: member.flip() for name, member in csr_ports().items()})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        command = Signal(8)
        address = Signal(32)
        count = Signal(32)
        # Argument bytes land straight in the registers that use them (no
        # separate 64-bit argument register): WRITE/READ's address and count,
        # SET_REG's register byte and value in address[:8] and address[8:] + count[:8].
        arguments = Cat(address, count)
        argument_index = Signal(range(9))
        status = Signal(8)
        settle = Signal(range(DONE_SETTLE_CYCLES + 1))
        wait = Signal(range(self.read_latency))

        # Reply bytes: INFO's constants, the STATUS byte, the counters (little-endian).
        info = info_bytes(self.config, self.memory_bytes, self.memory_kind, self.dram_phy)
        counters = [getattr(self, f"counter_{name}") for name in rtl_counters(self.config)]
        status_byte = Cat(self.done & ~self.running, self.running, Const(0, 6))
        # CSR_READ's word waits in ``count`` (its command has no count).
        csr_word = ([count.word_select(i, 8) for i in range(protocol.CSR_BYTES)]
                    if self.has_csr else [])
        replies = Array([Const(byte, 8) for byte in info] + [status_byte]
                        + [counter.word_select(i, 8) for counter in counters for i in range(4)]
                        + csr_word)
        first_reply = {Command.INFO: 0, Command.STATUS: len(info), Command.COUNTERS: len(info) + 1}
        csr_reply = len(replies) - protocol.CSR_BYTES
        commands = {code: length for code, length in protocol.ARGUMENT_BYTES.items()
                    if self.has_csr or code not in protocol.CSR_COMMANDS}
        if self.has_csr:
            m.d.comb += [self.csr_addr.eq(-1), self.csr_wdata.eq(count)]
        reply_index = Signal(range(len(replies) + 1))
        reply_end = Signal(range(len(replies) + 1))

        m.d.comb += [self.host_owns.eq(~self.running), self.host_addr.eq(address),
                     self.host_wdata.eq(self.rx.payload)]
        m.d.sync += self.start.eq(0)
        with m.If(self.running):
            with m.If(settle != 0):
                m.d.sync += settle.eq(settle - 1)
            with m.Elif(self.done):
                m.d.sync += self.running.eq(0)

        busy_status = Mux(self.running, Status.BUSY, Status.OK)

        def send_status(value):
            m.d.sync += status.eq(value)
            m.next = "status"

        with m.FSM():
            with m.State("command"):
                m.d.comb += self.rx.ready.eq(1)
                with m.If(self.rx.valid):
                    m.d.sync += [command.eq(self.rx.payload), argument_index.eq(0)]
                    with m.Switch(self.rx.payload):
                        for code, length in commands.items():
                            with m.Case(code):
                                m.next = "arguments" if length else "execute"
                        with m.Default():
                            send_status(Status.UNKNOWN)
            with m.State("arguments"):
                m.d.comb += self.rx.ready.eq(1)
                with m.If(self.rx.valid):
                    m.d.sync += [arguments.word_select(argument_index, 8).eq(self.rx.payload),
                                 argument_index.eq(argument_index + 1)]
                    with m.Switch(command):
                        for code, length in commands.items():
                            if length:
                                with m.Case(code):
                                    with m.If(argument_index == length - 1):
                                        m.next = "execute"
            with m.State("execute"):
                with m.Switch(command):
                    with m.Case(Command.WRITE):
                        m.next = "write"
                    with m.Case(Command.READ):
                        m.next = "read"
                    with m.Case(Command.SET_REG):
                        with m.Switch(arguments[:8]):
                            with m.Case(protocol.Register.INSN_ADDR):
                                m.d.sync += self.insn_addr.eq(arguments[8:40])
                            with m.Case(protocol.Register.INSN_COUNT):
                                m.d.sync += self.insn_count.eq(arguments[8:40])
                        send_status(Status.OK)
                    with m.Case(Command.START):
                        with m.If(~self.running):
                            m.d.sync += [self.start.eq(1), self.running.eq(1),
                                         settle.eq(DONE_SETTLE_CYCLES)]
                        send_status(busy_status)
                    for code, first in first_reply.items():
                        with m.Case(code):
                            end = first + protocol.reply_bytes(code, len(counters))
                            m.d.sync += [reply_index.eq(first), reply_end.eq(end),
                                         status.eq(Status.OK)]
                            m.next = "reply"
                    if self.has_csr:
                        with m.Case(Command.CSR_WRITE):
                            m.d.comb += [self.csr_addr.eq(address),
                                         self.csr_write.eq(~self.running)]
                            send_status(busy_status)
                        with m.Case(Command.CSR_READ):
                            m.d.comb += self.csr_addr.eq(address)
                            m.next = "csr_read"
            with m.State("write"):
                with m.If(count == 0):
                    send_status(busy_status)
                with m.Else():
                    m.d.comb += [self.rx.ready.eq(~self.host_busy),
                                 self.host_write.eq(self.rx.valid & ~self.running
                                                    & ~self.host_busy)]
                    with m.If(self.rx.valid & ~self.host_busy):
                        m.d.sync += [address.eq(address + 1), count.eq(count - 1)]
            with m.State("read"):
                with m.If(count == 0):
                    send_status(busy_status)
                with m.Elif(~self.host_busy):
                    m.d.comb += self.host_read.eq(~self.running)
                    m.d.sync += wait.eq(self.read_latency - 1)
                    m.next = "read_wait"
            with m.State("read_wait"):  # the memory's read pipeline
                m.d.sync += wait.eq(wait - 1)
                with m.If((wait == 0) & ~self.host_busy):
                    m.next = "read_send"
            with m.State("read_send"):
                m.d.comb += [self.tx.valid.eq(1),
                             self.tx.payload.eq(Mux(self.running, 0, self.host_rdata))]
                with m.If(self.tx.ready):
                    m.d.sync += [address.eq(address + 1), count.eq(count - 1)]
                    m.next = "read"
            if self.has_csr:
                with m.State("csr_read"):   # the word, a cycle after its address
                    m.d.comb += self.csr_addr.eq(address)
                    m.d.sync += [count.eq(Mux(self.running, 0, self.csr_rdata)),
                                 reply_index.eq(csr_reply), reply_end.eq(len(replies)),
                                 status.eq(busy_status)]
                    m.next = "reply"
            with m.State("reply"):
                m.d.comb += [self.tx.valid.eq(1), self.tx.payload.eq(replies[reply_index])]
                with m.If(self.tx.ready):
                    m.d.sync += reply_index.eq(reply_index + 1)
                    with m.If(reply_index + 1 == reply_end):
                        m.next = "status"
            with m.State("status"):
                m.d.comb += [self.tx.valid.eq(1), self.tx.payload.eq(status)]
                with m.If(self.tx.ready):
                    m.next = "command"
        return m
