"""Compile a layer for the ``gpu`` target into a `runtime.program.Program`.

A gpu program, like a cpu one (`compiler.cpu.program`), has no instructions:
its tensors are plain arrays of the layer's logical shapes
(`runtime.program.HOST_LAYOUTS`) and its metadata holds the op, the mode, the
schedule and the generated CUDA C. Compiling needs no GPU: the C is generated
here and, where nvcc exists, compiled for ``sm_90a`` to record ptxas's report
(registers, shared memory, spills). The machine that runs the file compiles
the same C with NVRTC for its own device (`runtime.Device(target="gpu")`).
"""

from __future__ import annotations

import dataclasses

from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.gpu.codegen import generate_cuda
from vdla.compiler.gpu.kernel import GpuKernel, dtypes_of
from vdla.compiler.gpu.nvcc import compile_cubin, find_nvcc
from vdla.compiler.gpu.schedule import MODES, GpuSchedule, default_gpu_schedule
from vdla.compiler.errors import ScheduleError
from vdla.hw.config import HwConfig
from vdla.runtime.program import Program, host_program

__all__ = ["compile_gpu", "kernel_of"]


def compile_gpu(op, mode: str = "int8", schedule: GpuSchedule | None = None,
                config: HwConfig | None = None, check_with_nvcc: bool = True) -> Program:
    """Generate the CUDA C of ``op`` and wrap it in a program with ``target="gpu"``.

    Parameters
    ----------
    op : compiler.ops.Conv2d or compiler.ops.Dense
    mode : str
        ``"int8"``, ``"fp16"`` or ``"fp32"``.
    schedule : GpuSchedule, optional
        `compiler.gpu.schedule.default_gpu_schedule` when omitted.
    config : HwConfig, optional
        Recorded in the file only (the format carries one); ``default`` otherwise.
    check_with_nvcc : bool
        Compile the C for sm_90a with nvcc when one is found, and record its
        report in ``metadata["gpu"]["ptxas"]`` (None otherwise).

    Raises
    ------
    ScheduleError
        For an unknown mode.
    compiler.gpu.nvcc.NvccError
        When nvcc rejects the generated C.
    """
    if mode not in MODES:
        raise ScheduleError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    problem = CpuProblem.from_op(op)
    schedule = schedule or default_gpu_schedule(problem, mode)
    source = generate_cuda(problem, schedule, mode, op.shift, op.relu, op.describe())
    report = compile_cubin(source) if check_with_nvcc and find_nvcc() else None
    info = {"mode": mode, "schedule": schedule.to_dict(), "source": source,
            "ptxas": dataclasses.asdict(report) if report else None}
    return host_program(op, dtypes_of(mode), "gpu", info, config)


def kernel_of(program: Program) -> GpuKernel:
    """The loaded kernel of a gpu program (its C compiled by NVRTC, or found in CuPy's cache)."""
    from vdla.compiler.ops import op_from_dict
    info = program.metadata["gpu"]
    return GpuKernel(op_from_dict(program.metadata["op"]), info["mode"],
                     GpuSchedule.from_dict(info["schedule"]), source=info["source"])
