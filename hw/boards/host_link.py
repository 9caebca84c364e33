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
        build = _LinkBuild(self, m)
        build.replies()
        build.start_and_done()
        with m.FSM():
            build.receive()
            build.execute()
            build.memory_access()
            build.send()
        return m


class _LinkBuild:
    """One `HostLink`'s logic, added part by part to its module; the parts share
    the command's registers and the reply's, kept here."""

    def __init__(self, link: HostLink, m: Module):
        self.link, self.m = link, m
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
        wait = Signal(range(link.read_latency))
        self.command, self.address, self.count, self.arguments = command, address, count, arguments
        self.argument_index, self.status, self.settle, self.wait = (argument_index, status,
                                                                    settle, wait)
        self.busy_status = Mux(link.running, Status.BUSY, Status.OK)

    def replies(self):
        """Reply bytes: INFO's constants, the STATUS byte, the counters
        (little-endian), and with a DRAM CSR_READ's word; the commands the link
        knows."""
        m, link, count = self.m, self.link, self.count
        info = info_bytes(link.config, link.memory_bytes, link.memory_kind, link.dram_phy)
        counters = [getattr(link, f"counter_{name}") for name in rtl_counters(link.config)]
        status_byte = Cat(link.done & ~link.running, link.running, Const(0, 6))
        # CSR_READ's word waits in ``count`` (its command has no count).
        csr_word = ([count.word_select(i, 8) for i in range(protocol.CSR_BYTES)]
                    if link.has_csr else [])
        replies = Array([Const(byte, 8) for byte in info] + [status_byte]
                        + [counter.word_select(i, 8) for counter in counters for i in range(4)]
                        + csr_word)
        self.first_reply = {Command.INFO: 0, Command.STATUS: len(info),
                            Command.COUNTERS: len(info) + 1}
        self.csr_reply = len(replies) - protocol.CSR_BYTES
        self.commands = {code: length for code, length in protocol.ARGUMENT_BYTES.items()
                         if link.has_csr or code not in protocol.CSR_COMMANDS}
        if link.has_csr:
            m.d.comb += [link.csr_addr.eq(-1), link.csr_wdata.eq(count)]
        reply_index = Signal(range(len(replies) + 1))
        reply_end = Signal(range(len(replies) + 1))
        self.counters, self.replies = counters, replies
        self.reply_index, self.reply_end = reply_index, reply_end

    def start_and_done(self):
        """The host's memory port, and ``running`` from ``start`` to the
        accelerator's ``done`` (ignored while ``settle`` counts down)."""
        m, link, settle = self.m, self.link, self.settle
        m.d.comb += [link.host_owns.eq(~link.running), link.host_addr.eq(self.address),
                     link.host_wdata.eq(link.rx.payload)]
        m.d.sync += link.start.eq(0)
        with m.If(link.running):
            with m.If(settle != 0):
                m.d.sync += settle.eq(settle - 1)
            with m.Elif(link.done):
                m.d.sync += link.running.eq(0)

    def _send_status(self, value):
        self.m.d.sync += self.status.eq(value)
        self.m.next = "status"

    def receive(self):
        """The command byte, then its argument bytes."""
        m, link, argument_index = self.m, self.link, self.argument_index
        with m.State("command"):
            m.d.comb += link.rx.ready.eq(1)
            with m.If(link.rx.valid):
                m.d.sync += [self.command.eq(link.rx.payload), argument_index.eq(0)]
                with m.Switch(link.rx.payload):
                    for code, length in self.commands.items():
                        with m.Case(code):
                            m.next = "arguments" if length else "execute"
                    with m.Default():
                        self._send_status(Status.UNKNOWN)
        with m.State("arguments"):
            m.d.comb += link.rx.ready.eq(1)
            with m.If(link.rx.valid):
                m.d.sync += [self.arguments.word_select(argument_index, 8).eq(link.rx.payload),
                             argument_index.eq(argument_index + 1)]
                with m.Switch(self.command):
                    for code, length in self.commands.items():
                        if length:
                            with m.Case(code):
                                with m.If(argument_index == length - 1):
                                    m.next = "execute"

    def execute(self):
        """The command runs: to its state, or done in this cycle."""
        m, link, arguments = self.m, self.link, self.arguments
        with m.State("execute"):
            with m.Switch(self.command):
                with m.Case(Command.WRITE):
                    m.next = "write"
                with m.Case(Command.READ):
                    m.next = "read"
                with m.Case(Command.SET_REG):
                    with m.Switch(arguments[:8]):
                        with m.Case(protocol.Register.INSN_ADDR):
                            m.d.sync += link.insn_addr.eq(arguments[8:40])
                        with m.Case(protocol.Register.INSN_COUNT):
                            m.d.sync += link.insn_count.eq(arguments[8:40])
                    self._send_status(Status.OK)
                with m.Case(Command.START):
                    with m.If(~link.running):
                        m.d.sync += [link.start.eq(1), link.running.eq(1),
                                     self.settle.eq(DONE_SETTLE_CYCLES)]
                    self._send_status(self.busy_status)
                for code, first in self.first_reply.items():
                    with m.Case(code):
                        end = first + protocol.reply_bytes(code, len(self.counters))
                        m.d.sync += [self.reply_index.eq(first), self.reply_end.eq(end),
                                     self.status.eq(Status.OK)]
                        m.next = "reply"
                if link.has_csr:
                    with m.Case(Command.CSR_WRITE):
                        m.d.comb += [link.csr_addr.eq(self.address),
                                     link.csr_write.eq(~link.running)]
                        self._send_status(self.busy_status)
                    with m.Case(Command.CSR_READ):
                        m.d.comb += link.csr_addr.eq(self.address)
                        m.next = "csr_read"

    def memory_access(self):
        """WRITE's data bytes into the memory, READ's bytes out of it, one at a
        time, each held while the memory is busy."""
        m, link, address, count, wait = self.m, self.link, self.address, self.count, self.wait
        with m.State("write"):
            with m.If(count == 0):
                self._send_status(self.busy_status)
            with m.Else():
                m.d.comb += [link.rx.ready.eq(~link.host_busy),
                             link.host_write.eq(link.rx.valid & ~link.running
                                                & ~link.host_busy)]
                with m.If(link.rx.valid & ~link.host_busy):
                    m.d.sync += [address.eq(address + 1), count.eq(count - 1)]
        with m.State("read"):
            with m.If(count == 0):
                self._send_status(self.busy_status)
            with m.Elif(~link.host_busy):
                m.d.comb += link.host_read.eq(~link.running)
                m.d.sync += wait.eq(link.read_latency - 1)
                m.next = "read_wait"
        with m.State("read_wait"):  # the memory's read pipeline
            m.d.sync += wait.eq(wait - 1)
            with m.If((wait == 0) & ~link.host_busy):
                m.next = "read_send"
        with m.State("read_send"):
            m.d.comb += [link.tx.valid.eq(1),
                         link.tx.payload.eq(Mux(link.running, 0, link.host_rdata))]
            with m.If(link.tx.ready):
                m.d.sync += [address.eq(address + 1), count.eq(count - 1)]
                m.next = "read"

    def send(self):
        """A CSR read's word, then a reply's bytes, then the status byte."""
        m, link, reply_index = self.m, self.link, self.reply_index
        if link.has_csr:
            with m.State("csr_read"):   # the word, a cycle after its address
                m.d.comb += link.csr_addr.eq(self.address)
                m.d.sync += [self.count.eq(Mux(link.running, 0, link.csr_rdata)),
                             reply_index.eq(self.csr_reply), self.reply_end.eq(len(self.replies)),
                             self.status.eq(self.busy_status)]
                m.next = "reply"
        with m.State("reply"):
            m.d.comb += [link.tx.valid.eq(1), link.tx.payload.eq(self.replies[reply_index])]
            with m.If(link.tx.ready):
                m.d.sync += reply_index.eq(reply_index + 1)
                with m.If(reply_index + 1 == self.reply_end):
                    m.next = "status"
        with m.State("status"):
            m.d.comb += [link.tx.valid.eq(1), link.tx.payload.eq(self.status)]
            with m.If(link.tx.ready):
                m.next = "command"
