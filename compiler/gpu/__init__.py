"""The ``gpu`` target: the accelerator's layers as generated CUDA C (implicit GEMM, ``__dp4a``).

Flow: op definition (`compiler.ops`) -> the normalised convolution
(`compiler.cpu.schedule.CpuProblem`) -> `GpuSchedule` (declared knobs,
`gpu_knob_space`, a cost model picks `default_gpu_schedule`) -> `Tiling` (the
index formulas, once) -> CUDA C (`codegen`) and, from the same formulas, a
numpy execution of the kernel (`model`) -> NVRTC through CuPy at run time
(`kernel`, optional extra ``vdla[gpu]``) or nvcc at build/CI time (`nvcc`) ->
a `Program` with ``target="gpu"`` (`program.compile_gpu`) that
`compiler.gpu.runner.GpuRunner` runs.
"""

from vdla.compiler.gpu.schedule import (GpuSchedule, default_gpu_schedule, estimate_gpu_cost,
                                        gpu_knob_space)
from vdla.compiler.gpu.tiling import Tiling

__all__ = ["GpuSchedule", "Tiling", "default_gpu_schedule", "estimate_gpu_cost", "gpu_knob_space"]
