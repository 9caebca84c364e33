"""The accelerator's configuration: the one source of truth for its shape.

`HwConfig` is frozen and validated on construction. Every width and depth the
rest of vdla needs (SRAM depths, index widths, bytes per element, DRAM beats)
is a property derived here, so no other file restates one. This module imports
nothing from Amaranth: the compiler, runtime and simulators use it freely.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import ClassVar

from vdla.errors import VdlaError
from vdla.hw import isa
from vdla.records import JsonRecord, read_record_text
from vdla.ints import ceil_div

__all__ = ["HwConfig", "ConfigError", "PRESETS", "load_config", "SRAM_KINDS", "ELEMENT_KINDS",
           "MemorySystem", "MEMORY_SYSTEMS"]

SRAM_KINDS = ("uop", "inp", "wgt", "acc")
"""The on-chip buffers a config sizes, each by its ``<kind>_buffer_bytes`` field."""
ELEMENT_KINDS = SRAM_KINDS + ("out",)
"""Every memory kind (`HwConfig.depth`, `HwConfig.element_bytes`; `hw.isa.MemType`'s
names): the SRAMs, and ``out``, the acc buffer read at the output width."""


class ConfigError(VdlaError, ValueError):
    """An impossible or malformed accelerator configuration."""


# A config's name names files (baselines, reports): a plain label only (no path
# separator, no leading dot); '=' and ',' let a sweep name a config by its
# varied fields ("block_out=8,dram_bus_bits=32").
_NAME = re.compile(r"[A-Za-z0-9_+\-][A-Za-z0-9_.+\-=,]{0,63}")
# Upper bounds that keep elaboration and simulation memory in reason; the
# ISA's 16-bit SRAM addresses bound the buffers (below).
_UPPER_BOUNDS = {"batch": 64, "block_in": 256, "block_out": 256, "cmd_queue_depth": 1024,
                 "token_queue_depth": 4096, "max_acc_banks": 64, "fetch_buffer_depth": 1024}
# Fields added after configs had been hashed: at these values they leave the
# hash (`HwConfig.hash`) as it was, so recorded baselines and program files
# still name their hardware.
_HASH_NEUTRAL = {"max_acc_banks": 4, "fetch_buffer_depth": 16, "dram_addr_bits": 32,
                 "event_counters": 1, "shared_load_engine": 0, "narrow_walkers": 0,
                 "ram_collision_dont_care": 0, "sequencer_gap": 0, "two_cycle_alu": 0,
                 "gemm_operand_stage": 0, "registered_load_walk": 0, "registered_dispatch": 0,
                 "registered_control": 0, "registered_load_data": 0, "gemm_tree_stage": 0,
                 "memory": "ideal", "lut_products": 0, "gemm_operand_copies": 1}
# The 0/1 switches among the fields.
_SWITCHES = ("event_counters", "shared_load_engine", "narrow_walkers", "ram_collision_dont_care",
             "sequencer_gap", "two_cycle_alu", "gemm_operand_stage", "registered_load_walk",
             "registered_dispatch", "registered_control", "registered_load_data",
             "gemm_tree_stage")
MAX_MACS_PER_CYCLE = 1 << 14
# Amaranth's netlist numbers a value's bits with 16 bits and needs one past the
# last (amaranth.hdl._nir.Net.from_cell), so no signal, and no SRAM entry, may
# reach 2^16 bits: a 128x128 int8 weight entry (131,072 bits) or a 128x64 one
# (65,536) fails inside Amaranth; 64x64 (32,768) elaborates.
MAX_ENTRY_BITS = (1 << 16) - 1


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


@dataclasses.dataclass(frozen=True)
class MemorySystem:
    """The bus and DRAM behind the accelerator's memory port, named by `HwConfig.memory`.

    The accelerator reads these rules (`hw.layouts.legal_burst`, the write
    response port of `hw.layouts.MemWriteSignature`); the RTL tier's DRAM
    model (``sim/rtl/harness.cpp``) gets every field as a ``VDLA_MEMORY_*``
    define and keeps them. Cycles are accelerator clock cycles; the read
    latency is the config's ``dram_read_latency``.

    Attributes
    ----------
    max_burst_beats : int
        Longest burst the bus allows (AXI4: 256, AXI3: 16).
    boundary_bytes : int
        A burst may not cross a multiple of this (AXI: 4096); 0: no rule.
    write_response_latency : int
        Cycles from a write burst's last beat to its write response (AXI's B
        channel); the burst's data is visible to reads from the response on.
        0: no response channel, beats visible when accepted.
    half_duplex : int
        1: reads and writes share one data bus (as DRAM's does); changing
        direction costs ``turnaround_cycles``. 0: independent channels.
    turnaround_cycles : int
    page_bytes, banks, row_miss_cycles : int
        Page model (``page_bytes`` 0: none): consecutive ``page_bytes`` of
        addresses rotate through ``banks`` banks, each with one open row; a
        beat in another row of its bank first waits ``row_miss_cycles``
        (precharge and activate).
    refresh_interval, refresh_cycles : int
        Every ``refresh_interval`` cycles (0: no refresh) the DRAM refreshes:
        no beat moves for ``refresh_cycles`` and every row closes.
    """

    max_burst_beats: int = 256
    boundary_bytes: int = 0
    write_response_latency: int = 0
    half_duplex: int = 0
    turnaround_cycles: int = 0
    page_bytes: int = 0
    banks: int = 1
    row_miss_cycles: int = 0
    refresh_interval: int = 0
    refresh_cycles: int = 0

    @property
    def write_response(self) -> bool:
        """Whether the memory answers each write burst (the store waits for it)."""
        return self.write_response_latency != 0


# The memory systems a config may name. Figures for the DRAM ones are for an
# accelerator clock of ~200 MHz: DDR3's tREFI 7.8 us (1560 cycles), tRFC
# 260 ns (52), tRP + tRCD ~27 ns (+ controller: 8), an 8 KiB page across a
# 64-bit rank of x16 chips, 8 banks; a write acknowledged by the controller
# ~16 cycles after its last beat; a bus turnaround (tWTR / read-to-write) of ~6.
MEMORY_SYSTEMS: dict[str, MemorySystem] = {
    # Today's idealised port: any burst length, 4 KB crossings, no write
    # response, reads and writes fully concurrent. Board tops' on-chip memory.
    "ideal": MemorySystem(max_burst_beats=(1 << 16) - 1),   # the request's beats field
    # An AXI4 port: 256-beat bursts that do not cross 4 KB, write responses,
    # separate read and write channels.
    "axi4": MemorySystem(boundary_bytes=4096, write_response_latency=16),
    # AXI3 like the Zynq HP ports VTA used: 16-beat bursts, half duplex.
    "axi3-hp": MemorySystem(max_burst_beats=16, boundary_bytes=4096, write_response_latency=16,
                            half_duplex=1, turnaround_cycles=6),
    # AXI4 in front of a DDR3 rank: half duplex, pages and refresh.
    "ddr3": MemorySystem(boundary_bytes=4096, write_response_latency=16, half_duplex=1,
                         turnaround_cycles=6, page_bytes=8192, banks=8, row_miss_cycles=8,
                         refresh_interval=1560, refresh_cycles=52),
}


@dataclasses.dataclass(frozen=True)
class HwConfig(JsonRecord):
    """Shape of one accelerator instance.

    Parameters
    ----------
    batch, block_in, block_out : int
        The GEMM core computes a ``batch x block_in`` by ``block_in x block_out``
        product per cycle (``batch * block_in * block_out`` int8 MACs).
    inp_width, wgt_width, acc_width, out_width : int
        Bit widths of input, weight, accumulator and output elements.
    uop_buffer_bytes, inp_buffer_bytes, wgt_buffer_bytes, acc_buffer_bytes : int
        SRAM sizes. The output buffer mirrors the accumulator buffer row for
        row (see `out_buffer_bytes`), as in VTA.
    dram_bus_bits : int
        Width of the single DRAM port; one beat per cycle.
    dram_read_latency : int
        Cycles from a read request being accepted to its first data beat.
    dram_reads_in_flight : int
        Read bursts the DRAM arbiter keeps outstanding; with the latency this
        bounds read bandwidth for short bursts.
    cmd_queue_depth : int
        Depth of the command queues from fetch to load, compute and store; 0
        for none (fetch hands each instruction straight to its module, which
        saves three instruction registers where flip-flops are scarce).
    token_queue_depth : int
        Depth of each of the four dependency-token queues.
    max_acc_banks : int
        The acc (and out) buffer is split into this many 1-read 1-write block
        RAM banks by its high index bits (fewer when the buffer is tiny; see
        `acc_banks`). Fewer banks cost fewer block RAMs on FPGAs whose block
        RAMs are narrow (each bank takes a full row of them) but let fewer
        ``overlap`` instructions run beside the other unit (the ISA's bank rule).
    fetch_buffer_depth : int
        Instructions buffered between fetch's DRAM reader and its dispatcher
        (flip-flops: 128 bits each); fetch reads in bursts of at most half of it.
    dram_addr_bits : int
        Bits of the DRAM byte addresses the hardware computes: it reaches the
        first ``2 ** dram_addr_bits`` bytes (programs are checked against that,
        `runtime.verify`). The ISA's address fields and the memory port stay
        `DRAM_ADDR_BITS` wide; fewer bits save logic where DRAM is small (a
        board's on-chip memory).
    event_counters : int
        1: the hardware counts every event of `hw.counters.RTL_COUNTERS`; 0:
        only ``cycles`` (what run reports and the board's host driver need),
        which saves 15 32-bit counters and their readback where logic is
        scarce. `hw.counters.rtl_counters` names the counters a config has.
    shared_load_engine : int
        1: the load and compute modules share one `hw.load.LoadEngine` (one
        LOAD runs at a time; compute's uop / acc LOADs and load's inp / wgt
        LOADs take turns), and the engine has one DRAM reader per distinct
        element size instead of one per memory kind. Saves an engine and its
        readers where logic is scarce; only the interleaving of loads changes.
    narrow_walkers : int
        1: the load engine's and the store module's row, column and entry
        counters are as wide as the largest SRAM needs (`walker_bits`), not the
        ISA's 16-bit size fields: the SRAM bounds every program is checked
        against (`sim.checker`) keep a non-empty rectangle inside them. And the
        counts of a burst's beats (the DRAM arbiter's, the store's, a board
        memory's) are as wide as the longest burst (`hw.layouts.burst_beats_bits`).
    ram_collision_dont_care : int
        1: the inp, wgt, uop, acc and out block RAMs' read ports leave a read of
        the entry written in the same cycle undefined (Yosys's
        ``COLLISION_X_MASK``), so synthesis adds no bypass flip-flops and
        comparators to give the old value (iCE40 block RAMs do not). No
        collision happens: `hw.generate.mark_collision_dont_care` says why.
    sequencer_gap : int
        1: a compute unit takes its next instruction a cycle after its
        current one sent its last micro-op, not in that cycle (`hw.sequencer`),
        so the path by which an instruction issues (and fetch moves on) holds
        no loop comparator; one idle cycle per GEMM instruction (the two-cycle
        ALU's instructions have it anyway).
    two_cycle_alu : int
        1: the ALU unit spends two cycles per micro-op (`hw.alu`, `hw.unit_pipeline`)
        and issues one every other cycle, as it already does for micro-ops
        that read two acc operands; halves the rate of ALU instructions with
        an immediate operand, and halves the ALU's longest path.
    gemm_operand_stage : int
        1: the GEMM unit registers the inp and wgt block RAMs' read data before
        its multipliers, and reads acc[dst] a cycle later to match
        (`hw.unit_pipeline`): a GEMM micro-op takes one more cycle from issue
        to write, at the same rate. On ECP5 the path from a block RAM through
        a multiplier was the core's longest once the ALU was split.
    gemm_tree_stage : int
        1: the GEMM core's adder tree spans two stages (`hw.gemm`), and the
        GEMM unit reads acc[dst] another cycle later to match
        (`hw.unit_pipeline`): a GEMM micro-op takes one more cycle from issue
        to write, at the same rate. On the ECPIX-5's ECP5 the tree, mapped by
        Yosys into LUT compressors and a carry chain, was the board top's
        longest path once the control paths were registered.
    gemm_operand_copies : int
        With ``gemm_operand_stage``: how many copies of the registered inp
        operand the GEMM unit keeps, each feeding ``block_out /
        gemm_operand_copies`` output rows of the core's multipliers (`hw.gemm`).
        One register drives all ``block_out`` rows; on ECP5 that net's wire was
        the GEMM core's longest path (an int8 input bit into 16 rows of LUT
        multipliers and DSPs). Timing only: every cycle is the same.
    lut_products : int
        How many of the GEMM core's ``batch * block_in * block_out`` 8x8
        products synthesis builds from LUTs and carry chains instead of DSP
        blocks: the last ones in (batch, block_out, block_in) order (`hw.gemm`).
        The RTL, and so every cycle, is the same; only the netlist differs.
        Where a part has fewer DSP blocks than products (an ECP5-85's 156
        18x18 multipliers against 256 products and the ALU's 3 per lane), the
        rest go to LUTs. An 18x18 multiplier cannot carry two int8 products:
        a signed 8x8 product spans 16 bits, so packing a second operand
        above the first needs 8 + 16 = 24 operand bits, and the ECP5's
        MULT18X18D has 18 (Yosys and nextpnr map no 9x9 mode).
    registered_load_walk : int
        1: the load engine (`hw.load`) copies the LOAD fields its walkers read
        when it takes the LOAD, counts SRAM addresses itself and keeps in
        registers whether the walk is on a data entry and at the last column /
        row, and its clients decode whether a LOAD is theirs and non-empty as
        they latch it: neither a client's instruction register nor a comparator
        or sum lies on the paths from the engine's state to the DRAM port's data
        back-pressure and from a client's offer to the engine. No cycle changes.
    registered_dispatch : int
        1: every instruction reaches the logic that dispatches or issues it
        from a register, and that logic holds no decoder or comparator
        (`hw.fetch`, `hw.compute`, `hw.token_queue`). Compute keeps whether
        each unit has none / at most one instruction in flight, the token
        queues whether they hold a token, in registers, and fetch counts a
        dispatch a cycle later. Fetch's instruction buffer and the command
        queues offer their heads from output registers (an instruction that
        passes through an empty one waits a cycle more). Where there is no
        buffer (``fetch_buffer_depth`` 1; then the bus needs at least two
        beats per instruction) fetch's reader writes each beat of an
        instruction in its place, so the first (opcode and token flags) is
        settled a cycle or more before the instruction is offered, and fetch
        (and compute, without command queues) decode it into registers every
        cycle: no cycle changes.
    registered_control : int
        1: decisions taken every cycle come from registers computed a cycle
        ahead: the loop sequencers' ends of loop (`hw.sequencer`), the
        two-cycle ALU's clip bounds and shifter fill bit (`hw.alu`), the
        compute units' forwarding selects (`hw.unit_pipeline`), and fetch's
        decision to request instructions, which waits a cycle after each
        request (`hw.fetch`). No other cycle changes.
    registered_load_data : int
        1 (with ``registered_load_walk``): the DRAM arbiter (`hw.dram_arbiter`)
        keeps a read beat that its client does not take in the cycle it arrives
        in a one-beat register, so the DRAM port's read-data ready is a
        flip-flop; the load engine decodes its memory kind as it takes a LOAD,
        keeps whether rows remain to be requested and (its element readers)
        whether a row's last element is held in registers, and counts down to
        its walk's edges, so the next data / last-column / last-row flags take
        one compare of a counter with a constant (`hw.load`): the paths from the
        walk and the readers to the port's ready, the order FIFO and the SRAM
        writes hold no decoder, sum or wide compare, and the engine writes the
        SRAMs from registers, a cycle after its walk (its users wait on it going
        idle, a cycle or more before they read). For the same beats from
        the port clients see them at the same cycles, but the port sees a beat
        taken up to a cycle earlier (so a burst's order entry may free earlier):
        against a memory that never stalls ResNet-18's layers take the same
        cycles either way; one that stalls at random sees other handshakes, and
        cycle counts move a little either way (benchmarks/README.md, "Synthesis,
        Fmax and time").
    memory : str
        The memory system behind the DRAM port, a key of `MEMORY_SYSTEMS`
        (`memory_system`): the bursts the accelerator issues keep its rules,
        and with a write response the store waits for it. ``"ideal"`` (the
        field's default, today's model) adds nothing to the hardware.
    name : str
        A label for reports; it does not change the hardware.
    """

    batch: int = 1
    block_in: int = 16
    block_out: int = 16
    inp_width: int = 8
    wgt_width: int = 8
    acc_width: int = 32
    out_width: int = 8
    uop_buffer_bytes: int = 32 * 1024
    inp_buffer_bytes: int = 32 * 1024
    wgt_buffer_bytes: int = 256 * 1024
    acc_buffer_bytes: int = 128 * 1024
    dram_bus_bits: int = 64
    dram_read_latency: int = 32
    dram_reads_in_flight: int = 8
    cmd_queue_depth: int = 16
    token_queue_depth: int = 256
    max_acc_banks: int = 4
    fetch_buffer_depth: int = 16
    dram_addr_bits: int = 32
    event_counters: int = 1
    shared_load_engine: int = 0
    narrow_walkers: int = 0
    ram_collision_dont_care: int = 0
    sequencer_gap: int = 0
    two_cycle_alu: int = 0
    gemm_operand_stage: int = 0
    registered_load_walk: int = 0
    registered_dispatch: int = 0
    registered_control: int = 0
    registered_load_data: int = 0
    gemm_tree_stage: int = 0
    memory: str = "ideal"
    lut_products: int = 0
    gemm_operand_copies: int = 1
    name: str = "custom"

    record_kind: ClassVar[str] = "config"
    record_error: ClassVar[type[Exception]] = ConfigError

    # Fixed by the ISA: the instruction and micro-op words.
    INSN_BITS = isa.INSN_BITS
    UOP_BITS = isa.UOP_BITS
    DRAM_ADDR_BITS = isa.DRAM_ADDR_BITS

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "name":
                if not isinstance(value, str) or not _NAME.fullmatch(value):
                    raise ConfigError(f"name: expected a label of letters, digits, '_', '-', "
                                      f"'+', '.', '=' or ',' (1-64 characters, starting with "
                                      f"none of '.', '=', ','), "
                                      f"got {value!r}")
                continue
            if field.name == "memory":
                if not isinstance(value, str) or value not in MEMORY_SYSTEMS:
                    raise ConfigError(f"memory: expected one of {', '.join(MEMORY_SYSTEMS)}, "
                                      f"got {value!r}")
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{field.name}: expected an integer, got {value!r}")
            if field.name == "cmd_queue_depth" and value < 0:   # 0: no queues
                raise ConfigError(f"{field.name}: must be 0 or positive, got {value}")
            if field.name == "event_counters" and value not in (0, 1):
                raise ConfigError(f"{field.name}: must be 0 (only cycles) or 1 (all), got {value}")
            if field.name in _SWITCHES and value not in (0, 1):
                raise ConfigError(f"{field.name}: must be 0 or 1, got {value}")
            if value <= 0 and field.name not in ("cmd_queue_depth", "lut_products", *_SWITCHES):
                raise ConfigError(f"{field.name}: must be positive, got {value}")
        for name in ("batch", "block_in", "block_out", "dram_bus_bits",
                     "uop_buffer_bytes", "inp_buffer_bytes", "wgt_buffer_bytes",
                     "acc_buffer_bytes", "cmd_queue_depth", "token_queue_depth",
                     "max_acc_banks", "fetch_buffer_depth"):
            if name == "cmd_queue_depth" and self.cmd_queue_depth == 0:
                continue
            if not _is_power_of_two(getattr(self, name)):
                raise ConfigError(f"{name}: must be a power of two, got {getattr(self, name)}")
        if (self.inp_width, self.wgt_width, self.out_width) != (8, 8, 8):
            raise ConfigError("inp_width/wgt_width/out_width: only int8 (8) is supported, "
                              f"got {self.inp_width}/{self.wgt_width}/{self.out_width}")
        if self.acc_width != 32:
            raise ConfigError(f"acc_width: only int32 (32) is supported, got {self.acc_width}")
        if self.dram_bus_bits < 8 or self.dram_bus_bits > 1024:
            raise ConfigError(f"dram_bus_bits: must be 8..1024, got {self.dram_bus_bits}")
        for kind in SRAM_KINDS:
            size = getattr(self, f"{kind}_buffer_bytes")
            element = self.element_bytes(kind)
            if size < element:
                raise ConfigError(f"{kind}_buffer_bytes: {size} bytes cannot hold one "
                                  f"{element}-byte {kind} element")
        for kind in SRAM_KINDS:
            if self.depth(kind) > 1 << 16:
                raise ConfigError(f"{kind}_buffer_bytes: {self.depth(kind)} entries exceed the "
                                  "ISA's 16-bit SRAM addresses")
        if self.uop_index_bits > self.UOP_BITS:
            raise ConfigError(
                "acc/inp/wgt_buffer_bytes: a micro-op needs "
                f"{self.acc_index_bits}+{self.uop_src_bits}+{self.wgt_index_bits} = "
                f"{self.uop_index_bits} index bits, more than the {self.UOP_BITS}-bit micro-op")
        for name, limit in _UPPER_BOUNDS.items():
            if getattr(self, name) > limit:
                raise ConfigError(f"{name}: at most {limit}, got {getattr(self, name)}")
        if self.macs_per_cycle > MAX_MACS_PER_CYCLE:
            raise ConfigError(f"batch x block_in x block_out: {self.macs_per_cycle} MACs per "
                              f"cycle, more than the {MAX_MACS_PER_CYCLE} vdla elaborates and "
                              "simulates")
        for kind, fields in (("inp", "batch x block_in"), ("wgt", "block_out x block_in"),
                             ("acc", "batch x block_out")):
            bits = self.element_bytes(kind) * 8
            if bits > MAX_ENTRY_BITS:
                shape = "x".join(map(str, self.element_shape(kind)))
                raise ConfigError(f"{fields}: one {kind} SRAM entry ({shape} x "
                                  f"{self.element_bits(kind)} bits) is {bits:,} bits wide, more "
                                  f"than the {MAX_ENTRY_BITS:,} bits Amaranth allows in one "
                                  "signal")
        if not 12 <= self.dram_addr_bits <= self.DRAM_ADDR_BITS:
            raise ConfigError(f"dram_addr_bits: must be 12..{self.DRAM_ADDR_BITS}, "
                              f"got {self.dram_addr_bits}")
        if not 0 <= self.lut_products <= self.macs_per_cycle:
            raise ConfigError(f"lut_products: must be 0..{self.macs_per_cycle} (the GEMM core's "
                              f"products), got {self.lut_products}")
        if self.block_out % self.gemm_operand_copies:
            raise ConfigError(f"gemm_operand_copies: must divide block_out {self.block_out}, "
                              f"got {self.gemm_operand_copies}")
        if self.gemm_operand_copies > 1 and not self.gemm_operand_stage:
            raise ConfigError("gemm_operand_copies: copies of the registered operand need "
                              "gemm_operand_stage")
        if self.registered_load_data and not self.registered_load_walk:
            raise ConfigError("registered_load_data: needs registered_load_walk")
        if self.dram_reads_in_flight > 256:
            raise ConfigError(f"dram_reads_in_flight: at most 256, got {self.dram_reads_in_flight}")
        if self.dram_read_latency > 4096:
            raise ConfigError(f"dram_read_latency: at most 4096 cycles, got {self.dram_read_latency}")
        overflow = isa.format_overflow(self)
        if overflow is not None:
            raise ConfigError(overflow)
        if self.decodes_in_place:
            # The fields decoded early lie in an instruction's first bus beat, and a
            # later beat comes before it is offered.
            offsets = isa.field_offsets(isa.formats(self)[isa.Opcode.LOAD])
            first_beat = max(sum(offsets[name]) for name in isa.EARLY_DECODE_FIELDS)
            if not first_beat <= self.dram_bus_bits <= self.INSN_BITS // 2:
                raise ConfigError(f"registered_dispatch: needs a bus of {first_beat} to "
                                  f"{self.INSN_BITS // 2} bits (an instruction's opcode, token "
                                  "flags and memory type in its first of two or more beats), "
                                  f"got dram_bus_bits {self.dram_bus_bits}")

    @property
    def memory_system(self) -> MemorySystem:
        """The rules of the memory behind the port (`memory`)."""
        return MEMORY_SYSTEMS[self.memory]

    @property
    def decodes_in_place(self) -> bool:
        """Fetch decodes the instruction its reader holds, as it arrives
        (`registered_dispatch` without an instruction buffer)."""
        return bool(self.registered_dispatch) and self.fetch_buffer_depth == 1

    # ---------------------------------------------------------------- sizes
    @property
    def macs_per_cycle(self) -> int:
        """MACs the GEMM core performs per micro-op (one per cycle at full rate)."""
        return self.batch * self.block_in * self.block_out

    @property
    def out_buffer_bytes(self) -> int:
        """Output buffer size: one int8 row per accumulator row."""
        return self.depth("acc") * self.element_bytes("out")

    def element_shape(self, kind: str) -> tuple[int, ...]:
        """Shape of one SRAM entry (one DRAM element) of a memory kind."""
        shapes = {
            "inp": (self.batch, self.block_in),
            "wgt": (self.block_out, self.block_in),
            "acc": (self.batch, self.block_out),
            "out": (self.batch, self.block_out),
            "uop": (1,),
        }
        if kind not in shapes:
            raise ConfigError(f"unknown memory kind {kind!r}")
        return shapes[kind]

    def element_bits(self, kind: str) -> int:
        """Bits of one scalar of a memory kind."""
        return {"inp": self.inp_width, "wgt": self.wgt_width, "acc": self.acc_width,
                "out": self.out_width, "uop": self.UOP_BITS}[kind]

    def element_bytes(self, kind: str) -> int:
        """Bytes of one SRAM entry / DRAM element of a memory kind."""
        count = 1
        for n in self.element_shape(kind):
            count *= n
        return count * self.element_bits(kind) // 8

    def depth(self, kind: str) -> int:
        """Number of entries of an SRAM (``uop``, ``inp``, ``wgt``, ``acc``, ``out``)."""
        if kind == "out":
            return self.depth("acc")
        return getattr(self, f"{kind}_buffer_bytes") // self.element_bytes(kind)

    @property
    def acc_banks(self) -> int:
        """Banks of the acc (and out) buffer: each a 1R1W block RAM (rule in `hw.isa`)."""
        return max(1, min(self.max_acc_banks, self.depth("acc") // 2))

    @property
    def acc_bank_rows(self) -> int:
        """acc (and out) entries per bank: entry ``e`` lies in bank ``e // acc_bank_rows``."""
        return self.depth("acc") // self.acc_banks

    @property
    def insn_count_bits(self) -> int:
        """Bits of the instruction counts the hardware keeps: every instruction
        the reachable DRAM holds (``2 ** dram_addr_bits`` bytes; `runtime.verify`
        keeps programs inside it), all 32 of the ``insn_count`` input at full reach."""
        if self.dram_addr_bits == self.DRAM_ADDR_BITS:
            return 32
        insn_byte_bits = (self.INSN_BITS // 8 - 1).bit_length()   # log2 of INSN_BYTES
        return self.dram_addr_bits - insn_byte_bits + 1   # counts up to 2 ** (that - 1)

    @property
    def walker_bits(self) -> int:
        """Bits of the load and store walkers' counters: the ISA's sizes plus two
        pads, or with ``narrow_walkers`` enough to count every entry of the
        deepest SRAM (a non-empty padded rectangle fits its SRAM, `sim.checker`)."""
        if not self.narrow_walkers:
            return isa.SIZE_BITS + 2
        return max(self.depth(kind) for kind in SRAM_KINDS).bit_length()

    def index_bits(self, kind: str) -> int:
        """Bits needed to address every entry of an SRAM."""
        return max(1, (self.depth(kind) - 1).bit_length())

    @property
    def acc_index_bits(self) -> int:
        return self.index_bits("acc")

    @property
    def wgt_index_bits(self) -> int:
        return self.index_bits("wgt")

    @property
    def uop_src_bits(self) -> int:
        """A micro-op's source indexes the input buffer (GEMM) or the acc buffer (ALU)."""
        return max(self.index_bits("inp"), self.index_bits("acc"))

    @property
    def uop_index_bits(self) -> int:
        return self.acc_index_bits + self.uop_src_bits + self.wgt_index_bits

    @property
    def dram_bus_bytes(self) -> int:
        return self.dram_bus_bits // 8

    def beats(self, kind: str) -> int:
        """DRAM bus beats per element of a memory kind (rounded up)."""
        return ceil_div(self.element_bytes(kind), self.dram_bus_bytes)

    @property
    def dram_alignment(self) -> int:
        """Byte alignment that suits every element kind and the bus."""
        return max([self.dram_bus_bytes, 16] + [self.element_bytes(k) for k in ELEMENT_KINDS])

    # ---------------------------------------------------------------- identity
    @property
    def hash(self) -> str:
        """Stable digest of everything that shapes the hardware (not the name)."""
        data = self.to_dict()
        data.pop("name")
        for field, neutral in _HASH_NEUTRAL.items():
            if data[field] == neutral:
                data.pop(field)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def same_hardware(self, other: "HwConfig") -> bool:
        return self.hash == other.hash


PRESETS: dict[str, HwConfig] = {
    # VTA's shape: 1x16x16 GEMM, VTA's SRAM sizes, a 64-bit AXI4 port.
    "default": HwConfig(memory="axi4", name="default"),
    # Small and fast to build and simulate, for RTL tests.
    "tiny": HwConfig(batch=1, block_in=4, block_out=4,
                     uop_buffer_bytes=2048, inp_buffer_bytes=1024, wgt_buffer_bytes=2048,
                     acc_buffer_bytes=4096, dram_bus_bits=32, dram_read_latency=8,
                     cmd_queue_depth=4, token_queue_depth=16, name="tiny"),
    # Deliberately lopsided, for verification: batch 2, a non-square block, a
    # bus wider than most elements, a short latency and queues of depth 2.
    "odd": HwConfig(batch=2, block_in=8, block_out=4, uop_buffer_bytes=1024,
                    inp_buffer_bytes=1024, wgt_buffer_bytes=1024, acc_buffer_bytes=2048,
                    dram_bus_bits=128, dram_read_latency=3, cmd_queue_depth=2,
                    token_queue_depth=2, name="odd"),
    # Board presets (hw/boards/table.py): what fits each board's FPGA beside the
    # on-chip memory that stands in for DRAM and the UART host link.
    # ULX3S-85F (ECP5 LFE5U-85F: 83,640 LUTs, 208 18-kbit block RAMs, 156 18x18
    # multipliers): a 1x16x4 core, 64 multipliers in DSPs like a 1x8x8 but half
    # its ALU lanes and acc width. The LUTs go with the lanes (batch x
    # block_out), not the MACs: the ALU unit alone of a 1x8x8 core is about
    # half of that core's LUTs. The switches it sets cut the longest paths
    # (two_cycle_alu, gemm_operand_stage, gemm_tree_stage, sequencer_gap,
    # registered_load_walk, registered_load_data, registered_dispatch,
    # registered_control) and the block RAMs' bypass logic. Resources, Fmax and
    # cycles: benchmarks/README.md ("ULX3S", "ECPIX-5").
    "ulx3s": HwConfig(batch=1, block_in=16, block_out=4, uop_buffer_bytes=8 * 1024,
                      inp_buffer_bytes=8 * 1024, wgt_buffer_bytes=64 * 1024,
                      acc_buffer_bytes=16 * 1024, dram_bus_bits=64, dram_read_latency=32,
                      cmd_queue_depth=8, token_queue_depth=32, narrow_walkers=1,
                      ram_collision_dont_care=1, two_cycle_alu=1, gemm_operand_stage=1,
                      registered_load_walk=1, sequencer_gap=1, registered_dispatch=1,
                      registered_control=1, registered_load_data=1, gemm_tree_stage=1,
                      name="ulx3s"),
    # iCEBreaker (iCE40 UP5K: 5280 logic cells of one LUT4 + one FF, 30 4-kbit
    # block RAMs of 256x16, 8 DSPs, 4 single-port RAMs of 16K x 16). DSPs set
    # the shape: the ALU's 32-bit MUL takes 3 per lane and each GEMM product
    # one, so 1x4x1 uses 7. One acc bank (each bank costs a row of 16-bit-wide
    # block RAMs); no command queues, a one-instruction fetch buffer (the fetch
    # reader's own register), 17-bit DRAM addresses (the board's 128 KiB in the
    # SPRAMs) and only the cycle counter (event_counters 0) save logic cells,
    # and so do every area switch (one load engine, narrow walkers, collision
    # don't-care block RAMs, a gap between a unit's instructions, a two-cycle
    # ALU). Buffers take 10 block RAMs (the board memory's read FIFO 2 more).
    # Two timing switches keep the long paths off comparators and decoders: the
    # load walk in registers (registered_load_walk) and registered dispatch and
    # issue (registered_dispatch); no switch changes a cycle. Resources and
    # Fmax: benchmarks/README.md ("iCEBreaker").
    "icebreaker": HwConfig(batch=1, block_in=4, block_out=1, uop_buffer_bytes=1024,
                           inp_buffer_bytes=512, wgt_buffer_bytes=1024, acc_buffer_bytes=1024,
                           dram_bus_bits=32, dram_read_latency=8, dram_reads_in_flight=2,
                           cmd_queue_depth=0, token_queue_depth=8, max_acc_banks=1,
                           fetch_buffer_depth=1, dram_addr_bits=17, event_counters=0,
                           shared_load_engine=1, narrow_walkers=1, ram_collision_dont_care=1,
                           sequencer_gap=1, two_cycle_alu=1, registered_load_walk=1,
                           registered_dispatch=1, name="icebreaker"),
}
# ECPIX-5 (ECP5 LFE5UM5G-85F, speed grade 8): the ``ulx3s`` core on the faster
# part (benchmarks/README.md, "ECPIX-5"), the same cycles.
PRESETS["ecpix5"] = dataclasses.replace(PRESETS["ulx3s"], name="ecpix5")
# VTA's 256 MACs per cycle on the ECPIX-5's ECP5-85, beside its board's 128 KiB
# on-chip memory (64 of the 208 block RAMs), as a 1x32x8 GEMM: ALU lanes, not
# MACs, take the LUTs, and 8 lanes instead of VTA's 16 took a large share of
# the LUTs and 24 multipliers off the 1x16x16 this preset was (twice the ALU
# micro-ops, hidden beside the GEMMs: each thread's acc in a bank of its own,
# with its own copy of the bias, `compiler.accel.schedule.acc_layout`).
# ``ulx3s``'s timing and area switches; buffers as large as the block RAMs
# allow (a 2048-bit wgt entry takes 57 block RAMs at any depth up to 512; each
# 256-bit acc bank of 1024 entries 15, so two banks), 118 block RAMs in all; of
# the 156 18x18 multipliers the ALU takes 3 per lane (24) and 132 of the 256
# products the rest, the other 124 products are LUTs (`lut_products`); the inp
# operand in 8 copies, one per output row (`gemm_operand_copies`). Resources,
# Fmax and cycles: benchmarks/README.md ("ECPIX-5, 256 MACs").
PRESETS["ecpix5-256"] = dataclasses.replace(
    PRESETS["ulx3s"], block_in=32, block_out=8, uop_buffer_bytes=8 * 1024,
    inp_buffer_bytes=32 * 1024, wgt_buffer_bytes=128 * 1024, acc_buffer_bytes=64 * 1024,
    max_acc_banks=2, lut_products=124, gemm_operand_copies=8, name="ecpix5-256")


def load_config(spec: str | Path | None) -> HwConfig:
    """A preset name, a path to a JSON file, or None for ``default``."""
    if spec is None:
        return PRESETS["default"]
    if isinstance(spec, str) and spec in PRESETS:
        return PRESETS[spec]
    path = Path(spec)
    if not path.exists():
        raise ConfigError(f"config {spec!s}: no such preset ({', '.join(PRESETS)}) or file")
    text = read_record_text(path, ConfigError, "config")
    try:
        return HwConfig.from_json(text)
    except ConfigError as error:
        raise ConfigError(f"config {spec!s}: {error}") from None
