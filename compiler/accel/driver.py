"""The compilation flow: op -> schedule -> IR -> passes (`compiler.accel.pipeline`) -> Program."""

from __future__ import annotations

import time
from typing import Callable

from vdla.compiler.accel import codegen, ir
from vdla.compiler.errors import CompileError
from vdla.compiler.accel.lower import lower
from vdla.compiler.ops import Conv2d, Dense, accelerator_limits
from vdla.compiler.accel.pipeline import PassContext, run_pipeline
from vdla.compiler.accel.schedule import Schedule
from vdla.compiler.accel.search import default_schedule
from vdla.hw.config import HwConfig
from vdla.runtime.layout import packed_nbytes
from vdla.runtime.program import Program

__all__ = ["compile_op", "compile_function", "COMPILER_VERSION"]

COMPILER_VERSION = 1


def _resolve_schedule(op, config: HwConfig, schedule: Schedule | dict | None,
                      virtual_threads: int | None, latency_hiding: bool) -> Schedule:
    if schedule is None:
        return default_schedule(op, config, virtual_threads=virtual_threads,
                                latency_hiding=latency_hiding)
    if isinstance(schedule, dict):
        schedule = Schedule.from_dict(schedule)
    changes = {}
    if virtual_threads is not None:
        changes["virtual_threads"] = virtual_threads
    if not latency_hiding:
        changes.update(latency_hiding=False, virtual_threads=1)
    return schedule.replace(**changes) if changes else schedule


# Compile time and memory grow with a layer's tensors; beyond this many bytes
# of packed tensors (64 MiB; ResNet-18's largest layer needs under 1 MiB) a
# layer is refused up front rather than exhausting memory part-way.
MAX_LAYER_BYTES = 1 << 26


def _check_size(op: Conv2d | Dense, geometry, config: HwConfig) -> None:
    """Raise `CompileError` when the layer's packed tensors (as ``geometry``, the op's
    compiled geometry, lays them out) exceed `MAX_LAYER_BYTES`."""
    sizes = {name: packed_nbytes(geometry.layouts[name], tuple(geometry.shapes[name]), config)
             for name in geometry.layouts if name in geometry.shapes}
    total = sum(sizes.values())
    if total > MAX_LAYER_BYTES:
        biggest = max(sizes, key=sizes.get)
        raise CompileError(f"{op.describe()} is too large to compile: its tensors need "
                           f"{total:,} bytes of DRAM ({biggest} {sizes[biggest]:,}), more than "
                           f"vdla's limit of {MAX_LAYER_BYTES:,} bytes per layer")


def compile_function(op: Conv2d | Dense, config: HwConfig, schedule: Schedule | dict | None = None,
                     *, virtual_threads: int | None = None, latency_hiding: bool = True,
                     fold: bool = True, fused_epilogue: bool = True,
                     dump: Callable[[str, ir.Function], None] | None = None) -> ir.Function:
    """Run every pass and return the final IR (instructions, uops, statistics).

    Parameters are those of `compile_op`; ``fold=False`` keeps one instruction
    per micro-op (for measuring what folding buys, on small layers only);
    ``fused_epilogue=False`` uses four ALU passes instead of REQUANT.
    """
    if not isinstance(op, (Conv2d, Dense)):
        raise CompileError(f"cannot compile {type(op).__name__}: expected Conv2d or Dense")
    geometry = accelerator_limits(op.geometry(), config)
    _check_size(op, geometry, config)
    timings = {}
    start = time.perf_counter()
    schedule = _resolve_schedule(op, config, schedule, virtual_threads, latency_hiding)
    plan = schedule.check(geometry, config)
    timings["schedule"] = time.perf_counter() - start
    function = lower(plan, name=op.describe())
    timings["lower"] = time.perf_counter() - start - timings["schedule"]
    context = PassContext(config, serialize=not schedule.latency_hiding, fold=fold,
                          fused_epilogue=fused_epilogue)
    function, pass_timings = run_pipeline(function, context, dump)
    timings.update(pass_timings)
    function.stats["timings_s"] = {k: round(v, 6) for k, v in timings.items()}
    return function


def compile_op(op: Conv2d | Dense, config: HwConfig, schedule: Schedule | dict | None = None,
               *, virtual_threads: int | None = None, latency_hiding: bool = True,
               dump: Callable[[str, ir.Function], None] | None = None) -> Program:
    """Compile one layer for an accelerator configuration.

    Parameters
    ----------
    op : Conv2d or Dense
        The layer, with its fused epilogue.
    config : HwConfig
        The accelerator.
    schedule : Schedule or dict, optional
        Tiling knobs; `default_schedule` when omitted.
    virtual_threads : int, optional
        Override the schedule's virtual thread count.
    latency_hiding : bool
        False: one thread and fully serialising tokens (ablation baseline).
    dump : callable, optional
        Called as ``dump(pass name, function)`` after each pass of
        `compiler.accel.pipeline.PIPELINE` (``vdla compile --dump-after``).

    Returns
    -------
    Program
        With ``metadata`` holding the op, the schedule, the resolved tiling
        and every pass's statistics.

    Raises
    ------
    CompileError
        (or its subclasses ShapeError, ScheduleError) for layers or schedules
        that cannot be compiled for ``config``.
    """
    start = time.perf_counter()
    function = compile_function(op, config, schedule, virtual_threads=virtual_threads,
                                latency_hiding=latency_hiding, dump=dump)
    plan = function.plan
    metadata = {
        "compiler_version": COMPILER_VERSION,
        "op": op.to_dict(),
        "op_description": op.describe(),
        "schedule": plan.schedule.to_dict(),
        "tiling": {"tile": plan.tile, "counts": plan.counts, "threads": plan.threads,
                   "compact": list(plan.compact),
                   "bias_entries": plan.bias_entries, "usage": plan.usage()},
        "stats": function.stats,
    }
    program = codegen.generate(function, metadata)
    program.metadata["compile_seconds"] = round(time.perf_counter() - start, 6)
    return program
