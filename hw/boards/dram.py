"""A DRAM behind LiteDRAM in place of the board's on-chip memory: the accelerator's
memory port and the host link's byte port on one LiteDRAM native user port.

`DramMemory` has the ports of `hw.boards.memory.OnChipMemory` plus
``host_busy``, and holds an `Instance` of the controller that
`hw.boards.litedram_gen.litedram_verilog` generates (LiteDRAM's controller and, in
simulation, its DRAM module model). LiteDRAM's native port moves one port
word per command: a bus word, or (the ECPIX-5's DDR3 at 1:2: 128 bits, one
BL8 burst of 16 bits) a controller word of ``lanes`` bus words. One state
machine turns each burst into commands:

* an accelerator read burst issues one read command per port word it
  touches, as long as the read FIFO has room for every read in flight (the
  native port's read data must be taken when it comes); with each command
  the lanes it wants (first, last) go into a FIFO beside the data, by which
  the beats are picked from the port words as they leave the FIFO at the
  accelerator's pace; the machine goes on to the next burst while they do
  (the port returns data in command order). LiteDRAM's own up-converter
  (a bus-wide port on a wider controller) keeps only one controller read in
  flight, its command buffer being of depth 0, so its reads would not
  overlap;
* an accelerator write burst sends each beat as a write command with its
  data, replicated on every lane, and the beat's byte strobes on its lane
  (command and data offered together: the native port takes the data when
  the controller runs the command, for one cycle, whether or not it is
  valid; offered after the command, a write the controller runs at once
  lost its data and the machine waited for ever);
* a host byte write is one port-word write with one byte enabled, a host
  byte read one port-word read whose word is kept for ``host_rdata``.
  ``host_busy`` is high from the cycle after ``host_write``/``host_read``
  until the access is done; the host link waits for it
  (`hw.boards.host_link`).

The controller's CSR bus (``csr_addr``, ``csr_write``, ``csr_wdata``,
``csr_rdata``: LiteX's, word addressed, one cycle per access, read data the
cycle after the address) goes to the host link, which runs the DRAM's init
sequence and read leveling through it (`sim.dram_bringup`).

In simulation the controller drives LiteDRAM's DRAM module model; for a
bitstream (``pins`` given, `DramPins`) it drives the DRAM's real PHY on the
board's pins (`board_pin`), in the clock domains the PHY names, which the
board's clock generator makes (`hw.boards.bitstream`; the ECP5 DDR3 PHY's ``sys2x`` and
``init``), and passes it the PHY's controls (the ECP5 DDR3 PHY stops and
resets the ``sys2x`` clock during its start-up).

Read and write bursts take turns when both wait. Addresses wrap at the
DRAM's size. ``done`` of the accelerator comes after its last write was taken
by the controller; a host read after it sees the data, since LiteDRAM keeps
a bank's commands in order.
"""

from __future__ import annotations

import dataclasses

from amaranth import Cat, ClockSignal, Instance, Module, Mux, ResetSignal, Signal
from amaranth.lib import io, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from vdla.hw.boards.memory import memory_ports
from vdla.hw.config import HwConfig
from vdla.hw.layouts import burst_beats_bits, log2
from vdla.hw.boards.litedram_gen import (CSR_ADDRESS_BITS, CSR_DATA_BITS, LITEDRAM_PHY_TOP_NAME,
                                  LITEDRAM_TOP_NAME, MODULES, litedram_verilog)

__all__ = ["DramMemory", "DramPins", "DRAM_KINDS", "READ_FIFO_DEPTH", "board_pin", "csr_ports"]

DRAM_KINDS = tuple(MODULES)
# Read data buffered towards the accelerator (and reads in flight at most):
# enough to cover the controller's read latency at one word per command.
READ_FIFO_DEPTH = 16


def csr_ports() -> dict:
    """The controller's CSR bus, as the DRAM memory takes it from the host link."""
    return {"csr_addr": In(CSR_ADDRESS_BITS), "csr_write": In(1),
            "csr_wdata": In(CSR_DATA_BITS), "csr_rdata": Out(CSR_DATA_BITS)}


@dataclasses.dataclass(frozen=True)
class DramPins:
    """What a bitstream's DRAM memory drives beyond its ports.

    Attributes
    ----------
    pins : object
        The platform's DRAM resource, requested with ``dir="-"`` (amaranth-boards'
        ``ddr3`` or ``sdram``); the PHY drives the pins themselves.
    controls : dict of str to Signal
        The PHY's outputs to the board's clock generator, by name
        (`hw.boards.litedram_gen.PhyKind.controls`: the ECP5 DDR3 PHY's ``eclk_stop``
        and ``eclk_reset``).
    """

    pins: object
    controls: dict = dataclasses.field(default_factory=dict)


def board_pin(pins, pad: str):
    """The raw pin of amaranth-boards' DRAM resource ``pins`` that LiteDRAM's pad
    ``pad`` drives and whether it is bidirectional, or None where the board has
    none (the ECPIX-5's DDR3 ``reset_n``). LiteDRAM's ``ras_n``, ``cas_n``, ``we_n``, ``cs_n`` are the
    levels of amaranth-boards' inverted ``ras``, ``cas``, ``we``, ``cs``; its
    ``cke`` is ``clk_en``, its ``dm`` the SDRAM's ``dqm``; of a differential
    pair (``clk_p``, ``dqs_p``) the ``p`` pin, which the ECP5 drives as a pair
    by its differential I/O type."""
    name = {"cke": "clk_en"}.get(pad, pad.removesuffix("_n").removesuffix("_p"))
    if name == "dm" and not hasattr(pins, "dm"):
        name = "dqm"
    if not hasattr(pins, name):
        return None
    port = getattr(pins, name)
    return (port.p if pad.endswith("_p") else port.io), port.direction == io.Direction.Bidir


class DramMemory(wiring.Component):
    """The accelerator's DRAM port and a host byte port on a LiteDRAM controller.

    Parameters
    ----------
    config : HwConfig
    kind : str
        One of `DRAM_KINDS` (`hw.boards.litedram_gen.MODULES`).
    pins : DramPins, optional
        A bitstream's DRAM pins: the controller then drives the DRAM's PHY
        (`hw.boards.litedram_gen.LITEDRAM_PHY_TOP_NAME`) instead of the model.
    """

    def __init__(self, config: HwConfig, kind: str, pins: DramPins | None = None):
        if kind not in DRAM_KINDS:
            raise ValueError(f"kind: one of {', '.join(DRAM_KINDS)}, got {kind!r}")
        self.config = config
        self.kind = kind
        self.pins = pins
        self.memory_bytes = MODULES[kind].size_bytes
        super().__init__({**memory_ports(config, host_busy=True), **csr_ports()})

    def _controller(self, generated, ports: dict) -> Instance:
        """The ``generated`` controller with ``ports`` (its user port) and the CSR
        bus: the model's, or with ``pins`` the PHY's on the board's pins, in its
        clock domains (the board's clock generator makes them)."""
        csr = dict(i_csr_adr=self.csr_addr, i_csr_we=self.csr_write, i_csr_dat_w=self.csr_wdata,
                   o_csr_dat_r=self.csr_rdata)
        clocks = {}
        for name, domain in (("sys", "sync"), *((name, name) for name in generated.clocks)):
            clocks[f"i_{name}_clk"] = ClockSignal(domain)
            clocks[f"i_{name}_rst"] = ResetSignal(domain, allow_reset_less=True)
        if self.pins is None:
            return Instance(LITEDRAM_TOP_NAME, **clocks, **ports, **csr)
        pins = {}
        for pad in generated.pads:
            found = board_pin(self.pins.pins, pad)
            if found is not None:
                pin, inout = found
                pins[f"{'io' if inout else 'o'}_ddram_{pad}"] = pin
        return Instance(LITEDRAM_PHY_TOP_NAME, **clocks, **ports, **csr, **pins,
                        **{f"o_{name}": self.pins.controls[name] for name in generated.controls})

    def elaborate(self, platform):
        m = Module()
        generated = litedram_verilog(MODULES[self.kind], self.config.dram_bus_bits,
                                     hardware=self.pins is not None)
        build = _DramBuild(self, m, generated)
        build.native_port()
        build.read_fifo()
        build.addressing()
        build.lane_picker()
        build.bursts()
        build.read_data_out()
        return m


class _DramBuild:
    """One `DramMemory`'s logic, added part by part to its module; the parts
    share the native port's signals and the burst machine's registers, kept
    here."""

    def __init__(self, memory: DramMemory, m: Module, generated):
        self.memory, self.m, self.generated = memory, m, generated
        self.bus_bits = memory.config.dram_bus_bits
        self.word_shift = log2(memory.config.dram_bus_bytes)
        self.port_bits = generated.data_bits
        self.port_bytes = self.port_bits // 8
        self.lanes = self.port_bits // self.bus_bits  # bus words per port word (2 for DDR3 at 64 bits)
        self.lane_bits = log2(self.lanes)

    def native_port(self):
        """LiteDRAM's native user port, on the controller."""
        # The grouping keeps the RTLIL's names: Amaranth names a signal after the
        # target its constructor's result is stored in straight away, which in
        # ``a, b = Signal(), Signal()`` is only a local ``b``, no attribute.
        self.cmd_valid, self.cmd_ready, self.cmd_we = Signal(), Signal(), Signal()
        self.cmd_addr = Signal(self.generated.address_bits)
        self.wdata_valid, self.wdata_ready = Signal(), Signal()
        self.wdata_data, self.wdata_we = Signal(self.port_bits), Signal(self.port_bytes)
        rdata_valid, rdata_ready, rdata_data = Signal(), Signal(), Signal(self.port_bits)
        self.m.submodules.controller = self.memory._controller(self.generated, dict(
            i_cmd_valid=self.cmd_valid, o_cmd_ready=self.cmd_ready, i_cmd_we=self.cmd_we,
            i_cmd_addr=self.cmd_addr, i_wdata_valid=self.wdata_valid,
            o_wdata_ready=self.wdata_ready, i_wdata_data=self.wdata_data,
            i_wdata_we=self.wdata_we, o_rdata_valid=rdata_valid, i_rdata_ready=rdata_ready,
            o_rdata_data=rdata_data))
        self.rdata_valid, self.rdata_ready, self.rdata_data = rdata_valid, rdata_ready, rdata_data

    def read_fifo(self):
        """Read data into a FIFO, out to the accelerator or (host reads) a word
        register; ``room`` while it has room for every read in flight."""
        m = self.m
        m.submodules.read_fifo = fifo = SyncFIFOBuffered(width=self.port_bits,
                                                         depth=READ_FIFO_DEPTH)
        in_flight = Signal(range(READ_FIFO_DEPTH + 1))
        issued = Signal()   # a read command taken this cycle
        m.d.comb += [self.rdata_ready.eq(1), fifo.w_data.eq(self.rdata_data),
                     fifo.w_en.eq(self.rdata_valid)]
        m.d.sync += in_flight.eq(in_flight + issued - self.rdata_valid)
        self.fifo, self.issued = fifo, issued
        self.room = fifo.level + in_flight < READ_FIFO_DEPTH

    def addressing(self):
        """The burst machine's registers: the next command's bus word, the beats
        left, and the host access's word, data and strobes."""
        m, memory, lanes, lane_bits = self.m, self.memory, self.lanes, self.lane_bits
        word = Signal(self.generated.address_bits + lane_bits)     # the next command's bus word
        lane = word[:lane_bits] if lanes > 1 else 0
        beats_left = Signal(burst_beats_bits(memory.config))
        # The beats one read command covers: to the end of its port word or of the burst.
        covered = Signal.like(beats_left)
        m.d.comb += covered.eq(Mux(beats_left < lanes - lane, beats_left, lanes - lane)
                               if lanes > 1 else 1)
        host_word = Signal(self.port_bits)       # a host read's port word
        host_byte = memory.host_addr[:log2(self.port_bytes)]
        host_data = Signal(self.port_bits)
        host_strobes = Signal(self.port_bytes)
        reads_last = Signal()               # the last burst taken was a read (take turns)
        m.d.comb += [memory.host_rdata.eq(host_word.word_select(host_byte, 8)),
                     self.cmd_addr.eq(word[lane_bits:])]
        self.word, self.lane, self.beats_left, self.covered = word, lane, beats_left, covered
        self.host_word, self.host_byte = host_word, host_byte
        self.host_data, self.host_strobes, self.reads_last = host_data, host_strobes, reads_last

    def lane_picker(self):
        """Several bus words per port word: with each read command, the lanes it
        asked for (first, last) go into a FIFO beside the data's, and the
        accelerator's beats are picked from the port words by them. ``pick``: this
        beat is its port word's last one."""
        m, memory, fifo, lane_bits = self.m, self.memory, self.fifo, self.lane_bits
        self.pick, self.lane_fifo = 1, None
        if self.lanes == 1:
            m.d.comb += memory.rd_data.payload.eq(fifo.r_data)
            return
        m.submodules.lane_fifo = lane_fifo = SyncFIFOBuffered(width=2 * lane_bits,
                                                              depth=READ_FIFO_DEPTH)
        m.d.comb += [lane_fifo.w_data.eq(Cat(self.lane, (self.lane + self.covered - 1)[:lane_bits])),
                     lane_fifo.w_en.eq(self.issued)]
        first, last = lane_fifo.r_data[:lane_bits], lane_fifo.r_data[lane_bits:]
        started = Signal()              # the head word gave some of its beats
        next_lane = Signal(lane_bits)
        current = Mux(started, next_lane, first)
        pick = current == last
        m.d.comb += memory.rd_data.payload.eq(fifo.r_data.word_select(current, self.bus_bits))
        with m.If(~memory.host_owns & memory.rd_data.valid & memory.rd_data.ready):
            m.d.sync += [started.eq(~pick), next_lane.eq(current + 1)]
        self.pick, self.lane_fifo = pick, lane_fifo

    def bursts(self):
        """The state machine that turns bursts and host accesses into commands;
        ``host_busy`` while it is not idle."""
        m = self.m
        # A write: its command and its data are offered together, each until taken
        # (LiteDRAM's native port takes the data when the controller runs the
        # command, with ``wdata_ready`` for one cycle, not waiting for
        # ``wdata_valid``; a converter in front of it may take them in either
        # order); ``written`` when both have been.
        self.command_taken, self.data_taken, self.written = Signal(), Signal(), Signal()
        written = self.written
        with m.FSM() as fsm:
            with m.State("idle"):
                self._idle()
            with m.State("read"):
                self._read()
            with m.State("write"):
                self._write()
            with m.State("host_write"):
                self._offer_write(1, self.host_data, self.host_strobes)
                with m.If(written):
                    m.next = "idle"
            with m.State("host_read"):
                m.d.comb += [self.cmd_valid.eq(1), self.cmd_we.eq(0),
                             self.issued.eq(self.cmd_ready)]
                with m.If(self.cmd_ready):
                    m.next = "host_read_data"
            with m.State("host_read_data"):
                m.d.comb += self.fifo.r_en.eq(1)
                if self.lanes > 1:
                    m.d.comb += self.lane_fifo.r_en.eq(1)
                with m.If(self.fifo.r_rdy):
                    m.d.sync += self.host_word.eq(self.fifo.r_data)
                    m.next = "idle"
        m.d.comb += self.memory.host_busy.eq(~fsm.ongoing("idle"))

    def _idle(self):
        """A host access while the host owns the port, else a burst: reads and
        writes take turns when both wait."""
        m, memory = self.m, self.memory
        host_word_address = (memory.host_addr >> self.word_shift)[:len(self.word)]
        with m.If(memory.host_owns):
            m.d.sync += [self.word.eq(host_word_address),
                         self.host_data.eq(memory.host_wdata.replicate(self.port_bytes)),
                         self.host_strobes.eq(1 << self.host_byte)]
            with m.If(memory.host_write):
                m.next = "host_write"
            with m.Elif(memory.host_read):
                m.next = "host_read"
        with m.Elif(memory.rd_req.valid & (~memory.wr_req.valid | ~self.reads_last)):
            self._take(memory.rd_req, "read", 1)
        with m.Elif(memory.wr_req.valid):
            self._take(memory.wr_req, "write", 0)

    def _take(self, request, state: str, read: int):
        """Take ``request``'s burst, to ``state``."""
        m = self.m
        m.d.comb += request.ready.eq(1)
        m.d.sync += [self.word.eq(request.payload.addr >> self.word_shift),
                     self.beats_left.eq(request.payload.beats), self.reads_last.eq(read)]
        m.next = state

    def _read(self):
        """One read command per port word the burst touches, while the FIFO has room."""
        m, room, covered = self.m, self.room, self.covered
        m.d.comb += [self.cmd_valid.eq(room), self.cmd_we.eq(0),
                     self.issued.eq(room & self.cmd_ready)]
        with m.If(room & self.cmd_ready):
            m.d.sync += [self.word.eq(self.word + covered),
                         self.beats_left.eq(self.beats_left - covered)]
            with m.If(self.beats_left == covered):
                m.next = "idle"

    def _write(self):
        """One write per beat, its data replicated on every lane, its strobes on
        its lane of the port word."""
        m, memory, lanes = self.m, self.memory, self.lanes
        strobes = memory.wr_data.payload.strb
        self._offer_write(memory.wr_data.valid, memory.wr_data.payload.data.replicate(lanes),
                          Cat(Mux(self.lane == index, strobes, 0) for index in range(lanes))
                          if lanes > 1 else strobes)
        m.d.comb += memory.wr_data.ready.eq(self.written)
        with m.If(self.written):
            m.d.sync += [self.word.eq(self.word + 1), self.beats_left.eq(self.beats_left - 1)]
            with m.If(self.beats_left == 1):
                m.next = "idle"

    def _offer_write(self, valid, data, enables):
        """A write command and its data, offered together, each until taken."""
        m = self.m
        cmd_valid, cmd_ready = self.cmd_valid, self.cmd_ready
        wdata_valid, wdata_ready = self.wdata_valid, self.wdata_ready
        command_taken, data_taken = self.command_taken, self.data_taken
        m.d.comb += [cmd_valid.eq(valid & ~command_taken), self.cmd_we.eq(1),
                     wdata_valid.eq(valid & ~data_taken), self.wdata_data.eq(data),
                     self.wdata_we.eq(enables),
                     self.written.eq((command_taken | cmd_valid & cmd_ready)
                                     & (data_taken | wdata_valid & wdata_ready))]
        with m.If(self.written):
            m.d.sync += [command_taken.eq(0), data_taken.eq(0)]
        with m.Else():
            with m.If(cmd_valid & cmd_ready):
                m.d.sync += command_taken.eq(1)
            with m.If(wdata_valid & wdata_ready):
                m.d.sync += data_taken.eq(1)

    def read_data_out(self):
        """Accelerator read data leave the FIFO whenever the host does not own the
        port: a port word (and its lanes, which are there before it) once its
        last lane asked for is taken."""
        m, memory = self.m, self.memory
        with m.If(~memory.host_owns):
            taken = memory.rd_data.valid & memory.rd_data.ready & self.pick
            m.d.comb += [memory.rd_data.valid.eq(self.fifo.r_rdy), self.fifo.r_en.eq(taken)]
            if self.lanes > 1:
                m.d.comb += self.lane_fifo.r_en.eq(taken)
