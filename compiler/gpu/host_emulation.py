"""Run the generated CUDA C itself on the CPU: one OS thread per CUDA thread, barriers for ``__syncthreads``.

Without a GPU, `compiler.gpu.model` checks the tiling's formulas; this checks
the kernel's *text*: the exact CUDA C `compiler.gpu.codegen` emits (byte
packing, ``__dp4a``, the loops, the guards, the REQUANT epilogue) is compiled
as C++20 by the host compiler with a small prelude that maps CUDA's names to
host ones, and launched block by block: every block's ``threads`` run as
``std::thread`` s sharing the kernel's ``__shared__`` arrays (function
statics: one block runs at a time) and a ``std::barrier`` for
``__syncthreads()``; ``threadIdx`` is thread-local, ``blockIdx`` set per block.
``__dp4a(a, b, c)`` is CUDA's definition: ``c`` plus the four signed byte
products of ``a`` and ``b``, wrapping. `EmulatedKernel` generates that text
itself from the op, mode and schedule and builds nothing else, so a program
file's stored code (`compiler.host`) can never reach the host compiler.

What this does not check: the GPU's memory model beyond barriers (a missing
``__syncthreads`` could go unnoticed when the host's threads happen to run in
order), warp-level timing, NVRTC/nvcc-specific code generation, and fp16
(``cuda_fp16.h`` has no host build here). Slow: thousands of OS threads per
layer; meant for tests on small shapes.
"""

from __future__ import annotations

import ctypes
import shutil

import numpy as np

from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.errors import ShapeError, check_mode
from vdla.compiler.gpu.codegen import ELEMENT_TYPES, KERNEL_NAME, generate_op_cuda
from vdla.compiler.gpu.kernel import dtypes_of
from vdla.compiler.gpu.schedule import GPU_MODES, GpuSchedule, default_gpu_schedule
from vdla.errors import VdlaError
from vdla import cache
from vdla.compiler.gpu.tiling import Tiling

__all__ = ["EmulatedKernel", "emulate", "EmulationError"]

_PRELUDE = """\
#include <barrier>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>
struct vdla_dim3 { int x, y, z; };
static thread_local vdla_dim3 threadIdx;
static vdla_dim3 blockIdx;
static std::barrier<>* vdla_block_barrier;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __syncthreads() vdla_block_barrier->arrive_and_wait()
static inline int __dp4a(int a, int b, int c) {
  unsigned sum = (unsigned)c;
  for (int q = 0; q < 4; ++q)
    sum += (unsigned)((int)(signed char)(a >> (8 * q)) * (int)(signed char)(b >> (8 * q)));
  return (int)sum;
}
"""

_LAUNCHER = """
extern "C" void vdla_emulate(const void* data, const void* weight, const void* bias, void* out) {{
  for (int m = 0; m < {grid_m}; ++m)
    for (int n = 0; n < {grid_n}; ++n) {{
      blockIdx = vdla_dim3{{m, n, 0}};
      std::barrier<> barrier({threads});
      vdla_block_barrier = &barrier;
      std::vector<std::thread> threads;
      for (int t = 0; t < {threads}; ++t)
        threads.emplace_back([=] {{
          threadIdx = vdla_dim3{{t, 0, 0}};
          {kernel}((const {data}*)data, (const {weight}*)weight, (const {bias}*)bias, ({out}*)out);
        }});
      for (auto& thread : threads) thread.join();
    }}
}}
"""


class EmulationError(VdlaError):
    """No C++20 host compiler, or it rejected the kernel."""


def _build(source: str) -> str:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise EmulationError("no C++ compiler (g++ or c++) on PATH")
    command = [compiler, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "kernel.cpp",
               "-o", "kernel.so"]

    def produce(work):
        (work / "kernel.cpp").write_text(source)
        cache.run_tool(command, work, "host build of the CUDA C", EmulationError)
    entry = cache.get_or_build("gpu/emulation", cache.key_of(source, " ".join(command)), produce,
                               ["kernel.so"], what="emulated GPU kernel")
    return str(entry.directory / "kernel.so")


class EmulatedKernel:
    """A gpu kernel run by this emulation, with `compiler.gpu.kernel.GpuKernel`'s host interface.

    The CUDA C is generated here from the op, mode and schedule
    (`compiler.gpu.codegen.generate_op_cuda`); no other text is ever built,
    so a gpu program file runs here (``GpuRunner(emulate=True)``)
    exactly as its regenerated kernel would on a GPU.

    Parameters
    ----------
    op : compiler.ops.Conv2d or compiler.ops.Dense
    mode : str
        ``"int8"`` or ``"fp32"``.
    schedule : GpuSchedule, optional
        `compiler.gpu.schedule.default_gpu_schedule` otherwise.

    Raises
    ------
    EmulationError
        For fp16, or without a C++20 host compiler.
    compiler.errors.ScheduleError
        For an unknown mode.
    """

    def __init__(self, op, mode: str = "int8", schedule: GpuSchedule | None = None):
        check_mode(mode, GPU_MODES)
        if mode == "fp16":
            raise EmulationError("fp16 kernels need cuda_fp16.h, which has no host build here")
        self.op, self.mode = op, mode
        problem = CpuProblem.from_op(op)
        self.schedule = schedule or default_gpu_schedule(problem, mode)
        self.tiling = Tiling(problem, self.schedule, mode)
        self.source = generate_op_cuda(op, mode, self.schedule)
        self.dtypes = dtypes_of(mode)
        types = ELEMENT_TYPES[mode]
        self._library = ctypes.CDLL(_build(_PRELUDE + self.source + _LAUNCHER.format(
            grid_m=self.tiling.grid[0], grid_n=self.tiling.grid[1], threads=self.tiling.threads,
            kernel=KERNEL_NAME, **{name: types[name] for name in ("data", "weight", "bias",
                                                                   "out")})))
        self._weight = self._bias = None

    def set_weights(self, weight: np.ndarray, bias: np.ndarray | None = None) -> None:
        """Pack ``weight`` (KCHW or dense ``(N, K)``) as the kernel reads it; None ``bias``: zeros."""
        self._weight = np.ascontiguousarray(self.tiling.pack_weight(
            np.asarray(weight, dtype=self.dtypes["weight"])))
        self._bias = np.ascontiguousarray(
            np.zeros(self.tiling.channels_out, self.dtypes["bias"]) if bias is None
            else self.tiling.pack_bias(np.asarray(bias, self.dtypes["bias"])))

    def run(self, data: np.ndarray) -> np.ndarray:
        """Compute the layer on ``data`` with the weights of `set_weights`."""
        if self._weight is None:
            raise ShapeError("EmulatedKernel.run: call set_weights first")
        data = np.ascontiguousarray(data, dtype=self.dtypes["data"])
        expected = tuple(self.op.geometry().shapes["data"])
        if data.shape != expected:
            raise ShapeError(f"data: expected shape {expected}, got {data.shape}")
        out = np.zeros(self.op.output_shape, dtype=self.dtypes["out"])
        pointer = ctypes.c_void_p
        self._library.vdla_emulate(data.ctypes.data_as(pointer),
                                   self._weight.ctypes.data_as(pointer),
                                   self._bias.ctypes.data_as(pointer), out.ctypes.data_as(pointer))
        return out


def emulate(op, mode: str, schedule: GpuSchedule | None, data: np.ndarray, weight: np.ndarray,
            bias: np.ndarray | None) -> np.ndarray:
    """Run the generated kernel of ``op`` on the CPU once (`EmulatedKernel`).

    Parameters
    ----------
    op : compiler.ops.Conv2d or compiler.ops.Dense
    mode : str
        ``"int8"`` or ``"fp32"``.
    schedule : GpuSchedule or None
        None for `compiler.gpu.schedule.default_gpu_schedule`.
    data, weight, bias : numpy.ndarray
        The layer's logical inputs; ``bias`` None for zeros.

    Returns
    -------
    numpy.ndarray
        The output, of the layer's logical shape.
    """
    kernel = EmulatedKernel(op, mode, schedule)
    kernel.set_weights(weight, bias)
    return kernel.run(data)
