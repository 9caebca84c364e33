"""The cost model: a `TilePlan`'s estimated cycles, from its DRAM traffic and compute.

`estimate_cost` ranks plans for the default search (`compiler.accel.search`) and is
the tuners' prior (`vdla.tune`); it counts the LOADs the DMA pass really emits
for a chunk (`compiler.accel.lower.chunk_loads`), reload traffic under a loop order
(`operand_loads`) and the GEMM instructions uop folding leaves (`uop_kernel`).
"""

from __future__ import annotations

import itertools
import math

from vdla.compiler.accel.lower import chunk_loads, residual_loads
from vdla.compiler.ops import IDENTITY_SHIFT
from vdla.compiler.accel.passes.uop_folding import kernel_budget
from vdla.compiler.requant import extra_alu_passes
from vdla.compiler.accel.schedule import AXES, TilePlan
from vdla.hw.config import HwConfig
from vdla.ints import ceil_div

__all__ = ["estimate_cost", "estimate", "operand_loads", "uop_kernel", "reduction_loops",
           "reset_on_gemm"]

# Cycles a GEMM, ALU or STORE instruction costs beyond its micro-ops or beats:
# its dispatch and the drain of the unit's pipeline before the next one.
INSTRUCTION_OVERHEAD = 8


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


def uop_kernel(plan: TilePlan, residual: bool = False) -> int:
    """Micro-ops in one chunk's GEMM kernel: the tile's loops but the two folded ones.

    `uop_folding` puts the two longest loops into an instruction's
    ``iter_out``/``iter_in`` and enumerates the rest into the kernel.
    ``residual``: the kernel of the tile's residual GEMM instead (no reduction loops).
    """
    tile, (kh, kw) = plan.tile, plan.geometry.kernel
    loops = [tile["b"], tile["k"], tile["h"], tile["w"]]
    if not residual:
        loops += [tile["c"], kh * kw]
    folded = sorted(loops)[-2:]
    return max(1, math.prod(loops) // max(1, math.prod(folded)))


def reduction_loops(plan: TilePlan) -> int:
    """The loops longer than 1 a chunk's GEMM nest sums over (its channel blocks,
    kernel rows and columns): splitting off their first step for GEMM_OVERWRITE
    (`passes.gemm_reset`) leaves one more GEMM nest per loop."""
    kh, kw = plan.geometry.kernel
    return sum(extent > 1 for extent in (plan.tile["c"], kh, kw))


def reset_on_gemm(plan: TilePlan, epilogue_stalls: bool = True) -> bool:
    """Whether the tiles' first GEMMs should overwrite their accumulators (GEMM_OVERWRITE)
    instead of the ALU zeroing them first: when that estimates fewer cycles, i.e. where
    the ALU's reset pass costs more than the GEMM instructions the split adds."""
    return (estimate(plan, epilogue_stalls, gemm_reset=True)[0]
            < estimate(plan, epilogue_stalls, gemm_reset=False)[0])


def _load_cycles(config: HwConfig, instructions: int, rows: int, row_elements: int,
                 kind: str) -> float:
    """Cycles of ``instructions`` LOADs of ``rows`` rows of ``row_elements`` elements each.

    A LOAD waits for its first beat (the read latency) before the next one
    starts; within a LOAD the rows' bursts pipeline, up to
    ``config.dram_reads_in_flight`` at once, at one beat per cycle.
    """
    latency = config.dram_read_latency
    beats = -(-row_elements * config.element_bytes(kind) // config.dram_bus_bytes)
    per_row = max(beats, (latency + beats) / config.dram_reads_in_flight)
    return instructions * (latency + 4 + rows * per_row)



def estimate_cost(plan: TilePlan, epilogue_stalls: bool = True) -> float:
    """Estimated cycles of a plan (lower is better).

    See `estimate`; ``epilogue_stalls=False`` leaves out the GEMMs' wait for
    epilogues on shared acc banks, as the default search does.
    """
    return estimate(plan, epilogue_stalls)[0]


def estimate(plan: TilePlan, epilogue_stalls: bool = True,
             gemm_reset: bool | None = None) -> tuple[float, float]:
    """``(cycles, DRAM pressure)`` of a plan: its estimated cycles (lower is better)
    and its DRAM time per tile over its GEMM time per tile.

    ``gemm_reset``: the tiles' first GEMMs overwrite the accumulators
    (`passes.gemm_reset`) instead of an ALU reset pass; None, the cheaper of the
    two, as the compiler chooses (`reset_on_gemm`).

    A software pipeline over the output tiles: with two or more virtual
    threads, the loads of one tile, the GEMMs of another, the ALU reset and
    REQUANT beside them and the store of a third all overlap, so a tile costs
    the slowest of the four, plus the first tile's loads and the last tile's
    epilogue and store that nothing hides; with one thread (or no latency
    hiding) they add up. DRAM time counts the read latency per LOAD of the
    LOADs the DMA pass emits for a chunk (`compiler.accel.lower.chunk_loads`: rows and
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
    loads = chunk_loads(plan)
    inp, wgt = (sum(_load_cycles(config, 1, load.y_size + load.y_pad_top + load.y_pad_bottom,
                                 load.x_size + load.x_pad_left + load.x_pad_right, kind)
                    for load in loads[kind]) for kind in ("inp", "wgt"))
    # A residual: every tile loads its own residual blocks, and GEMMs them with the
    # identity (one micro-op per acc entry), shifted on the ALU past the identity's 2**6.
    residual = sum(_load_cycles(config, 1, load.y_size, load.x_size, "inp")
                   for load in residual_loads(plan))
    load = (inp_loads * inp + wgt_loads * wgt) / tiles + residual
    # GEMM: one micro-op per cycle, a few cycles of drain per instruction.
    gemm_uops = slot["acc"] * tile["c"] * kh * kw * chunks
    gemm_instructions = chunks * ceil_div(uop_kernel(plan), kernel_budget(config))
    gemm = gemm_uops + INSTRUCTION_OVERHEAD * gemm_instructions
    # The reset, an immediate: a micro-op a cycle, one every other with the two-cycle ALU.
    reset_alu = (1 + config.two_cycle_alu) * slot["acc"] + INSTRUCTION_OVERHEAD
    alu = slot["acc"] + INSTRUCTION_OVERHEAD + reset_alu                 # REQUANT + reset
    epilogue, fixed = geometry.epilogue, 0.0
    # With the reset on the GEMMs: no ALU reset; the first chunk's GEMM nest split at
    # its reduction loops' first step (a residual's GEMM overwrites instead, adding none).
    split_gemm = (INSTRUCTION_OVERHEAD * reduction_loops(plan)
                  if epilogue.residual_shift is None else 0)
    if epilogue.residual_shift is not None:
        gemm += slot["acc"] + INSTRUCTION_OVERHEAD * ceil_div(
            uop_kernel(plan, residual=True), kernel_budget(config))
        if epilogue.residual_shift > IDENTITY_SHIFT:
            shl = slot["acc"] + INSTRUCTION_OVERHEAD
            alu += shl
            if plan.threads > 1 and plan.schedule.latency_hiding:
                # Hoisted with the reset (`passes.overlap.hoist_resets`): it runs beside the
                # other thread's GEMM, whose tail becomes an instruction of its own.
                gemm += INSTRUCTION_OVERHEAD
            else:
                # Between the tile's residual GEMM and its first chunk's: the core waits.
                fixed += shl
    if epilogue.fixed_point:  # its passes: immediates one cycle per micro-op, acc[src] two
        passes = extra_alu_passes(epilogue.pre_shift, epilogue.shift) + epilogue.per_channel
        alu += passes * (slot["acc"] + INSTRUCTION_OVERHEAD)
        # Instructions start in program order: the next tile's GEMMs wait until the last
        # pass starts, so every pass before it (the bias ADD, two cycles a micro-op, and
        # the immediates) runs serially with the GEMMs.
        fixed = 2 * slot["acc"] + INSTRUCTION_OVERHEAD + (passes - 1) * (slot["acc"] + INSTRUCTION_OVERHEAD)

    def finish(gemm: float, alu: float) -> tuple[float, float]:
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
            period = max(gemm + serial + fixed + max(0.0, chain - window), load, store)
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

    choices = (False, True) if gemm_reset is None else (gemm_reset,)
    return min((finish(gemm + split_gemm * choice, alu - reset_alu * choice)
                for choice in choices), key=lambda result: result[0])

