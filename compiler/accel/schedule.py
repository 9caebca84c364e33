"""Schedules: the explicit knobs that decide how a layer is tiled onto the buffers.

A `Schedule` says how the output is cut into tiles and the reduction into
chunks, how many virtual threads share the SRAMs, and in which order tiles are
visited. All sizes are in *blocks* for channels and batch (GEMM block sizes of
the config) and in elements for output rows and columns:

==================  ==========================================================
knob                meaning
==================  ==========================================================
tile_b              batch blocks per tile (``config.batch`` images each)
tile_h, tile_w      output rows / columns per tile
tile_k              output-channel blocks per tile
tile_c              input-channel blocks per reduction chunk (chunks accumulate)
virtual_threads     SRAM slots used round-robin so loads overlap compute
loop_order          order of the tile loops, outer to inner, a permutation of
                    ``"bkhw"`` (the chunk loop is always innermost)
latency_hiding      False serialises every module (ablation baseline)
resident_weights    keep every weight block resident (one shared SRAM region,
                    each (tile_k, tile_c) block at its own place, loaded once)
resident_input      keep the whole input resident, each chunk at its own place
                    (only when one tile covers all batch, rows and columns:
                    every tile then reads the same input, loaded once)
==================  ==========================================================

Tiles at the edges are smaller when a size does not divide the extent.
`Schedule.check` validates a schedule against an operator and a config and
names the knob and buffer that overflow; `plan_tiles` resolves it into a
`TilePlan` (effective tiles, counts, SRAM usage). This module holds the records
and their resolution only. The knobs' options are declared once, apart from any
search, in `compiler.accel.space`; `compiler.accel.cost` estimates a plan's cycles and
`compiler.accel.search.default_schedule` takes the cheapest candidate of a pruned part
of the space, a legal schedule for any shape and config; the tuners of
`vdla.tune` search the whole space with measurements.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import ClassVar, NamedTuple

from vdla.compiler.errors import ScheduleError, ShapeError
from vdla.compiler.ops import ConvGeometry, accelerator_limits
from vdla.hw.config import HwConfig
from vdla.records import JsonRecord
from vdla.ints import ceil_div

__all__ = ["Schedule", "TilePlan", "AXES", "plan_tiles", "load_schedule", "compact_axes",
           "max_virtual_threads", "group_blocks", "AccLayout", "acc_layout", "reserved_bias", "ceil_div"]

AXES = "bkhw"


@dataclasses.dataclass(frozen=True)
class Schedule(JsonRecord):
    """Tiling knobs of one layer (see the module docstring for their meaning)."""

    record_kind: ClassVar[str] = "schedule"
    record_error: ClassVar[type[Exception]] = ScheduleError

    tile_b: int = 1
    tile_h: int = 1
    tile_w: int = 1
    tile_k: int = 1
    tile_c: int = 1
    virtual_threads: int = 1
    loop_order: str = "bhwk"
    latency_hiding: bool = True
    resident_weights: bool = False
    resident_input: bool = False

    def __post_init__(self):
        for name in ("tile_b", "tile_h", "tile_w", "tile_k", "tile_c", "virtual_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ScheduleError(f"schedule.{name}: expected a positive integer, got {value!r}")
        if not isinstance(self.loop_order, str) or sorted(self.loop_order) != sorted(AXES):
            raise ScheduleError(f"schedule.loop_order: expected a permutation of {AXES!r}, "
                                f"got {self.loop_order!r}")
        for name in ("latency_hiding", "resident_weights", "resident_input"):
            if not isinstance(getattr(self, name), bool):
                raise ScheduleError(f"schedule.{name}: expected a boolean, "
                                    f"got {getattr(self, name)!r}")

    # ------------------------------------------------------------ checking
    def check(self, geometry: ConvGeometry, config: HwConfig) -> "TilePlan":
        """Validate against a layer and a config; return the resolved `TilePlan`.

        Raises
        ------
        ScheduleError
            Naming the knob and the buffer that overflows.
        """
        if geometry.groups > 1:
            # An operator's own geometry plans as the one it compiles to (merged groups
            # tile as fewer, larger ones); a compiled geometry stays itself.
            try:
                geometry = accelerator_limits(geometry, config)
            except ShapeError:
                pass        # refused where it compiles
        plan = plan_tiles(geometry, config, self)
        if self.resident_input and geometry.groups > 1:
            raise ScheduleError("schedule.resident_input keeps one group's input: a grouped "
                                f"convolution ({geometry.groups} groups) reads several")
        if self.resident_input and any(plan.counts[axis] > 1 for axis in "bhw"):
            raise ScheduleError("schedule.resident_input needs one tile over all batch, rows "
                                f"and columns (tile counts {plan.counts})")
        max_threads = max_virtual_threads(config)
        if plan.threads > max_threads:
            raise ScheduleError(f"schedule.virtual_threads={plan.threads} exceeds {max_threads}, "
                                f"half the config's token_queue_depth "
                                f"({config.token_queue_depth})")
        usage = plan.usage()
        residual = geometry.epilogue.residual_shift is not None
        extra = {"inp": f" + {plan.threads} x tile_b*tile_k*tile_h*tile_w residual",
                 "wgt": " + 1 identity"} if residual else {}
        for kind, knobs in (("inp", "tile_b*tile_c*input rows*input columns"),
                            ("wgt", "tile_k*tile_c*kernel"),
                            ("acc", "tile_b*tile_k*tile_h*tile_w (+bias)")):
            need, depth = usage[kind], config.depth(kind)
            if need > depth:
                raise ScheduleError(
                    f"schedule does not fit the {kind} buffer: {need} entries needed "
                    f"({_copies(self, kind, plan)} x {knobs}{extra.get(kind, '')}), {depth} "
                    f"available; reduce {_culprit(kind, self)}")
        return plan


def _copies(schedule: Schedule, kind: str, plan: "TilePlan") -> str:
    """What multiplies a slot in the capacity message: threads or resident blocks."""
    if kind == "inp" and schedule.resident_input:
        return f"{plan.copies()['inp']} resident chunk(s)"
    if kind == "wgt" and schedule.resident_weights:
        return f"{plan.copies()['wgt']} resident block(s)"
    return f"{plan.threads} virtual thread(s)"


def _culprit(kind: str, schedule: Schedule) -> str:
    knobs = {"inp": ["tile_h", "tile_w", "tile_c", "tile_b"], "wgt": ["tile_k", "tile_c"],
             "acc": ["tile_h", "tile_w", "tile_k", "tile_b"]}[kind]
    knobs = sorted(knobs, key=lambda name: -getattr(schedule, name))
    parts = [f"{name}={getattr(schedule, name)}" for name in knobs]
    return " or ".join(parts) + (f" or virtual_threads={schedule.virtual_threads}"
                                 if schedule.virtual_threads > 1 else "")


@dataclasses.dataclass(frozen=True)
class TilePlan:
    """A schedule resolved against a layer: effective tile sizes and tile counts.

    Tile sizes are clamped to the extents (a tile larger than the layer is the
    whole layer), so a schedule tuned for one layer stays legal for smaller ones.
    """

    geometry: ConvGeometry
    config: HwConfig
    schedule: Schedule
    blocks: dict[str, int]      # extent of each axis: b, k, c (blocks), h, w (rows/cols)
    tile: dict[str, int]        # effective tile size per axis
    threads: int                # effective virtual threads
    bias_entries: int           # acc entries reserved for the bias

    @property
    def counts(self) -> dict[str, int]:
        """Number of tiles (chunks for ``c``) along each axis."""
        return {axis: ceil_div(self.blocks[axis], self.tile[axis]) for axis in "bkhwc"}

    @property
    def compact(self) -> tuple[bool, bool]:
        """Per axis (rows, columns): whether input tiles hold only the rows/columns used.

        See `compact_axes`.
        """
        return compact_axes(self.geometry, self.config)

    def window(self, outputs: int, axis: int) -> int:
        """Input rows (axis 0) or columns (axis 1) a tile of ``outputs`` outputs holds."""
        kernel, stride = self.geometry.kernel[axis], self.geometry.stride[axis]
        if self.compact[axis]:
            return outputs * kernel
        return (outputs - 1) * stride + self.geometry.extent[axis]

    @property
    def input_rows(self) -> int:
        """Input rows a full tile holds."""
        return self.window(self.tile["h"], 0)

    @property
    def input_cols(self) -> int:
        """Input columns a full tile holds."""
        return self.window(self.tile["w"], 1)

    def slot_entries(self) -> dict[str, int]:
        """SRAM entries one virtual thread's slot needs, per buffer."""
        kh, kw = self.geometry.kernel
        t = self.tile
        return {"inp": t["b"] * t["c"] * self.input_rows * self.input_cols,
                "wgt": t["k"] * t["c"] * kh * kw,
                "acc": t["b"] * t["k"] * t["h"] * t["w"]}

    def residual_entries(self) -> dict[str, int]:
        """SRAM entries of a residual (`compiler.ops.Epilogue.residual_shift`), zero without one:
        ``inp``, a thread's slot for the residual's output tile (its own buffer, beside
        the input's), and ``wgt``, the identity block all threads share."""
        if self.geometry.epilogue.residual_shift is None:
            return {"inp": 0, "wgt": 0}
        return {"inp": self.slot_entries()["acc"], "wgt": 1}

    def copies(self) -> dict[str, int]:
        """How many slot-sized regions each buffer holds.

        One per virtual thread, or for a resident operand one per block it
        keeps (chunks for the input; output-channel tiles x chunks for weights).
        """
        counts, schedule = self.counts, self.schedule
        return {"inp": counts["c"] if schedule.resident_input else self.threads,
                "wgt": counts["k"] * counts["c"] if schedule.resident_weights else self.threads,
                "acc": self.threads}

    def epilogue_overlap(self) -> float:
        """Share of the GEMM work that may run beside the previous thread's epilogue.

        The compute units run side by side only on different acc banks
        (`hw.isa`): thread ``t``'s epilogue reads its slot and the bias while
        thread ``t + 1``'s GEMMs write theirs, an instruction at a time, so the
        rows of slot ``t + 1`` lying in a bank the epilogue uses wait. The
        slots lie as the virtual-threads pass lays them out: on banks of their
        own where they fit (`acc_layout`), else packed one after another, the
        bias after them.
        """
        threads, rows = self.threads, self.config.acc_bank_rows
        slot = self.slot_entries()["acc"]
        if threads < 2 or not slot:
            return 0.0
        layout = (acc_layout(self.config, threads, slot, self.bias_entries)
                  or AccLayout(slot, shared_copied=False))
        step = layout.stride

        def banks(low: int, size: int) -> set[int]:
            return set(range(low // rows, (low + size - 1) // rows + 1)) if size else set()

        def rows_in(low: int, size: int, taken: set[int]) -> int:
            return sum(min(low + size, (bank + 1) * rows) - max(low, bank * rows)
                       for bank in banks(low, size) & taken)

        def bias(t: int) -> set[int]:
            return banks(t * step + slot if layout.shared_copied else threads * step,
                         self.bias_entries)

        waiting = sum(rows_in((t + 1) % threads * step, slot, banks(t * step, slot) | bias(t))
                      for t in range(threads))
        return 1 - waiting / (threads * slot)

    def usage(self) -> dict[str, int]:
        """Total SRAM entries needed, per buffer."""
        slot, copies, residual = self.slot_entries(), self.copies(), self.residual_entries()
        return {"inp": slot["inp"] * copies["inp"] + residual["inp"] * self.threads,
                "wgt": slot["wgt"] * copies["wgt"] + residual["wgt"],
                "acc": slot["acc"] * copies["acc"] + self.bias_entries}


def compact_axes(geometry: ConvGeometry, config: HwConfig) -> tuple[bool, bool]:
    """Per axis (rows, columns): does an input tile skip the inputs no output reads?

    With a kernel narrower than the stride, a compacted axis holds only the
    ``kernel`` rows/columns each output reads (``outputs * kernel`` instead of
    ``(outputs - 1) * stride + kernel``). Rows are always compacted: a LOAD's
    row stride skips the unused rows for free. Compacted columns cost a DRAM
    burst per output and a LOAD per input row, which only pays when an element
    is several bus beats wide (the skipped elements cost more than the extra
    burst latency); a 1x1 stride-2 layer at 64-bit then loads a quarter of its
    input instead of half. Only unpadded layers are compacted (the pad fields
    cannot skip data), and only undilated ones (a dilated window is not
    ``kernel`` neighbours).
    """
    unpadded = not any(geometry.padding) and geometry.dilation == (1, 1)
    rows = unpadded and geometry.kernel[0] < geometry.stride[0]
    cols = unpadded and geometry.kernel[1] < geometry.stride[1]
    if cols:
        outputs = geometry.out_width
        kernel, stride = geometry.kernel[1], geometry.stride[1]
        beats = config.beats("inp")
        latency = config.dram_read_latency
        per_output = max(beats, (latency + beats) / config.dram_reads_in_flight)
        strided = latency + outputs * kernel * per_output
        contiguous = ((outputs - 1) * stride + kernel) * config.element_bytes("inp") \
            / config.dram_bus_bytes
        cols = strided < contiguous
    return rows, cols


def plan_tiles(geometry: ConvGeometry, config: HwConfig, schedule: Schedule) -> TilePlan:
    """Resolve a schedule against a layer (no capacity check; see `Schedule.check`).

    A grouped convolution reduces over one group's input channels (``c``
    counts a group's blocks), and its output-channel tiles divide a group's
    blocks, so that every tile lies in one group (`group_blocks`).
    """
    blocks = {"b": ceil_div(geometry.batch, config.batch),
              "k": ceil_div(geometry.out_channels, config.block_out),
              "c": ceil_div(geometry.in_channels // geometry.groups, config.block_in),
              "h": geometry.out_height, "w": geometry.out_width}
    tile = {axis: min(getattr(schedule, f"tile_{axis}"), blocks[axis]) for axis in "bkchw"}
    group_k = group_blocks(geometry, config)[0]
    while geometry.groups > 1 and group_k % tile["k"]:
        tile["k"] -= 1
    tiles = math.prod(ceil_div(blocks[a], tile[a]) for a in "bkhw")
    # Threads take whole output tiles: more threads than tiles would only leave
    # slots empty.
    threads = max(1, min(schedule.virtual_threads, tiles)) if schedule.latency_hiding else 1
    bias_entries = reserved_bias(geometry, config, blocks["k"], tile["k"])
    return TilePlan(geometry, config, schedule, blocks, tile, threads, bias_entries)


def group_blocks(geometry: ConvGeometry, config: HwConfig) -> tuple[int, int]:
    """Output- and input-channel blocks of one group (a whole layer's without groups).

    `compiler.ops.accelerator_limits` makes grouped layers' groups whole blocks,
    or has them tile a block's diagonal: then the "group" here is a block
    holding several groups, one block (the ``block_diagonal`` weight layout
    puts each group's taps on the GEMM block's diagonal). Merged groups (the
    ``grouped:G:S`` layout) are whole blocks, or the whole layer.
    """
    groups = geometry.groups
    return (ceil_div(geometry.out_channels // groups, config.block_out),
            ceil_div(geometry.in_channels // groups, config.block_in))


class AccLayout(NamedTuple):
    """Where the virtual threads' acc slots lie (`acc_layout`).

    Thread ``t``'s slot starts at entry ``t * stride``; with ``shared_copied``
    each thread holds its own copy of the shared acc buffers right after its
    slot, else they lie once after the last slot.
    """

    stride: int
    shared_copied: bool


def acc_layout(config: HwConfig, threads: int, slot: int, shared: int) -> AccLayout | None:
    """Lay the threads' acc slots (``slot`` entries each) out on banks of their own.

    The compute units may only run side by side on different acc banks
    (`hw.isa`), and the ALU epilogue of one thread runs beside the GEMMs of the
    next, reading its slot and the shared acc buffers (``shared`` entries: the
    bias, read by every thread's epilogue). So each slot starts a bank and
    spans whole banks, and the shared buffers get a bank of their own after
    the slots; where no bank is left for them, each thread gets a copy of them
    in its own banks, after its slot (loaded once per thread). None when
    neither fits: the virtual-threads pass then packs the slots and fewer
    epilogues overlap the GEMMs (`TilePlan.epilogue_overlap`).
    """
    rows, depth = config.acc_bank_rows, config.depth("acc")
    if threads < 2:
        return None
    stride = ceil_div(slot, rows) * rows
    if threads * stride + shared <= depth:
        return AccLayout(stride, shared_copied=False)
    stride = ceil_div(slot + shared, rows) * rows
    if threads * stride <= depth:
        return AccLayout(stride, shared_copied=True)
    return None


def reserved_bias(geometry: ConvGeometry, config: HwConfig, k_blocks: int, tile_k: int) -> int:
    """acc entries reserved for the bias (0 without one).

    The whole bias stays resident when it is small next to the accumulator;
    otherwise each tile reloads the bias of its own output channels.
    """
    if not geometry.epilogue.bias:
        return 0
    # Per-channel multipliers follow the biases: two blocks per channel block.
    copies = 2 if geometry.epilogue.per_channel else 1
    return copies * (k_blocks if copies * k_blocks <= config.depth("acc") // 8 else tile_k)


def load_schedule(path: str | Path) -> Schedule:
    """Read a schedule from a JSON file.

    Raises
    ------
    ScheduleError
        If the file is missing or malformed.
    """
    return Schedule.load(path)


def max_virtual_threads(config: HwConfig) -> int:
    """Most virtual threads a config's token queues allow: half their depth.

    Each thread can keep a token in flight per queue (a loaded slot, a tile
    awaiting its store); half the depth stays well inside the queues.
    """
    return max(1, config.token_queue_depth // 2)

