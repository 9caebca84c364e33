"""Compile a layer for the ``cpu`` target into a `runtime.program.Program`.

A cpu program has no instructions: its tensors are plain arrays of the
layer's logical shapes (`runtime.program.HOST_LAYOUTS`), and its metadata
holds the op, the arithmetic mode, the schedule and the generated C, so a
``.vdla`` file runs on any machine with a C compiler (the C is rebuilt there,
with that machine's flags) through `runtime.Device(target="cpu")`.
"""

from __future__ import annotations

from vdla.compiler.cpu.build import compiler_flags
from vdla.compiler.cpu.kernel import CpuKernel, dtypes_of
from vdla.compiler.cpu.schedule import CpuSchedule
from vdla.hw.config import HwConfig
from vdla.runtime.program import Program, host_program

__all__ = ["compile_cpu", "kernel_of"]


def compile_cpu(op, mode: str = "int8", schedule: CpuSchedule | None = None,
                config: HwConfig | None = None) -> Program:
    """Compile ``op`` for this CPU (building its kernel once, so a run finds it cached).

    Parameters
    ----------
    op : compiler.ops.Conv2d or compiler.ops.Dense
    mode : str
        ``"int8"`` or ``"fp32"``.
    schedule : CpuSchedule, optional
        `compiler.cpu.schedule.default_cpu_schedule` when omitted.
    config : HwConfig, optional
        Recorded in the file only (the format carries one); ``default`` otherwise.

    Returns
    -------
    Program
        With ``target="cpu"``.
    """
    kernel = CpuKernel(op, mode, schedule)
    info = {"mode": mode, "schedule": kernel.schedule.to_dict(), "isa": kernel.isa,
            "flags": list(compiler_flags()), "source": kernel.source}
    return host_program(op, dtypes_of(mode), "cpu", info, config)


def kernel_of(program: Program) -> CpuKernel:
    """The loaded kernel of a cpu program (its C built here, or found in the cache)."""
    from vdla.compiler.ops import op_from_dict
    info = program.metadata["cpu"]
    return CpuKernel(op_from_dict(program.metadata["op"]), info["mode"],
                     CpuSchedule.from_dict(info["schedule"]), source=info["source"])
