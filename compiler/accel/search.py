"""The default search: a good legal schedule for any layer, without measuring.

`default_schedule` walks a pruned part of the declared space
(`compiler.accel.space.schedule_space`: the largest tiles the buffers allow, two
loop orders, `_default_tilings`), gives each candidate its cheapest resident
variant and takes the minimum of the cost model (`compiler.accel.cost`). The
tuners of `vdla.tune` search the whole space with measurements instead.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Iterator

from vdla.compiler.accel.cost import estimate
from vdla.compiler.errors import ScheduleError
from vdla.compiler.accel.schedule import (Schedule, TilePlan, compact_axes,
                                    max_virtual_threads, plan_tiles, reserved_bias)
from vdla.compiler.accel.space import ScheduleSpace, layer_geometry, schedule_space
from vdla.hw.config import HwConfig
from vdla.ints import ceil_div

__all__ = ["default_schedule"]

# The default search ranks the tilings of one thread count without the
# epilogue stalls: they are real, but the smaller output tiles that avoid them
# load more, and on a narrow bus the estimate undercounts those loads, so
# ranking with them picks slower defaults (benchmarks/README.md, "Autotuning":
# the default search and the epilogue stalls). Between thread counts it ranks
# their best tilings with them: more threads than the acc banks can keep apart
# (`compiler.accel.schedule.acc_layout`) stall every epilogue, whatever the tiling.
# The tuners measure, so they rank with them throughout.
_DEFAULT_EPILOGUE_STALLS = False
# The loop orders the default search tries: output channels innermost (input
# tiles reused) or outermost (weights reused).
_DEFAULT_ORDERS = ("bhwk", "kbhw")
# A plan whose DRAM time per tile is at least this share of its GEMM time
# already stalls on DRAM now and then, although the pipeline model counts only
# the slower of the two: between plans of equal estimate, the one that loads
# less then wins.
_CONGESTED = 0.75


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


def _cheapest_variant(plan: TilePlan) -> tuple[TilePlan, float]:
    """The best of a plan's `_resident_variants` and its estimate.

    On equal estimates a congested plan (see `_CONGESTED`) gives way to a
    variant that loads no more: resident blocks are never overwritten, so
    their loads run ahead of compute without waiting for tokens.
    """
    (cost, pressure), pick = estimate(plan, _DEFAULT_EPILOGUE_STALLS), plan
    base_pressure = pressure
    for variant in _resident_variants(plan)[1:]:
        variant_cost, variant_pressure = estimate(variant, _DEFAULT_EPILOGUE_STALLS)
        relieves = (base_pressure >= _CONGESTED and variant_cost <= cost + 1e-9
                    and variant_pressure <= pressure + 1e-9)
        if variant_cost < cost - 1e-9 or relieves:
            cost, pressure, pick = variant_cost, variant_pressure, variant
    return pick, cost


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
                # `_widest_rows` sizes the input and output tiles; a residual's own
                # tile buffer and identity block (`TilePlan.residual_entries`) come on top.
                usage = plan.usage()
                if plan.threads == threads and all(usage[kind] <= config.depth(kind)
                                                   for kind in usage):
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
    acc_depth = config.depth("acc") - reserved_bias(geometry, config, blocks["k"], tile_k)
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
    the token queues allow them (`max_virtual_threads`). For each thread count
    it takes the minimum of the estimate without epilogue stalls over the
    candidates of `_default_tilings`, each with its cheapest resident variant
    (`_cheapest_variant`), then the thread count whose pick `estimate_cost`
    (stalls included) ranks first.

    Parameters
    ----------
    op : Conv2d or Dense
    config : HwConfig
    virtual_threads : int, optional
        Force a thread count instead of trying 2 or 3, then 1.
    latency_hiding : bool
        False gives the serialised ablation baseline (one thread).

    A layer with a residual keeps the schedule of the same layer without one
    where that fits with the residual's buffers.

    Raises
    ------
    ScheduleError
        If not even the smallest tile fits (buffers too small for one kernel),
        or a forced thread count exceeds what the token queues allow.
    """
    geometry = layer_geometry(op, config)
    describe = getattr(op, "describe", lambda: "this layer")()
    if geometry.epilogue.residual_shift is not None:
        # A residual adds about the same work to every tiling (a GEMM and maybe an SHL
        # micro-op per output entry, its LOAD): keep the tiling of the conv alone where
        # the residual's buffers fit beside it. Searching afresh picks between estimates
        # a few hundred cycles apart, and on the RTL that choice made some of ResNet-18's
        # fused layers slower (benchmarks/README.md, "Whole networks from ONNX").
        plain = dataclasses.replace(geometry, epilogue=dataclasses.replace(
            geometry.epilogue, residual_shift=None))
        schedule = default_schedule(plain, config, virtual_threads, latency_hiding)
        try:
            schedule.check(geometry, config)
            return schedule
        except ScheduleError:
            pass        # the residual's buffers do not fit beside it: search with them
    if virtual_threads is not None and latency_hiding \
            and virtual_threads > max_virtual_threads(config):
        raise ScheduleError(
            f"virtual_threads={virtual_threads} exceeds {max_virtual_threads(config)}, half the "
            f"token_queue_depth ({config.token_queue_depth}) of config {config.name!r}")
    space = schedule_space(geometry, config, latency_hiding)
    for group in _thread_preference(config, virtual_threads, latency_hiding):
        picks = [min(map(_cheapest_variant, _default_tilings(space, threads)),
                     key=lambda pick: pick[1], default=None) for threads in group]
        best = min((pick[0] for pick in picks if pick is not None),
                   key=lambda plan: estimate(plan)[0], default=None)
        if best is not None:
            return best.schedule
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
