"""A generated GPU kernel, compiled at run time with NVRTC and launched through CuPy.

CuPy (the optional extra ``vdla[gpu]``) is the maintained binding: its
``RawModule`` compiles the CUDA C with NVRTC for the current device and keeps
the result in its on-disk cache, keyed by a hash of the source, the options,
the architecture and NVRTC's version (``$CUPY_CACHE_DIR``, ``~/.cupy`` by
default), so a layer compiles once per machine.

The launch path is built for layers of a few microseconds: `GpuKernel`
allocates its device buffers (input, packed weights, bias, output) once, packs
the weights once (`set_weights`), and `launch` is one kernel launch on the
kernel's stream with no allocation and no host synchronisation. `run` adds
what the host-array contract needs (one copy in, one copy out, one stream
synchronisation). `capture_graph` records launches of several kernels into a
CUDA graph that replays them with one host call.

Verified here only as far as a machine without a GPU can: nothing in this
module has run on a GPU in the session that wrote it (see ``tests/compiler/gpu``
and ``benchmarks/gpu.py``, which run it where a device exists).
"""

from __future__ import annotations

import functools

import numpy as np

from vdla.compiler.cpu.kernel import dtypes_of as cpu_dtypes_of
from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.errors import ShapeError, check_mode
from vdla.compiler.gpu.codegen import KERNEL_NAME, generate_op_cuda
from vdla.compiler.gpu.schedule import GPU_MODES, GpuSchedule, default_gpu_schedule
from vdla.compiler.gpu.tiling import Tiling
from vdla.errors import VdlaError

__all__ = ["GpuKernel", "GpuUnavailable", "gpu_unavailable_reason", "dtypes_of",
           "capture_graph", "NVRTC_OPTIONS"]

NVRTC_OPTIONS = ("-std=c++17",)


class GpuUnavailable(VdlaError):
    """No CUDA device, or no CuPy to reach one."""


def dtypes_of(mode: str) -> dict[str, np.dtype]:
    """The host dtypes of ``data``, ``weight``, ``bias`` and ``out`` in ``mode``.

    int8 and fp32 as the cpu target's (`compiler.cpu.kernel.dtypes_of`); fp16
    takes float16 tensors and a float32 bias (the accumulator's type).
    """
    if mode == "fp16":
        return {"data": np.dtype(np.float16), "weight": np.dtype(np.float16),
                "bias": np.dtype(np.float32), "out": np.dtype(np.float16)}
    return cpu_dtypes_of(mode)


@functools.lru_cache(maxsize=None)
def gpu_unavailable_reason() -> str | None:
    """None when a CUDA device can be used through CuPy, else why not (one line)."""
    try:
        import cupy
    except ImportError:
        return "no CUDA device: CuPy is not installed (pip install 'vdla[gpu]')"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CuPy raises its own CUDARuntimeError without a driver
        return f"no CUDA device: {str(error).splitlines()[0]}"
    if count < 1:
        return "no CUDA device: the driver reports none"
    return None


def _cupy():
    reason = gpu_unavailable_reason()
    if reason is not None:
        raise GpuUnavailable(reason)
    import cupy
    return cupy


class GpuKernel:
    """One layer compiled for the current CUDA device.

    Its CUDA C is always generated here (`compiler.gpu.codegen`), so NVRTC
    compiles no text that vdla did not generate.

    Parameters
    ----------
    op : compiler.ops.Conv2d or compiler.ops.Dense
    mode : str
        ``"int8"`` (bit-exact with the accelerator), ``"fp16"`` or ``"fp32"``.
    schedule : GpuSchedule, optional
        `default_gpu_schedule` otherwise.

    Raises
    ------
    GpuUnavailable
        Without CuPy or a device.
    ScheduleError
        For an unknown mode.
    """

    def __init__(self, op, mode: str = "int8", schedule: GpuSchedule | None = None):
        check_mode(mode, GPU_MODES)
        cupy = _cupy()
        self.op, self.mode = op, mode
        self.problem = CpuProblem.from_op(op)
        self.schedule = schedule or default_gpu_schedule(self.problem, mode)
        self.tiling = Tiling(self.problem, self.schedule, mode)
        self.source = generate_op_cuda(op, mode, self.schedule)
        self.dtypes = dtypes_of(mode)
        self._module = cupy.RawModule(code=self.source, options=NVRTC_OPTIONS)
        self._function = self._module.get_function(KERNEL_NAME)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        shapes = op.geometry().shapes
        self.data = cupy.zeros(shapes["data"], dtype=self.dtypes["data"])
        self.out = cupy.zeros(op.output_shape, dtype=self.dtypes["out"])
        word = np.int32 if mode == "int8" else self.dtypes["weight"]
        self.weight = cupy.zeros((self.tiling.words, self.tiling.channels_out), dtype=word)
        self.bias = cupy.zeros(self.tiling.channels_out, dtype=self.dtypes["bias"])
        self._host_out = np.empty(op.output_shape, dtype=self.dtypes["out"])
        self._weights_set = False

    def set_weights(self, weight: np.ndarray, bias: np.ndarray | None = None) -> None:
        """Pack ``weight`` (KCHW or dense ``(N, K)``) and upload it with ``bias`` (once per model)."""
        weight = np.asarray(weight, dtype=self.dtypes["weight"])
        self.weight.set(self.tiling.pack_weight(weight), stream=self.stream)
        values = np.zeros(self.tiling.channels_out, self.dtypes["bias"]) if bias is None \
            else self.tiling.pack_bias(np.asarray(bias, self.dtypes["bias"]))
        self.bias.set(values, stream=self.stream)
        self._weights_set = True

    def launch(self, data=None, out=None, stream=None) -> None:
        """One launch on device arrays (the kernel's own by default); no allocation, no sync."""
        self._function(self.tiling.grid, (self.tiling.threads,),
                       (self.data if data is None else data, self.weight, self.bias,
                        self.out if out is None else out),
                       stream=stream or self.stream)

    def run(self, data: np.ndarray) -> np.ndarray:
        """Compute the layer on host ``data``: copy in, launch, copy out (one synchronisation)."""
        if not self._weights_set:
            raise ShapeError("GpuKernel.run: call set_weights first")
        data = np.ascontiguousarray(data, dtype=self.dtypes["data"])
        if data.shape != tuple(self.data.shape):
            raise ShapeError(f"data: expected shape {tuple(self.data.shape)}, got {data.shape}")
        self.data.set(data, stream=self.stream)
        self.launch()
        self.out.get(stream=self.stream, out=self._host_out)
        self.stream.synchronize()
        return self._host_out.copy()


def capture_graph(kernels: list[GpuKernel], stream):
    """A CUDA graph of one launch of each kernel, in order, on ``stream`` (CuPy's capture)."""
    stream.begin_capture()
    try:
        for kernel in kernels:
            kernel.launch(stream=stream)
    finally:
        graph = stream.end_capture()
    return graph
