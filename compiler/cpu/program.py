"""Compile a layer for the ``cpu`` target into a `runtime.program.Program`.

A cpu program has no instructions and no code: its tensors are plain arrays
of the layer's logical shapes (`runtime.program.HOST_LAYOUTS`), and its
metadata holds the op, the arithmetic mode, the schedule and what this
machine recorded (the dot-product ``isa`` and the compiler ``flags``). The
machine that runs the file regenerates the C from them and builds it there,
with its own flags (`compiler.host`, `compiler.cpu.runner.CpuRunner`).
"""

from __future__ import annotations

from vdla.compiler.cpu.build import compiler_flags
from vdla.compiler.cpu.codegen import generate_op_c
from vdla.compiler.cpu.kernel import CpuKernel, dtypes_of
from vdla.compiler.cpu.schedule import CPU_MODES, CpuSchedule
from vdla.compiler.host_target import HostTarget, register_host_target
from vdla.hw.config import HwConfig
from vdla.runtime.program import Program, host_program

__all__ = ["compile_cpu", "CPU"]


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


# The cpu target's programs (`compiler.host.host_spec` checks them).
CPU = register_host_target(HostTarget(
    name="cpu", code="C", modes=CPU_MODES, dtypes_of=dtypes_of, schedule_type=CpuSchedule,
    generate=generate_op_c, records={"isa": (lambda value: isinstance(value, str), "a string"),
                                     "flags": (_strings, "a list of strings")}))


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
    info = CPU.info(mode, kernel.schedule, isa=kernel.isa, flags=list(compiler_flags()))
    return host_program(op, dtypes_of(mode), "cpu", info, config)
