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
names the knob and buffer that overflow. The knobs' options are declared once,
apart from any search, by `schedule_space`; `default_schedule` walks a pruned
part of that space (`_default_tilings`) and takes the minimum of a
DRAM-traffic cost model (`estimate_cost`), a legal schedule for any shape and
config; the tuners of `vdla.tune` search the whole space with measurements.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import ClassVar, Iterator

from vdla.compiler.errors import ScheduleError
from vdla.compiler.knobs import KnobSpace
from vdla.compiler.ops import ConvGeometry
from vdla.compiler.passes.uop_folding import kernel_budget
from vdla.hw.config import HwConfig
from vdla.hw.records import JsonRecord
from vdla.ints import ceil_div

__all__ = ["Schedule", "TilePlan", "ScheduleSpace", "default_schedule", "schedule_space",
           "plan_tiles", "load_schedule", "compact_axes", "estimate_cost", "max_virtual_threads",
           "operand_loads", "uop_kernel", "group_blocks"]

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
        for kind, knobs in (("inp", "tile_b*tile_c*input rows*input columns"),
                            ("wgt", "tile_k*tile_c*kernel"),
                            ("acc", "tile_b*tile_k*tile_h*tile_w (+bias)")):
            need, depth = usage[kind], config.depth(kind)
            if need > depth:
                raise ScheduleError(
                    f"schedule does not fit the {kind} buffer: {need} entries needed "
                    f"({_copies(self, kind, plan)} x {knobs}), {depth} available; "
                    f"reduce {_culprit(kind, self)}")
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
        slots lie as the virtual-threads pass lays them out: a bank each where
        they fit (`acc_bank_stride`), else packed one after another, the bias
        after them.
        """
        threads, rows = self.threads, self.config.acc_bank_rows
        slot = self.slot_entries()["acc"]
        if threads < 2 or not slot:
            return 0.0
        step = acc_bank_stride(self.config, threads, slot, self.bias_entries) or slot

        def banks(low: int, size: int) -> set[int]:
            return set(range(low // rows, (low + size - 1) // rows + 1)) if size else set()

        def rows_in(low: int, size: int, taken: set[int]) -> int:
            return sum(min(low + size, (bank + 1) * rows) - max(low, bank * rows)
                       for bank in banks(low, size) & taken)

        bias = banks(threads * step, self.bias_entries)
        waiting = sum(rows_in((t + 1) % threads * step, slot, banks(t * step, slot) | bias)
                      for t in range(threads))
        return 1 - waiting / (threads * slot)

    def usage(self) -> dict[str, int]:
        """Total SRAM entries needed, per buffer."""
        slot, copies = self.slot_entries(), self.copies()
        return {"inp": slot["inp"] * copies["inp"], "wgt": slot["wgt"] * copies["wgt"],
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
    bias_entries = _bias_entries(geometry, config, blocks["k"], tile["k"])
    return TilePlan(geometry, config, schedule, blocks, tile, threads, bias_entries)


def group_blocks(geometry: ConvGeometry, config: HwConfig) -> tuple[int, int]:
    """Output- and input-channel blocks of one group (a whole layer's without groups).

    `ops.accelerator_limits` checks that grouped layers' groups are whole
    blocks, or that they tile a block's diagonal: then the "group" here is
    a block holding several groups, one block (the ``block_diagonal``
    weight layout puts each group's taps on the GEMM block's diagonal).
    """
    groups = geometry.groups
    return (ceil_div(geometry.out_channels // groups, config.block_out),
            ceil_div(geometry.in_channels // groups, config.block_in))


def acc_bank_stride(config: HwConfig, threads: int, slot: int, shared: int) -> int | None:
    """Entries from one thread's acc slot to the next when each gets its own acc bank.

    The compute units may only run side by side on different acc banks
    (`hw.isa`), and the ALU epilogue of one thread runs beside the GEMMs of the
    next: so with several threads each acc slot (``slot`` entries) starts a
    bank, and the shared acc buffers (``shared`` entries: the bias, read by
    every thread's epilogue) get a bank of their own after them. None when that
    does not fit: the virtual-threads pass then packs the slots and fewer
    epilogues overlap the GEMMs (`TilePlan.epilogue_overlap`).
    """
    rows = config.acc_bank_rows
    if threads < 2 or slot > rows or threads * rows + shared > config.depth("acc"):
        return None
    return rows


def _bias_entries(geometry: ConvGeometry, config: HwConfig, k_blocks: int, tile_k: int) -> int:
    """acc entries reserved for the bias (0 without one).

    The whole bias stays resident when it is small next to the accumulator;
    otherwise each tile reloads the bias of its own output channels.
    """
    if not geometry.epilogue.bias:
        return 0
    return k_blocks if k_blocks <= config.depth("acc") // 8 else tile_k


def load_schedule(path: str | Path) -> Schedule:
    """Read a schedule from a JSON file.

    Raises
    ------
    ScheduleError
        If the file is missing or malformed.
    """
    return Schedule.load(path)


# ---------------------------------------------------------------- the knob space
def max_virtual_threads(config: HwConfig) -> int:
    """Most virtual threads a config's token queues allow: half their depth.

    Each thread can keep a token in flight per queue (a loaded slot, a tile
    awaiting its store); half the depth stays well inside the queues.
    """
    return max(1, config.token_queue_depth // 2)


# The space offers at most this many threads: more only shrink every slot.
SPACE_MAX_THREADS = 4
# The output-channel loop at each depth, the others in their natural order:
# where ``k`` sits decides whether input tiles or weights are reused.
LOOP_ORDERS = ("bhwk", "bhkw", "bkhw", "kbhw")


def _balanced(extent: int) -> list[int]:
    """Tile sizes that cut ``extent`` into equal-ish tiles: ceil(extent / n) for each n."""
    return sorted({ceil_div(extent, n) for n in range(1, extent + 1)}, reverse=True)


def _geometry(op) -> ConvGeometry:
    return op.geometry() if hasattr(op, "geometry") else op


@dataclasses.dataclass(frozen=True)
class ScheduleSpace(KnobSpace):
    """The declared knobs of one layer on one config, each with its options.

    As AutoTVM's ``cfg.define_split``/``define_knob`` declare a template's
    knobs, `schedule_space` declares these once; the default search
    (`default_schedule`) and the tuners (`vdla.tune`) both walk them. A point
    is a tuple of option indices, one per knob in `knobs` order
    (`compiler.knobs.KnobSpace`); not every point is legal (`plan` says which
    are).
    """

    schedule_type: ClassVar[type] = Schedule
    geometry: ConvGeometry
    config: HwConfig
    knobs: tuple[tuple[str, tuple], ...]

    def plan(self, schedule: Schedule) -> TilePlan | None:
        """The schedule's `TilePlan` if it is legal here, else None."""
        try:
            return schedule.check(self.geometry, self.config)
        except ScheduleError:
            return None

    def canonical(self, point: tuple[int, ...]) -> tuple[int, ...]:
        """One representative of the points that compile to the same program.

        Loops of one iteration emit nothing, so loop orders that differ only in
        where such loops stand are one order: the representative takes the
        first `LOOP_ORDERS` entry that nests the iterating loops alike. An
        illegal point is its own representative.
        """
        schedule = self.schedule(point)
        plan = self.plan(schedule)
        if plan is None:
            return point
        knob = self.names.index("loop_order")

        def iterating(order: str) -> list[str]:
            return [axis for axis in order if plan.counts[axis] > 1]

        mine = iterating(schedule.loop_order)
        first = next(i for i, order in enumerate(self.knobs[knob][1]) if iterating(order) == mine)
        return point[:knob] + (first,) + point[knob + 1:]


def schedule_space(op, config: HwConfig, latency_hiding: bool = True) -> ScheduleSpace:
    """Declare the knobs of a layer (Conv2d, Dense or their geometry) on a config.

    Tile sizes are the balanced cuts of each extent (`_balanced`; a grouped
    layer's tile_k the divisors of a group's blocks), threads run
    from 1 to the token queues' limit (`max_virtual_threads`, at most
    `SPACE_MAX_THREADS`), loop orders are `LOOP_ORDERS`, and either operand may
    be resident.
    """
    geometry = _geometry(op)
    blocks = plan_tiles(geometry, config, Schedule()).blocks
    threads = min(SPACE_MAX_THREADS, max_virtual_threads(config)) if latency_hiding else 1
    options = {axis: tuple(_balanced(blocks[axis])) for axis in "bhwkc"}
    if geometry.groups > 1:
        # A tile's output channels lie in one group (`plan_tiles`): the divisors
        # of a group's blocks.
        group_k = group_blocks(geometry, config)[0]
        options["k"] = tuple(t for t in range(group_k, 0, -1) if group_k % t == 0)
    knobs = tuple((f"tile_{axis}", options[axis]) for axis in "bhwkc")
    knobs += (("virtual_threads", tuple(range(1, threads + 1))),
              ("loop_order", LOOP_ORDERS),
              ("latency_hiding", (latency_hiding,)),
              ("resident_weights", (False, True)),
              ("resident_input", (False, True)))
    return ScheduleSpace(geometry, config, knobs)


# ---------------------------------------------------------------- the cost model
def _reuse_loads(order: str, depends: str, counts: dict[str, int], threads: int,
                 chunks: int) -> int:
    """How many times an operand tile is loaded under a loop order.

    Tiles visited consecutively that do not differ along any axis the operand
    depends on share it; the DMA pass elides such reloads per virtual thread
    (each thread's slot holds its own copy), but only when the whole reduction
    fits in one chunk.
    """
    tiles = math.prod(counts[a] for a in AXES)
    if chunks > 1:
        return tiles * chunks
    run = 1
    for axis in reversed(order):
        if axis in depends and counts[axis] > 1:
            break
        run *= counts[axis]
    return tiles // run * min(threads, run)


def operand_loads(plan: TilePlan) -> tuple[int, int]:
    """How many times a slot's worth of input and of weights is loaded (`_reuse_loads`).

    A resident operand loads each of its blocks once.
    """
    counts, order, chunks = plan.counts, plan.schedule.loop_order, plan.counts["c"]
    # A grouped layer's output-channel tiles read their own group's input.
    inp_loads = _reuse_loads(order, "bhw" + ("k" if plan.geometry.groups > 1 else ""), counts,
                             plan.threads, chunks)
    wgt_loads = _reuse_loads(order, "k", counts, plan.threads, chunks)
    if plan.schedule.resident_input:
        inp_loads = chunks
    if plan.schedule.resident_weights:
        wgt_loads = counts["k"] * chunks
    return inp_loads, wgt_loads


def uop_kernel(plan: TilePlan) -> int:
    """Micro-ops in one chunk's GEMM kernel: the tile's loops but the two folded ones.

    `uop_folding` puts the two longest loops into an instruction's
    ``iter_out``/``iter_in`` and enumerates the rest into the kernel.
    """
    tile, (kh, kw) = plan.tile, plan.geometry.kernel
    folded = sorted([tile["b"], tile["k"], tile["h"], tile["w"], tile["c"], kh * kw])[-2:]
    return max(1, tile["b"] * tile["k"] * tile["h"] * tile["w"] * tile["c"] * kh * kw
               // max(1, math.prod(folded)))


def _load_cycles(config: HwConfig, instructions: int, rows: int, row_elements: int,
                 kind: str) -> float:
    """Cycles of ``instructions`` LOADs of ``rows`` rows of ``row_elements`` elements each.

    A LOAD waits for its first beat (the read latency) before the next one
    starts; within a LOAD the rows' bursts pipeline, up to
    ``config.dram_reads_in_flight`` at once, at one beat per cycle.
    """
    latency = config.dram_read_latency
    beats = ceil_div(row_elements * config.element_bytes(kind), config.dram_bus_bytes)
    per_row = max(beats, (latency + beats) / config.dram_reads_in_flight)
    return instructions * (latency + 4 + rows * per_row)


def _chunk_loads(plan: TilePlan) -> dict:
    """`compiler.lower.chunk_loads`, imported here because lowering imports this module."""
    from vdla.compiler.lower import chunk_loads
    return chunk_loads(plan)


def estimate_cost(plan: TilePlan, epilogue_stalls: bool = True) -> float:
    """Estimated cycles of a plan (lower is better).

    See `_estimate`; ``epilogue_stalls=False`` leaves out the GEMMs' wait for
    epilogues on shared acc banks, as the default search does.
    """
    return _estimate(plan, epilogue_stalls)[0]


# A plan whose DRAM time per tile is at least this share of its GEMM time
# already stalls on DRAM now and then, although the pipeline model counts only
# the slower of the two: between plans of equal estimate, the one that loads
# less then wins.
_CONGESTED = 0.75
# Cycles a GEMM, ALU or STORE instruction costs beyond its micro-ops or beats:
# its dispatch and the drain of the unit's pipeline before the next one.
INSTRUCTION_OVERHEAD = 8


def _estimate(plan: TilePlan, epilogue_stalls: bool = True) -> tuple[float, float]:
    """``(cycles, DRAM pressure)`` of a plan: its estimated cycles (lower is better)
    and its DRAM time per tile over its GEMM time per tile.

    A software pipeline over the output tiles: with two or more virtual
    threads, the loads of one tile, the GEMMs of another, the ALU reset and
    REQUANT beside them and the store of a third all overlap, so a tile costs
    the slowest of the four, plus the first tile's loads and the last tile's
    epilogue and store that nothing hides; with one thread (or no latency
    hiding) they add up. DRAM time counts the read latency per LOAD of the
    LOADs the DMA pass emits for a chunk (`compiler.lower.chunk_loads`: rows and
    planes merged where DRAM is contiguous), burst pipelining and halo and
    reload traffic (`_reuse_loads`), so tilings whose DMA per tile stays below
    their compute per tile win. With several threads the first group of tiles
    also waits where the blocks it streams in (a resident operand's once, others
    once per thread) outlast its compute. With ``epilogue_stalls`` the share of
    each epilogue on acc banks the next thread's GEMMs write
    (`TilePlan.epilogue_overlap`) holds those GEMMs up.
    """
    geometry, config = plan.geometry, plan.config
    counts, tile, order = plan.counts, plan.tile, plan.schedule.loop_order
    kh, kw = geometry.kernel
    chunks = counts["c"]
    tiles = math.prod(counts[a] for a in AXES)
    slot = plan.slot_entries()
    inp_loads, wgt_loads = operand_loads(plan)
    # A chunk's loads as the DMA pass emits them: it merges the rows and planes
    # of a box into as few transfers as DRAM contiguity allows.
    # Zero padding is written into the SRAM rows like data.
    loads = _chunk_loads(plan)
    inp, wgt = (sum(_load_cycles(config, 1, load.y_size + load.y_pad_top + load.y_pad_bottom,
                                 load.x_size + load.x_pad_left + load.x_pad_right, kind)
                    for load in loads[kind]) for kind in ("inp", "wgt"))
    load = (inp_loads * inp + wgt_loads * wgt) / tiles
    # GEMM: one micro-op per cycle, a few cycles of drain per instruction.
    gemm_uops = slot["acc"] * tile["c"] * kh * kw * chunks
    gemm_instructions = chunks * ceil_div(uop_kernel(plan), kernel_budget(config))
    gemm = gemm_uops + INSTRUCTION_OVERHEAD * gemm_instructions
    alu = 2 * (slot["acc"] + INSTRUCTION_OVERHEAD)    # reset + REQUANT
    whole_rows = counts["w"] == 1 and tile["h"] == plan.blocks["h"]
    store_instructions = 1 if whole_rows else tile["b"] * tile["k"]
    store = (slot["acc"] * config.element_bytes("out") / config.dram_bus_bytes
             + INSTRUCTION_OVERHEAD * store_instructions)
    first_load = inp + wgt
    if plan.threads > 1:
        # A slot's REQUANT, its store (which reads the out rows) and the reset
        # of the slot's next tile (which overwrites them) run one after the
        # other while the GEMM core works on the other threads' chunks: the
        # chain must fit in those (threads - 1) chunk steps or the GEMMs wait.
        # The epilogue runs beside the GEMMs only on acc banks they do not
        # write (`TilePlan.epilogue_overlap`); the rest of it holds them up.
        chain = alu + store
        window = (plan.threads - 1) * gemm / chunks
        serial = (1 - plan.epilogue_overlap()) * alu if epilogue_stalls else 0.0
        period = max(gemm + serial + max(0.0, chain - window), load, store)
    else:
        period = load + gemm + alu + store
    # Edge tiles are smaller: scale the full tile's period by the real work.
    work = (plan.blocks["b"] * plan.blocks["k"] * plan.blocks["h"] * plan.blocks["w"]
            * plan.blocks["c"] * kh * kw)
    total = work * period / gemm_uops
    resident_inp, resident_wgt = plan.schedule.resident_input, plan.schedule.resident_weights
    if plan.threads > 1:
        # The first group of tiles (one per thread) streams in every block it
        # reads, a resident operand's once: the GEMMs wait where that outlasts
        # the group's own compute.
        group = list(itertools.islice(itertools.product(*(range(counts[a]) for a in order)),
                                      plan.threads))
        k_tiles = len({position[order.index("k")] for position in group})
        loads = chunks * (inp * (1 if resident_inp else len(group))
                          + wgt * (k_tiles if resident_wgt else len(group)))
        total += max(0.0, loads - len(group) * gemm)
    pressure = load / gemm
    if plan.threads > 1:
        return first_load + total + alu / 2 + store, pressure
    return total, pressure


def _resident_variants(plan: TilePlan) -> list[TilePlan]:
    """The plan, then its variants with resident weights and/or input that fit."""
    variants = [plan]
    counts, config = plan.counts, plan.config
    whole = all(counts[axis] == 1 for axis in "bhw") and plan.geometry.groups == 1
    for weights, inp in ((True, False), (False, True), (True, True)):
        if inp and not whole:
            continue
        if weights and counts["k"] * counts["c"] == 1 and plan.threads == 1:
            continue        # one block, one slot: nothing to keep
        schedule = plan.schedule.replace(resident_weights=weights, resident_input=inp)
        variant = dataclasses.replace(plan, schedule=schedule)
        usage = variant.usage()
        if all(usage[kind] <= config.depth(kind) for kind in ("inp", "wgt")):
            variants.append(variant)
    return variants


def _cheapest_variant(plan: TilePlan) -> tuple[Schedule, float]:
    """The best of a plan's `_resident_variants` and its estimate.

    On equal estimates a congested plan (see `_CONGESTED`) gives way to a
    variant that loads no more: resident blocks are never overwritten, so
    their loads run ahead of compute without waiting for tokens.
    """
    (cost, pressure), pick = _estimate(plan, _DEFAULT_EPILOGUE_STALLS), plan
    base_pressure = pressure
    for variant in _resident_variants(plan)[1:]:
        variant_cost, variant_pressure = _estimate(variant, _DEFAULT_EPILOGUE_STALLS)
        relieves = (base_pressure >= _CONGESTED and variant_cost <= cost + 1e-9
                    and variant_pressure <= pressure + 1e-9)
        if variant_cost < cost - 1e-9 or relieves:
            cost, pressure, pick = variant_cost, variant_pressure, variant
    return pick.schedule, cost



# ---------------------------------------------------------------- the default search
# The default search ranks without the epilogue stalls: they are real (tiny's
# C4 with 112-entry slots on 64-row banks: 22,529 cycles measured, 23,040
# estimated), but the smaller output tiles that avoid them load more, and on a
# narrow bus the estimate undercounts those loads (the load unit waits on DRAM
# for 73 % of its busy cycles there): with the stalls, tiny's C4 and C7 defaults
# moved to schedules 18 % slower. The tuners measure, so they rank with them.
_DEFAULT_EPILOGUE_STALLS = False
# The loop orders the default search tries: output channels innermost (input
# tiles reused) or outermost (weights reused).
_DEFAULT_ORDERS = ("bhwk", "kbhw")


def _default_tilings(space: ScheduleSpace, threads: int) -> Iterator[TilePlan]:
    """The analytical search's candidates with ``threads`` threads, resident variants aside.

    For each loop order and (tile_c, tile_k) whose weights fit, the widest
    tile_w that fits (narrower tiles only add column halos) with tile_b of one
    block or the largest that fits, and every balanced tile_h up to the
    largest that fits (smaller row tiles shorten the pipeline's fill and
    drain): tiles are as large as the buffers allow.
    """
    geometry, config = space.geometry, space.config
    kh, kw = geometry.kernel
    wgt_depth = config.depth("wgt")
    latency_hiding = space.options("latency_hiding")[0]
    for order, tile_c, tile_k in itertools.product(
            _DEFAULT_ORDERS, space.options("tile_c"), space.options("tile_k")):
        if threads * tile_k * tile_c * kh * kw > wgt_depth:
            continue
        for tile_b, tile_w, largest_h in _widest_rows(space, threads, tile_k, tile_c):
            for tile_h in [h for h in space.options("tile_h") if h <= largest_h]:
                schedule = Schedule(tile_b, tile_h, tile_w, tile_k, tile_c, threads, order,
                                    latency_hiding)
                plan = plan_tiles(geometry, config, schedule)
                if plan.threads == threads:
                    yield plan


def _widest_rows(space: ScheduleSpace, threads: int, tile_k: int,
                 tile_c: int) -> list[tuple[int, int, int]]:
    """``(tile_b, tile_w, largest tile_h)`` for the widest tile_w whose batch tile fits.

    tile_b is one block or the largest that fits with one output row; the
    largest tile_h fills the inp and acc slots and leaves every thread a tile.
    """
    geometry, config = space.geometry, space.config
    blocks = plan_tiles(geometry, config, Schedule()).blocks
    # A compacted axis is undilated (`compact_axes`): its extent is its kernel.
    (sh, sw), (kh, kw) = geometry.stride, geometry.extent
    compact_rows, compact_cols = compact_axes(geometry, config)
    inp_depth = config.depth("inp")
    acc_depth = config.depth("acc") - _bias_entries(geometry, config, blocks["k"], tile_k)
    for tile_w in space.options("tile_w"):
        cols = tile_w * kw if compact_cols else (tile_w - 1) * sw + kw
        b_inp = inp_depth // (threads * tile_c * cols * kh)
        b_acc = acc_depth // (threads * tile_k * tile_w)
        b_max = min(b_inp, b_acc, blocks["b"])
        if b_max <= 0:
            continue
        b_max = ceil_div(blocks["b"], ceil_div(blocks["b"], b_max))
        rows = []
        for tile_b in sorted({1, b_max}):
            rows_fit = inp_depth // (threads * tile_b * tile_c * cols)
            if compact_rows:
                h_inp = rows_fit // kh
            else:
                h_inp = (rows_fit - kh) // sh + 1 if rows_fit >= kh else 0
            h_acc = acc_depth // (threads * tile_b * tile_k * tile_w)
            # Every thread needs a tile of its own.
            others = (ceil_div(blocks["b"], tile_b) * ceil_div(blocks["k"], tile_k)
                      * ceil_div(blocks["w"], tile_w))
            row_tiles = ceil_div(threads, others)
            if row_tiles > blocks["h"]:
                continue
            largest_h = min(h_inp, h_acc, blocks["h"], ceil_div(blocks["h"], row_tiles))
            if largest_h > 0:
                rows.append((tile_b, tile_w, largest_h))
        return rows
    return []


def _thread_preference(config: HwConfig, virtual_threads: int | None,
                       latency_hiding: bool) -> list[tuple[int, ...]]:
    """Thread counts to search, in groups: the first group with a legal schedule wins."""
    if not latency_hiding:
        return [(1,)]
    if virtual_threads is not None:
        return [(virtual_threads,)]
    allowed = max_virtual_threads(config)
    groups = [tuple(t for t in group if t <= allowed) for group in ((2, 3), (1,))]
    return [group for group in groups if group]


def default_schedule(op, config: HwConfig, virtual_threads: int | None = None,
                     latency_hiding: bool = True) -> Schedule:
    """Pick a good legal schedule for any layer and config.

    The search prefers two or three virtual threads (loads of one thread
    overlap compute of the other; a third gives the ALU and the store of a
    finished tile a longer window) whenever such a legal schedule exists and
    the token queues allow them (`max_virtual_threads`), then takes the
    minimum of `estimate_cost` over the candidates of `_default_tilings`, each
    with its cheapest resident variant (`_cheapest_variant`).

    Parameters
    ----------
    op : Conv2d or Dense
    config : HwConfig
    virtual_threads : int, optional
        Force a thread count instead of trying 2 or 3, then 1.
    latency_hiding : bool
        False gives the serialised ablation baseline (one thread).

    Raises
    ------
    ScheduleError
        If not even the smallest tile fits (buffers too small for one kernel),
        or a forced thread count exceeds what the token queues allow.
    """
    geometry = _geometry(op)
    describe = getattr(op, "describe", lambda: "this layer")()
    if virtual_threads is not None and latency_hiding \
            and virtual_threads > max_virtual_threads(config):
        raise ScheduleError(
            f"virtual_threads={virtual_threads} exceeds {max_virtual_threads(config)}, half the "
            f"token_queue_depth ({config.token_queue_depth}) of config {config.name!r}")
    space = schedule_space(geometry, config, latency_hiding)
    for group in _thread_preference(config, virtual_threads, latency_hiding):
        candidates = (_cheapest_variant(plan) for threads in group
                      for plan in _default_tilings(space, threads))
        best = min(candidates, key=lambda pick: pick[1], default=None)
        if best is not None:
            return best[0]
    if virtual_threads is not None and virtual_threads > 1:
        raise ScheduleError(
            f"no schedule with {virtual_threads} virtual threads fits {describe} on config "
            f"{config.name!r} (each thread needs its own output tile and buffer slots); "
            "use fewer threads")
    (kh, kw), (rows, cols) = geometry.kernel, geometry.extent
    raise ScheduleError(
        f"no schedule fits {describe} on config {config.name!r}: even a 1x1 tile with one "
        f"channel block needs {kh * kw} wgt entries and {rows * cols} inp entries "
        f"(buffers: inp {config.depth('inp')}, wgt {config.depth('wgt')}, "
        f"acc {config.depth('acc')} entries)")
