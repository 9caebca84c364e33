"""The GPU columns of `bench.compare`: the gpu target and PyTorch's cuDNN, same GPU, same run.

Columns (per layer, batch 1; the same with `` b8`` at batch 8):

- ``gpu int8`` / ``gpu fp16`` / ``gpu fp32``: the ``gpu`` target
  (`compiler.gpu`), default schedules; its int8 output checked bit-exact,
  floats close, against numpy;
- ``cudnn fp16`` / ``cudnn tf32`` / ``cudnn fp32``: ``torch.nn.functional.conv2d``
  with bias then ``relu`` (as PyTorch users write a conv layer; two launches),
  ``cudnn.benchmark`` on, TF32 allowed only in the tf32 column.

Timing is GPU time between CUDA events around ``inner`` back-to-back calls on
device-resident tensors, divided by ``inner``; the median of ``repeats``
such samples. A layer's few microseconds of work are then bounded by how fast
launches are issued, which is what these layers cost in a network. Outside
that, ``gpu_graph`` times the whole of C2–C11 x uses replayed as one CUDA
graph of the gpu target's kernels.

Without a CUDA device (or CuPy) every column says "not measured (no CUDA
device: ...)"; without PyTorch the cudnn columns say so. Nothing here has run
on a GPU in the session that wrote it: ``benchmarks/gpu.py`` runs it there.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import subprocess
from typing import Callable, Sequence

import numpy as np

from vdla.compiler.gpu.schedule import GPU_MODES
from vdla.compiler.workloads import Workload

__all__ = ["GPU_COLUMNS", "gpu_columns", "gpu_machine", "float_inputs"]

_PEERS = ("fp16", "tf32", "fp32")
GPU_COLUMNS = tuple(f"{name}{suffix}" for suffix in ("", " b8")
                    for name in [f"gpu {m}" for m in GPU_MODES] + [f"cudnn {p}" for p in _PEERS])
# Largest |error| / max|reference| accepted for each float arithmetic.
_TOLERANCE = {"fp16": 1e-2, "tf32": 1e-2, "fp32": 1e-4}


def float_inputs(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The int8 inputs scaled into fp16's range: data and weights / 16 (exact in fp16), bias / 256.

    Outputs then stay far below fp16's 65504; the bias is exact in fp32 (the
    gpu target's fp16 bias type) and rounds in cuDNN's fp16 columns.
    """
    scale = {"data": 16.0, "weight": 16.0, "bias": 256.0}
    return {name: (array / scale[name]).astype(np.float32) for name, array in inputs.items()}


def _close(out, reference, mode: str) -> tuple[bool, str]:
    scale = max(float(np.abs(reference).max()), 1e-6)
    error = float(np.abs(np.asarray(out, np.float64) - reference).max()) / scale
    return error <= _TOLERANCE[mode], f"max error {error:.1e} of max |out|"


def _event_seconds(cupy, enqueue: Callable[[], None], stream, repeats: int, inner: int) -> float:
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    samples = []
    for _ in range(repeats):
        start.record(stream)
        for _ in range(inner):
            enqueue()
        end.record(stream)
        end.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, end) / 1e3 / inner)
    return statistics.median(samples)


def gpu_machine() -> dict:
    """Device name, driver, clocks and library versions (empty fields where unknown)."""
    import cupy
    runtime = cupy.cuda.runtime
    device = cupy.cuda.Device()
    properties = runtime.getDeviceProperties(device.id)
    info = {"name": properties["name"].decode(), "compute_capability": device.compute_capability,
            "sms": properties["multiProcessorCount"],
            "clock_khz": properties.get("clockRate"),
            "memory_clock_khz": properties.get("memoryClockRate"),
            "driver_version": runtime.driverGetVersion(),
            "cuda_runtime_version": runtime.runtimeGetVersion(),
            "nvrtc_version": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
            "cupy": cupy.__version__}
    smi = shutil.which("nvidia-smi")
    if smi:
        query = "name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu"
        result = subprocess.run([smi, f"--query-gpu={query}", "--format=csv,noheader"],
                                capture_output=True, text=True)
        info["nvidia_smi"] = dict(zip(query.split(","),
                                      (v.strip() for v in result.stdout.split(","))))
    try:
        import torch
        info.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version())
    except ImportError:
        pass
    return info


def _ours(mode, op, inputs, references, repeats, inner):
    import cupy
    from vdla.compiler.gpu.kernel import GpuKernel
    kernel = GpuKernel(op, mode)
    tensors = inputs if mode == "int8" else float_inputs(inputs)
    kernel.set_weights(tensors["weight"], tensors.get("bias"))
    out = kernel.run(tensors["data"])  # also the warm-up (NVRTC compile, module load)
    if mode == "int8":
        ok, what = bool(np.array_equal(out, references["int8"])), "bit-exact"
    else:
        ok, what = _close(out, references["float"], mode)
    seconds = _event_seconds(cupy, kernel.launch, kernel.stream, repeats, inner)
    return seconds, ok, what, kernel


def _cudnn(peer, op, inputs, references, repeats, inner):
    import cupy
    import torch
    import torch.nn.functional as functional
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = peer == "tf32"
    dtype = torch.float16 if peer == "fp16" else torch.float32
    tensors = {name: torch.from_numpy(array).to("cuda", dtype)
               for name, array in float_inputs(inputs).items()}
    scale = 2.0 ** -min(op.shift, 31)

    top, left, bottom, right = op.padding

    def call():
        # torch pads symmetrically: asymmetric padding goes in first.
        data = tensors["data"] if (top, left) == (bottom, right) else \
            functional.pad(tensors["data"], (left, right, top, bottom))
        padding = (top, left) if (top, left) == (bottom, right) else 0
        out = functional.conv2d(data, tensors["weight"], tensors.get("bias"), op.stride,
                                padding, op.dilation, op.groups)
        out = out * scale if scale != 1.0 else out
        return functional.relu(out) if op.relu else out
    out = call().float().cpu().numpy()
    ok, what = _close(out, references["float"], peer)
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    return _event_seconds(cupy, call, stream, repeats, inner), ok, what


def gpu_columns(workloads: Sequence[Workload], column_type, make_inputs, check,
                repeats: int, inner: int = 20, progress=None) -> tuple[list, dict]:
    """The GPU columns over ``workloads`` at batch 1 and 8, and the CUDA-graph totals.

    Parameters
    ----------
    workloads : sequence of Workload
        Batch-1 layers; batch 8 is the same layer with ``batch=8``.
    column_type : type
        `bench.compare.Column`.
    make_inputs : callable
        ``(workload) -> inputs`` (int8 tensors of the workload's op).
    check : callable
        `bench.compare._check` (raises `CheckError` on a wrong output).
    repeats, inner : int
        Event-timed samples per layer, and back-to-back calls per sample.

    Returns
    -------
    (list of Column, dict)
        The columns, and ``{"device": ..., "graph_seconds": {"int8": ..., "int8 b8": ...}}``
        (``{"missing": reason}`` without a device).
    """
    from vdla.compiler.cpu.kernel import reference_fp32
    from vdla.compiler.gpu.kernel import capture_graph, gpu_unavailable_reason
    progress = progress or (lambda message: None)
    columns = {name: column_type(name) for name in GPU_COLUMNS}
    reason = gpu_unavailable_reason()
    if reason is not None:
        for column in columns.values():
            column.missing = f"not measured ({reason})"
        return list(columns.values()), {"missing": f"not measured ({reason})"}
    try:
        import torch
        torch_missing = None if torch.cuda.is_available() else "torch sees no CUDA device"
    except ImportError:
        torch_missing = "torch is not installed"
    import cupy
    extra = {"device": gpu_machine(), "graph_seconds": {}, "inner": inner}
    for suffix, batch in (("", 1), (" b8", 8)):
        if torch_missing:
            for peer in _PEERS:
                columns[f"cudnn {peer}{suffix}"].missing = f"not measured: {torch_missing}"
        sequence = []
        for workload in workloads:
            op = dataclasses.replace(workload.op, batch=batch)
            layer = dataclasses.replace(workload, op=op)
            inputs = make_inputs(layer)
            references = {"int8": op.reference(**inputs),
                          "float": reference_fp32(op, **float_inputs(inputs))}
            for mode in GPU_MODES:
                name = f"gpu {mode}{suffix}"
                progress(f"{workload.name} b{batch}: {name}")
                seconds, ok, what, kernel = _ours(mode, op, inputs, references, repeats, inner)
                columns[name].seconds[workload.name] = seconds
                columns[name].checked[workload.name] = check(name, workload.name, ok, what)
                if mode == "int8":
                    sequence += [kernel] * workload.uses
            for peer in ([] if torch_missing else _PEERS):
                name = f"cudnn {peer}{suffix}"
                progress(f"{workload.name} b{batch}: {name}")
                seconds, ok, what = _cudnn(peer, op, inputs, references, repeats, inner)
                columns[name].seconds[workload.name] = seconds
                columns[name].checked[workload.name] = check(name, workload.name, ok, what)
        stream = cupy.cuda.Stream(non_blocking=True)
        graph = capture_graph(sequence, stream)
        extra["graph_seconds"][f"int8{suffix}"] = _event_seconds(
            cupy, lambda graph=graph, stream=stream: graph.launch(stream), stream, repeats, 1)
    for name, column in columns.items():
        if column.missing:
            continue
        column.note = (f"{extra['device']['name']}, batch {8 if name.endswith('b8') else 1}, "
                       f"CUDA-event time of {inner} back-to-back calls / {inner}")
    return list(columns.values()), extra
