"""Compile a layer for the ``gpu`` target into a `runtime.program.Program`.

A gpu program, like a cpu one (`compiler.cpu.program`), has no instructions
and no code: its tensors are plain arrays of the layer's logical shapes
(`runtime.program.HOST_LAYOUTS`) and its metadata holds the op, the mode and
the schedule. Compiling needs no GPU: the CUDA C is generated here and, where
nvcc exists, compiled for ``sm_90a`` to record ptxas's report (registers,
shared memory, spills). The machine that runs the file regenerates the same C
and compiles it with NVRTC for its own device (`compiler.host`,
`compiler.gpu.runner.GpuRunner`).
"""

from __future__ import annotations

import dataclasses

from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.errors import check_mode
from vdla.compiler.gpu.codegen import generate_op_cuda, refuse_unsupported
from vdla.compiler.gpu.kernel import dtypes_of
from vdla.compiler.gpu.nvcc import PtxasReport, compile_cubin, find_nvcc
from vdla.compiler.gpu.schedule import GPU_MODES, GpuSchedule, default_gpu_schedule
from vdla.compiler.host_target import HostTarget, register_host_target
from vdla.hw.config import HwConfig
from vdla.runtime.program import Program, host_program

__all__ = ["compile_gpu", "GPU"]


def _ptxas_report(value) -> bool:
    """None (no nvcc where it was compiled) or a `PtxasReport` as a dict."""
    if value is None:
        return True
    names = [field.name for field in dataclasses.fields(PtxasReport)]
    return (isinstance(value, dict) and sorted(value) == sorted(names)
            and isinstance(value["arch"], str)
            and all(isinstance(value[name], int) and not isinstance(value[name], bool)
                    for name in names if name != "arch"))


# The gpu target's programs (`compiler.host.host_spec` checks them).
GPU = register_host_target(HostTarget(
    name="gpu", code="CUDA C", modes=GPU_MODES, dtypes_of=dtypes_of, schedule_type=GpuSchedule,
    generate=generate_op_cuda, records={"ptxas": (_ptxas_report, "null or ptxas's report")}))


def compile_gpu(op, mode: str = "int8", schedule: GpuSchedule | None = None,
                config: HwConfig | None = None, check_with_nvcc: bool = True) -> Program:
    """Generate the CUDA C of ``op`` (to check it) and make a program with ``target="gpu"``.

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
    check_mode(mode, GPU_MODES)
    refuse_unsupported(op)
    schedule = schedule or default_gpu_schedule(CpuProblem.from_op(op), mode)
    source = generate_op_cuda(op, mode, schedule)
    report = compile_cubin(source) if check_with_nvcc and find_nvcc() else None
    info = GPU.info(mode, schedule, ptxas=dataclasses.asdict(report) if report else None)
    return host_program(op, dtypes_of(mode), "gpu", info, config)
