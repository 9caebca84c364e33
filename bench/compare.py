"""The accelerator against the CPU: one run over ResNet-18's C2–C11, every output checked.

Columns (per layer, and in total weighted by each layer's ``uses``):

- ``accel``: the accelerator's cycles from the committed RTL baseline
  (``bench/baselines/<config>.json``, cycle-accurate Verilator runs; fsim
  counts no time) and their time at a stated clock; its outputs are checked in
  this run by compiling each layer and running it on ``fsim``;
- ``cpu int8`` / ``cpu fp32``: the ``cpu`` target (`compiler.cpu`), its
  default schedules, N threads;
- ``ort fp32`` (Conv + Relu), ``ort qlinear u8`` (QLinearConv with uint8
  activations, MLAS's fast path), ``ort qlinear s8`` (int8 activations),
  ``ort convinteger`` (ConvInteger, uint8 activations, int32 out): onnxruntime
  with the same threads, when ``onnxruntime`` and ``onnx`` are installed
  (``pip install 'vdla[compare]'``); otherwise "not measured";
- ``numpy fp32``: im2col and one matmul (numpy's BLAS, its own threads);
- with target ``gpu``: the gpu target and PyTorch cuDNN on the CUDA device,
  at batch 1 and 8 (`bench.gpu_compare`), or "not measured (no CUDA device)".

Times are medians of ``repeats`` calls after one checked warm-up call, taken
round-robin (each repeat calls every implementation of the layer once), so a
change in the machine's load touches all columns alike (numpy's own loop comes
after, as its BLAS threads spin on after each call). onnxruntime's idle
threads do not spin (``session.intra_op.allow_spinning=0``) and the cpu
target's sleep after ~50 us (`compiler.cpu` ``pool.c``): on a machine whose
cores other processes share, spinning threads steal them.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import statistics
import time
from typing import Callable, Sequence

import numpy as np

from vdla.bench.gpu_compare import GPU_COLUMNS, gpu_columns
from vdla.compiler.workloads import RESNET18, Workload

__all__ = ["Column", "CheckError", "run_comparison", "format_table", "markdown_table",
           "plot_comparison", "COLUMNS", "INT8_ORT", "DEFAULT_CLOCK_MHZ", "accel_clock"]

# VTA's published PYNQ (Zynq-7020) clock: the accelerator's clock where neither
# --clock-mhz nor a synthesis report of the config gives one (`accel_clock`).
DEFAULT_CLOCK_MHZ = 100.0


def accel_clock(config, clock_mhz: float | None = None) -> tuple[float, str]:
    """The accelerator's clock for ``config`` and where it comes from: ``clock_mhz``,
    else the config's placed-and-routed Fmax (`hw.synth.clock_for`), else
    `DEFAULT_CLOCK_MHZ`."""
    from vdla.hw.synth import clock_for
    known = clock_for(config, clock_mhz)
    if known is not None:
        return known
    return DEFAULT_CLOCK_MHZ, (f"nominal {DEFAULT_CLOCK_MHZ:g} MHz (VTA's PYNQ clock): no "
                               f"Fmax of config {config.name} known (vdla hw synth)")
COLUMNS = ("accel", "cpu int8", "cpu fp32", "ort fp32", "ort qlinear u8", "ort qlinear s8",
           "ort convinteger", "numpy fp32") + GPU_COLUMNS
INT8_ORT = ("ort qlinear u8", "ort qlinear s8", "ort convinteger")


@dataclasses.dataclass
class Column:
    """One implementation's seconds per layer, or why it was not measured."""

    name: str
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    checked: dict[str, str] = dataclasses.field(default_factory=dict)
    note: str = ""
    missing: str | None = None

    def total(self, workloads: Sequence[Workload]) -> float | None:
        if self.missing or any(w.name not in self.seconds for w in workloads):
            return None
        return sum(self.seconds[w.name] * w.uses for w in workloads)


class CheckError(AssertionError):
    """An implementation's output disagrees with the numpy reference."""


def _check(name: str, layer: str, ok: bool, what: str) -> str:
    if not ok:
        raise CheckError(f"{name} on {layer}: output differs from numpy ({what})")
    return what


def _layer_inputs(workload: Workload, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, int(workload.name[1:])])
    return workload.op.random_inputs(rng)


def _accel_column(workloads, config, clock_mhz, inputs, references) -> Column:
    from vdla.bench.suite import baseline_path, load_baseline
    from vdla.compiler import compile_op
    from vdla.runtime.device import Device
    column = Column("accel")
    path = baseline_path(config)
    if not path.exists():
        column.missing = (f"no RTL baseline for config {config.name!r} ({path.name}); "
                          f"make one with: vdla bench resnet18 --config {config.name} "
                          "--update-baseline")
        return column
    baseline = load_baseline(path)
    if baseline.get("config_hash") != config.hash:
        column.missing = f"{path.name} is for other hardware (config hash differs)"
        return column
    absent = [w.name for w in workloads if w.name not in baseline.get("layers", {})]
    if absent:
        column.missing = f"{path.name} has no cycles for {', '.join(absent)}"
        return column
    device = Device(config, sim="fsim")
    for workload in workloads:
        cycles = baseline["layers"][workload.name]["cycles"]
        column.seconds[workload.name] = cycles / (clock_mhz * 1e6)
        result = device.run(compile_op(workload.op, config), inputs[workload.name])
        column.checked[workload.name] = _check(
            "accel (fsim)", workload.name,
            np.array_equal(result.outputs["out"], references[workload.name]["int8"]),
            "bit-exact on fsim")
    column.note = (f"RTL cycles from {path.name} ({baseline.get('sim', 'rtl')}) at "
                   f"{clock_mhz:g} MHz; outputs checked on fsim")
    return column


# A timed implementation of one layer: the call, and a check of its output
# against the layer's references returning (ok, what was checked).
Timed = tuple[Callable[[], np.ndarray], Callable[[np.ndarray, dict], tuple[bool, str]]]


def _cpu_calls(mode: str, workload: Workload, threads: int, inputs) -> tuple[Timed, str]:
    from vdla.compiler.cpu import CpuKernel
    from vdla.compiler.cpu.build import compiler_flags
    kernel = CpuKernel(workload.op, mode)
    tensors = inputs if mode == "int8" else _as_float(inputs)
    kernel.set_weights(tensors["weight"], tensors.get("bias"))
    out = np.empty(workload.op.output_shape, kernel.dtypes["out"])

    def check(result, references):
        if mode == "int8":
            return bool(np.array_equal(result, references["int8"])), "bit-exact"
        return _close(result, references["fp32"]), "rtol 1e-5"
    note = f"{threads} threads, {kernel.isa}, {' '.join(compiler_flags())}"
    return (lambda: kernel.run(tensors["data"], threads, out), check), note


def _as_float(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: array.astype(np.float32) for name, array in tensors.items()}


def _close(out: np.ndarray, reference: np.ndarray) -> bool:
    scale = max(float(np.abs(reference).max()), 1.0)
    return bool(np.abs(out.astype(np.float64) - reference).max() <= 1e-5 * scale)


def _ort_missing() -> str | None:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as error:
        return f"not measured: {error.name} is not installed (pip install 'vdla[compare]')"
    return None


def _numpy_calls(workload: Workload, inputs) -> Timed:
    def check(result, references):
        return _close(result, references["fp32"]), "rtol 1e-5"
    return _im2col_conv(workload.op, _as_float(inputs)), check


def _timed_columns(workloads, targets, threads, repeats, inputs, references,
                   progress) -> list[Column]:
    """Every timed column, measured round-robin per layer.

    Each repeat calls every implementation once in turn, so a change in the
    machine's load during the run touches every column alike.
    """
    names = ((["cpu int8", "cpu fp32"] if "cpu" in targets else [])
             + ["ort fp32", *INT8_ORT, "numpy fp32"])
    missing = _ort_missing()
    columns = {name: Column(name, missing=missing if name.startswith("ort") else None)
               for name in names}
    if missing is None:
        import onnxruntime
        from vdla.bench import onnx_peers
        for name in names:
            if name.startswith("ort"):
                columns[name].note = f"onnxruntime {onnxruntime.__version__}, {threads} threads"
    columns["numpy fp32"].note = f"numpy {np.__version__} im2col + matmul, its BLAS's threads"
    for workload in workloads:
        progress(f"{workload.name}: building")
        calls: dict[str, Timed] = {}
        for name in names:
            if columns[name].missing:
                continue
            if name.startswith("cpu"):
                calls[name], columns[name].note = _cpu_calls(name.split()[1], workload, threads,
                                                             inputs[workload.name])
            elif name.startswith("ort"):
                calls[name] = onnx_peers.session(name, workload.op, inputs[workload.name],
                                                 threads)
            else:
                calls[name] = _numpy_calls(workload, inputs[workload.name])
        times: dict[str, list[float]] = {name: [] for name in calls}
        for name, (call, check) in calls.items():
            ok, what = check(call(), references[workload.name])  # also the warm-up call
            columns[name].checked[workload.name] = _check(name, workload.name, ok, what)
        # numpy's BLAS threads keep spinning after a call and would slow
        # whatever runs next, so numpy is timed after the round-robin.
        rounds = [[name for name in calls if name != "numpy fp32"]] * repeats
        rounds += [["numpy fp32"]] * repeats
        for number, names_in_round in enumerate(rounds):
            progress(f"{workload.name}: round {number + 1}/{len(rounds)}")
            for name in names_in_round:
                began = time.perf_counter()
                calls[name][0]()
                times[name].append(time.perf_counter() - began)
        for name, values in times.items():
            columns[name].seconds[workload.name] = statistics.median(values)
    return [columns[name] for name in names]


def _im2col_conv(op, tensors) -> Callable[[], np.ndarray]:
    """fp32 convolution as numpy users write it: windows, one matmul, the epilogue."""
    top, left, bottom, right = op.padding
    (sh, sw), (dh, dw), groups = op.stride, op.dilation, op.groups
    # (G, K/G, C/G * KH * KW): one matmul per group.
    weight = tensors["weight"].reshape(groups, op.out_channels // groups, -1)
    bias = tensors.get("bias")
    scale = np.float32(2.0 ** -min(op.shift, 31))

    def run() -> np.ndarray:
        padded = np.pad(tensors["data"], ((0, 0), (0, 0), (top, bottom), (left, right)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, op.extent, axis=(2, 3))
        windows = windows[:, :, ::sh, ::sw, ::dh, ::dw]  # (N, C, OH, OW, KH, KW)
        n, _, oh, ow, kh, kw = windows.shape
        columns = windows.reshape(n, groups, -1, oh, ow, kh, kw).transpose(1, 0, 3, 4, 2, 5, 6)
        acc = columns.reshape(groups, n * oh * ow, -1) @ weight.transpose(0, 2, 1)
        acc = acc.transpose(1, 0, 2).reshape(n * oh * ow, op.out_channels)
        if bias is not None:
            acc += bias
        acc *= scale
        if op.relu:
            np.maximum(acc, 0, out=acc)
        n, k = op.batch, op.out_channels
        return acc.reshape(n, op.out_height, op.out_width, k).transpose(0, 3, 1, 2)
    return run


def run_comparison(config, targets: Sequence[str] = ("accel", "cpu"),
                   clock_mhz: float | None = None, threads: int = 2, repeats: int = 20,
                   workloads: Sequence[Workload] = RESNET18, seed: int = 0,
                   progress: Callable[[str], None] | None = None) -> dict:
    """Measure every column over ``workloads`` in this process.

    Parameters
    ----------
    config : HwConfig
        The accelerator (its RTL baseline supplies the cycles).
    targets : sequence of str
        ``"accel"``, ``"cpu"`` and/or ``"gpu"``; the CPU peers (onnxruntime,
        numpy) always run, the GPU peers (PyTorch cuDNN) with ``"gpu"``.
    clock_mhz : float, optional
        The accelerator's clock (default: `accel_clock`'s choice, stated in the report).
    threads : int
        Threads of the cpu target and onnxruntime.
    repeats : int
        Timed calls per layer and implementation (median reported).

    Returns
    -------
    dict
        JSON-serialisable: machine, settings, per-layer seconds per column,
        totals (x uses), ratios, and why any column was not measured.

    Raises
    ------
    CheckError
        When any implementation's output disagrees with numpy.
    """
    from vdla.compiler.cpu.kernel import reference_fp32
    progress = progress or (lambda message: None)
    clock_mhz, clock_source = accel_clock(config, clock_mhz)
    load_at_start = _load_average()
    inputs = {w.name: _layer_inputs(w, seed) for w in workloads}
    references = {}
    for w in workloads:
        progress(f"numpy reference {w.name}")
        references[w.name] = {"int8": w.op.reference(**inputs[w.name]),
                              "fp32": reference_fp32(w.op, **_as_float(inputs[w.name])),
                              "inputs": inputs[w.name], "op": w.op}
    columns = []
    if "accel" in targets:
        progress("accel: baseline cycles, fsim check")
        columns.append(_accel_column(workloads, config, clock_mhz, inputs, references))
    columns += _timed_columns(workloads, targets, threads, repeats, inputs, references, progress)
    gpu = None
    if "gpu" in targets:
        gpu_list, gpu = gpu_columns(workloads, Column, lambda w: _layer_inputs(w, seed), _check,
                                    repeats, progress=progress)
        columns += gpu_list
    report = _report(columns, workloads, config, clock_mhz, threads, repeats, targets)
    report["clock_source"] = clock_source
    if gpu is not None:
        report["gpu"] = gpu
        report["ratios"].update(_gpu_ratios(report["columns"], workloads))
    report["machine"]["load_average_at_start"] = load_at_start
    return report


def _gpu_ratios(columns: dict, workloads) -> dict[str, float]:
    """gpu int8 total over cuDNN's best total (per layer the fastest of fp16/tf32/fp32)."""
    ratios = {}
    for suffix in ("", " b8"):
        ours = columns.get(f"gpu int8{suffix}", {}).get("total_seconds")
        peers = [columns.get(f"cudnn {p}{suffix}", {}) for p in ("fp16", "tf32", "fp32")]
        if ours is None or any(peer.get("missing") or not peer for peer in peers):
            continue
        best = sum(min(peer["seconds"][w.name] for peer in peers) * w.uses for w in workloads)
        ratios[f"gpu int8{suffix} / cudnn best{suffix}"] = ours / best
    return ratios


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _machine() -> dict:
    from vdla.compiler.cpu.build import cpu_model
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "load_average": _load_average(),
            "python": platform.python_version(), "numpy": np.__version__}


def _report(columns, workloads, config, clock_mhz, threads, repeats, targets) -> dict:
    from vdla.compiler.cpu.build import cpu_features
    totals = {c.name: c.total(workloads) for c in columns}
    measured = {name: value for name, value in totals.items() if value is not None}
    ratios = {}
    int8_peers = [measured[name] for name in INT8_ORT if name in measured]
    if "cpu int8" in measured and int8_peers:
        ratios["cpu int8 / ort best int8"] = measured["cpu int8"] / min(int8_peers)
    if "cpu int8" in measured and "ort fp32" in measured:
        ratios["cpu int8 / ort fp32"] = measured["cpu int8"] / measured["ort fp32"]
    if "cpu fp32" in measured and "ort fp32" in measured:
        ratios["cpu fp32 / ort fp32"] = measured["cpu fp32"] / measured["ort fp32"]
    if "accel" in measured and "cpu int8" in measured:
        ratios["accel / cpu int8"] = measured["accel"] / measured["cpu int8"]
    return {
        "benchmark": "resnet18 C2-C11 x uses, batch 1",
        "machine": _machine(), "cpu_features": cpu_features(),
        "config": config.name, "clock_mhz": clock_mhz, "threads": threads, "repeats": repeats,
        "targets": list(targets),
        "layers": {w.name: {"uses": w.uses, "macs": w.op.macs, "describe": w.op.describe()}
                   for w in workloads},
        "columns": {c.name: {"seconds": c.seconds, "checked": c.checked, "note": c.note,
                             "missing": c.missing, "total_seconds": totals[c.name]}
                    for c in columns},
        "ratios": ratios,
    }


def format_table(report: dict) -> list[str]:
    """The report as text lines: ms per layer per column, totals, ratios, notes."""
    columns = report["columns"]
    # GPU columns not measured get one line below, not twelve empty table columns.
    unmeasured_gpu = [name for name in GPU_COLUMNS if columns.get(name, {}).get("missing")]
    names = [name for name in COLUMNS if name in columns and name not in unmeasured_gpu]
    width = max(len(name) for name in names) + 1
    lines = [f"{report['benchmark']}; {report['machine']['cpu']}, {report['threads']} threads, "
             f"medians of {report['repeats']}; times in ms",
             "layer x uses".ljust(13) + "".join(name.rjust(width) for name in names)]
    rows = list(report["layers"]) + ["total"]
    for layer in rows:
        uses = report["layers"].get(layer, {}).get("uses")
        label = f"{layer} x{uses}" if uses else "total"
        cells = []
        for name in names:
            column = columns[name]
            value = (column["total_seconds"] if layer == "total"
                     else column["seconds"].get(layer))
            cells.append(("-" if value is None else f"{value * 1e3:.3f}").rjust(width))
        lines.append(label.ljust(13) + "".join(cells))
    for name, value in report["ratios"].items():
        lines.append(f"{name}: {value:.2f}")
    if "accel" in names:
        lines.append(f"accel clock: {report['clock_mhz']:g} MHz, "
                     f"{report.get('clock_source', 'as given')}")
    for name in names:
        column = columns[name]
        lines.append(f"{name}: " + (column["missing"] if column["missing"] else column["note"]))
    reasons = {columns[name]["missing"] for name in unmeasured_gpu}
    for reason in sorted(reasons):
        lines.append(", ".join(name for name in unmeasured_gpu
                               if columns[name]["missing"] == reason) + f": {reason}")
    return lines


def markdown_table(report: dict) -> list[str]:
    """The per-layer table as Markdown rows (ms; measured columns only)."""
    columns = {name: column for name, column in report["columns"].items()
               if not column["missing"]}
    lines = ["| layer | uses | " + " | ".join(columns) + " |",
             "|---|--:|" + "--:|" * len(columns)]
    for layer, info in report["layers"].items():
        cells = [f"{column['seconds'][layer] * 1e3:.3f}" for column in columns.values()]
        lines.append(f"| {layer} | {info['uses']} | " + " | ".join(cells) + " |")
    totals = [f"**{column['total_seconds'] * 1e3:.2f}**" for column in columns.values()]
    lines.append("| **total** (x uses) | | " + " | ".join(totals) + " |")
    return lines


def plot_comparison(report: dict, path) -> None:
    """A log-scale bar chart of ms per layer (one bar per measured column)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    columns = {name: column for name, column in report["columns"].items()
               if not column["missing"]}
    layers = list(report["layers"])
    figure, axes = plt.subplots(figsize=(max(8, len(layers) * 1.1), 4.5))
    width = 0.8 / max(len(columns), 1)
    for index, (name, column) in enumerate(columns.items()):
        positions = [i + (index - (len(columns) - 1) / 2) * width for i in range(len(layers))]
        values = [column["seconds"].get(layer, np.nan) * 1e3 for layer in layers]
        label = name + (f" @ {report['clock_mhz']:g} MHz" if name == "accel" else "")
        axes.bar(positions, values, width, label=label)
    axes.set_yscale("log")
    axes.set_xticks(range(len(layers)), layers)
    axes.set_ylabel("ms per call (log)")
    axes.set_title(f"ResNet-18 layers, batch 1: {report['machine']['cpu']}, "
                   f"{report['threads']} threads")
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
