"""Features of a schedule for the learned cost model: its knobs and what they imply.

The `xgb` tuner ranks candidates it has not measured by a model trained on
these vectors. Besides the knobs themselves (log2 tile sizes, threads, loop
order, resident operands) a vector holds what the knobs imply on this layer and
config: tile counts and fractions of each extent, buffer use, DRAM bytes moved
per operand, instruction and micro-op counts, the analytical cycle estimate,
and the share of GEMM work the acc banks let run beside the epilogues
(`TilePlan.epilogue_overlap`, which the estimate charges as stalls). The
counts are those the cost model derives from the `TilePlan`
(`compiler.accel.cost.operand_loads`, `estimate_cost`) rather than from
compiling: the annealer scores thousands of points per batch, and compiling
one costs 30 ms to seconds. Sizes are log2 and relative to the layer's ideal
cycles or compulsory bytes where they scale with it, so logs of other
workloads transfer (`XGBTuner`'s warm start).
"""

from __future__ import annotations

import math

import numpy as np

from vdla.compiler.accel.passes.uop_folding import kernel_budget
from vdla.compiler.accel.cost import estimate_cost, operand_loads, uop_kernel
from vdla.compiler.accel.schedule import TilePlan
from vdla.compiler.accel.space import LOOP_ORDERS
from vdla.ints import ceil_div

__all__ = ["features", "FEATURE_NAMES"]

_AXES = "bkhwc"


def _log2(value: float) -> float:
    return math.log2(max(value, 1e-9))


def features(plan: TilePlan) -> np.ndarray:
    """The feature vector of a legal plan (see `FEATURE_NAMES`)."""
    schedule, config, geometry = plan.schedule, plan.config, plan.geometry
    counts, tile, blocks = plan.counts, plan.tile, plan.blocks
    kh, kw = geometry.kernel
    slot, usage = plan.slot_entries(), plan.usage()
    inp_loads, wgt_loads = operand_loads(plan)
    tiles = math.prod(counts[a] for a in "bkhw")
    inp_bytes = inp_loads * slot["inp"] * config.element_bytes("inp")
    wgt_bytes = wgt_loads * slot["wgt"] * config.element_bytes("wgt")
    out_bytes = tiles * slot["acc"] * config.element_bytes("out")
    compulsory = {"inp": blocks["b"] * blocks["c"] * geometry.height * geometry.width
                  * config.element_bytes("inp"),
                  "wgt": blocks["k"] * blocks["c"] * kh * kw * config.element_bytes("wgt")}
    uops = blocks["b"] * blocks["k"] * blocks["h"] * blocks["w"] * blocks["c"] * kh * kw
    kernel = uop_kernel(plan)
    gemm_instructions = tiles * counts["c"] * ceil_div(kernel, kernel_budget(config))
    load_instructions = inp_loads * tile["b"] * tile["c"] + wgt_loads
    cost = estimate_cost(plan)
    values = [_log2(tile[a]) for a in _AXES]
    values += [tile[a] / blocks[a] for a in _AXES]
    values += [_log2(counts[a]) for a in _AXES]
    values += [_log2(tiles), plan.threads, schedule.virtual_threads]
    values += [float(schedule.loop_order == order) for order in LOOP_ORDERS]
    values += [schedule.loop_order.index("k"),
               float(schedule.resident_weights), float(schedule.resident_input)]
    values += [usage[kind] / config.depth(kind) for kind in ("inp", "wgt", "acc")]
    values += [_log2(slot[kind]) for kind in ("inp", "wgt", "acc")]
    values += [_log2(inp_bytes), _log2(wgt_bytes), _log2(out_bytes),
               inp_bytes / compulsory["inp"], wgt_bytes / compulsory["wgt"],
               _log2((inp_bytes + wgt_bytes + out_bytes) / config.dram_bus_bytes / uops)]
    values += [_log2(load_instructions), _log2(gemm_instructions), _log2(kernel),
               gemm_instructions / uops, _log2(tiles * 2)]
    values += [plan.epilogue_overlap()]
    values += [_log2(cost), cost / uops]
    return np.asarray(values, dtype=np.float32)


FEATURE_NAMES: tuple[str, ...] = (
    tuple(f"log2_tile_{a}" for a in _AXES) + tuple(f"tile_{a}_fraction" for a in _AXES)
    + tuple(f"log2_count_{a}" for a in _AXES)
    + ("log2_tiles", "threads", "virtual_threads")
    + tuple(f"order_{order}" for order in LOOP_ORDERS)
    + ("k_position", "resident_weights", "resident_input")
    + ("inp_use", "wgt_use", "acc_use", "log2_inp_slot", "log2_wgt_slot", "log2_acc_slot")
    + ("log2_inp_bytes", "log2_wgt_bytes", "log2_out_bytes", "inp_reload", "wgt_reload",
       "log2_bus_beats_per_uop")
    + ("log2_load_instructions", "log2_gemm_instructions", "log2_uop_kernel",
       "gemm_instructions_per_uop", "log2_alu_instructions")
    + ("epilogue_overlap",)
    + ("log2_estimate", "estimate_per_uop"))
