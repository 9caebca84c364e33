"""The accelerator's pass pipeline, declared: which passes run after lowering, in order.

As TVM's ``tvm.transform.Sequential`` runs named passes under a
``PassContext``, `PIPELINE` lists every pass once, each a `Pass` record with
its name, the function it runs and what it does; `run_pipeline` runs them in
order on a lowered `ir.Function`, times each under its name and can hand each
result to a ``dump`` callback by name (``vdla compile --dump-after NAME``). A
`PassContext` carries the compile options the passes read.

Each pass records what it did in ``function.stats`` (`compiler.accel.passes`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from vdla.compiler.accel import ir
from vdla.compiler.accel.passes.dma import inject_dma
from vdla.compiler.accel.passes.epilogue import lower_epilogues
from vdla.compiler.accel.passes.gemm_reset import gemm_reset
from vdla.compiler.accel.passes.latency_hiding import insert_tokens
from vdla.compiler.accel.passes.overlap import hoist_resets, mark_overlap
from vdla.compiler.accel.passes.tensorize import tensorize
from vdla.compiler.accel.passes.uop_folding import fold_uops, place_uops
from vdla.compiler.accel.passes.virtual_threads import assign_virtual_threads
from vdla.hw.config import HwConfig

__all__ = ["Pass", "PassContext", "PIPELINE", "PASS_NAMES", "run_pipeline"]


@dataclasses.dataclass(frozen=True)
class PassContext:
    """The compile options the passes read.

    Attributes
    ----------
    config : HwConfig
    serialize : bool
        No latency hiding: fully serialising tokens and no compute overlap.
    fold : bool
        False keeps one instruction per micro-op (to measure what folding buys).
    fused_epilogue : bool
        False lowers the epilogue to four ALU passes instead of REQUANT.
    gemm_reset : bool or None
        The tiles' first GEMMs overwrite the accumulators instead of an ALU reset
        (`passes.gemm_reset`): None where the cost model estimates it saves cycles.
    """

    config: HwConfig
    serialize: bool = False
    fold: bool = True
    fused_epilogue: bool = True
    gemm_reset: bool | None = None


@dataclasses.dataclass(frozen=True)
class Pass:
    """One named pass: ``run(function, context)`` returns the transformed function."""

    name: str
    run: Callable[[ir.Function, PassContext], ir.Function]
    summary: str


def _context_free(transform: Callable[[ir.Function], ir.Function]):
    """A pass function that reads no option, as a `Pass.run`."""
    def run(function: ir.Function, context: PassContext) -> ir.Function:
        return transform(function)
    run.__doc__ = transform.__doc__
    return run


def _epilogue(function: ir.Function, context: PassContext) -> ir.Function:
    return lower_epilogues(function, fused=context.fused_epilogue)


def _gemm_reset(function: ir.Function, context: PassContext) -> ir.Function:
    return gemm_reset(function, enabled=context.gemm_reset)


def _uop_folding(function: ir.Function, context: PassContext) -> ir.Function:
    # Placement is a pass of its own, after hoist_resets has moved the resets.
    if context.fold:
        return fold_uops(function, max_folds=2, max_kernel=None, place=False)
    return fold_uops(function, max_folds=0, max_kernel=1, place=False)


def _latency_hiding(function: ir.Function, context: PassContext) -> ir.Function:
    return insert_tokens(function, serialize=context.serialize)


def _mark_overlap(function: ir.Function, context: PassContext) -> ir.Function:
    # A serialised program waits for everything: nothing may overlap.
    if not context.serialize:
        function.stats["overlap"]["instructions"] = mark_overlap(function.instructions,
                                                                 context.config)
    return function


PIPELINE: tuple[Pass, ...] = (
    Pass("tensorize", _context_free(tensorize),
         "the innermost block of each MAC nest becomes one GEMM"),
    Pass("epilogue", _epilogue, "bias, shift and clip become ALU passes (one fused REQUANT)"),
    Pass("virtual_threads", _context_free(assign_virtual_threads),
         "buffers replicated into SRAM slots, threads interleaved"),
    Pass("dma", _context_free(inject_dma), "copies become 2D strided LOAD/STORE instructions"),
    Pass("gemm_reset", _gemm_reset,
         "where it saves cycles, each tile's first GEMMs overwrite instead of an ALU reset"),
    Pass("uop_folding", _uop_folding,
         "loop nests folded into GEMM/ALU instructions and micro-op kernels"),
    Pass("hoist_resets", _context_free(hoist_resets),
         "each tile's ALU reset moved beside the other thread's GEMMs"),
    Pass("uop_placement", _context_free(place_uops), "micro-op kernels placed in the uop cache"),
    Pass("latency_hiding", _latency_hiding,
         "the stages flattened into one stream, dependency tokens set"),
    Pass("mark_overlap", _mark_overlap,
         "overlap set on GEMM/ALU instructions that may run beside the other unit"),
)
# The names `vdla compile --dump-after` accepts, in pipeline order.
PASS_NAMES: tuple[str, ...] = tuple(step.name for step in PIPELINE)


def run_pipeline(function: ir.Function, context: PassContext,
                 dump: Callable[[str, ir.Function], None] | None = None
                 ) -> tuple[ir.Function, dict[str, float]]:
    """Run every pass of `PIPELINE` in order; ``dump(name, function)`` after each.

    Returns
    -------
    (ir.Function, dict)
        The final function and each pass's seconds, by name.
    """
    timings = {}
    for step in PIPELINE:
        began = time.perf_counter()
        function = step.run(function, context)
        timings[step.name] = time.perf_counter() - began
        if dump is not None:
            dump(step.name, function)
    return function, timings
