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
products of ``a`` and ``b``, wrapping.

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

from vdla.compiler.gpu.codegen import ELEMENT_TYPES, KERNEL_NAME
from vdla.hw import cache
from vdla.compiler.gpu.tiling import Tiling

__all__ = ["emulate", "EmulationError"]

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


class EmulationError(RuntimeError):
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


def emulate(tiling: Tiling, source: str, data: np.ndarray, weight: np.ndarray,
            bias: np.ndarray | None) -> np.ndarray:
    """Run ``source`` (a `compiler.gpu.codegen.generate_cuda` kernel for ``tiling``) on the CPU.

    Parameters
    ----------
    tiling : Tiling
        The kernel's tiling (grid, threads, weight packing).
    source : str
        Its CUDA C (int8 or fp32).
    data, weight, bias : numpy.ndarray
        The layer's logical inputs; ``bias`` None for zeros.

    Returns
    -------
    numpy.ndarray
        The output, of the layer's logical shape.
    """
    if tiling.mode == "fp16":
        raise EmulationError("fp16 kernels need cuda_fp16.h, which has no host build here")
    types = ELEMENT_TYPES[tiling.mode]
    library_path = _build(_PRELUDE + source + _LAUNCHER.format(
        grid_m=tiling.grid[0], grid_n=tiling.grid[1], threads=tiling.threads,
        kernel=KERNEL_NAME, **{name: types[name] for name in ("data", "weight", "bias", "out")}))
    host = np.int8 if tiling.mode == "int8" else np.float32
    bias_type = np.int32 if tiling.mode == "int8" else np.float32
    data = np.ascontiguousarray(data, dtype=host)
    packed = np.ascontiguousarray(tiling.pack_weight(np.asarray(weight, dtype=host)))
    bias = np.ascontiguousarray(np.zeros(tiling.channels_out, bias_type) if bias is None
                                else np.asarray(bias, bias_type))
    problem = tiling.problem
    if problem.out_strides[0] == 0:  # dense, normalised as 1 x N x 1 x M
        shape = (problem.width, problem.out_channels)
    else:
        shape = (problem.batch, problem.out_channels, problem.out_height, problem.out_width)
    out = np.zeros(shape, dtype=host)
    library = ctypes.CDLL(library_path)
    pointer = ctypes.c_void_p
    library.vdla_emulate(data.ctypes.data_as(pointer), packed.ctypes.data_as(pointer),
                         bias.ctypes.data_as(pointer), out.ctypes.data_as(pointer))
    return out
