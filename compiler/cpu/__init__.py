"""The ``cpu`` target: the accelerator's layers as generated, vectorised C for the host CPU.

Flow: op definition (`compiler.ops`) -> `CpuProblem` -> `CpuSchedule` (declared
knobs, `cpu_knob_space`, a cost model picks `default_cpu_schedule`) -> C
(`codegen`) -> shared library (`build`, cached) -> `CpuKernel` (ctypes) ->
a `Program` with ``target="cpu"`` (`program.compile_cpu`) that
`compiler.cpu.runner.CpuRunner` runs.
"""

from vdla.compiler.cpu.kernel import CpuKernel, dtypes_of, reference_fp32
from vdla.compiler.cpu.schedule import (CpuProblem, CpuSchedule, cpu_knob_space,
                                        default_cpu_schedule, estimate_cpu_cost)

__all__ = ["CpuKernel", "CpuProblem", "CpuSchedule", "cpu_knob_space", "default_cpu_schedule",
           "estimate_cpu_cost", "dtypes_of", "reference_fp32"]
