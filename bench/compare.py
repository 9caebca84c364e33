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
  with the same threads (``onnxruntime`` and ``onnx`` are dependencies of
  vdla; where one is missing, "not measured");
- ``numpy fp32``: im2col and one matmul (numpy's BLAS, its own threads);
- with target ``gpu``: the gpu target and PyTorch cuDNN on the CUDA device,
  at batch 1 and 8 (`bench.gpu_compare`), or "not measured (no CUDA device)".

Each timed implementation is measured in blocks of its own (`bench.timing`):
per layer, ``repeats`` rounds, each running every implementation's block
(``warmup`` untimed calls, then ``calls`` timed calls) once, in a random
order drawn from ``seed``; its first call, before any block, is checked
against numpy. A layer's time is the median of all its timed calls, with
the 10th-90th percentiles; a total (x uses) is the sum of the layer medians,
its spread the lowest and highest of the round totals (round r's total adds
each layer's r-th block median). Ratios come from the median totals, their
ranges from the round totals of the same round. numpy's blocks run after the
others': its BLAS threads spin on after each call and would slow the next
block. onnxruntime runs twice: in its default thread pool (``ort ...``, idle
threads spin for the next job) and with ``session.intra_op.allow_spinning=0``
(``ort ... nospin``); the cpu target's idle threads sleep after ~50 us
(`compiler.cpu` ``pool.c``). Spinning wins alone and loses when other
processes share the cores, so both are reported.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import random
from typing import Callable, Sequence

import numpy as np

from vdla.bench.gpu_compare import GPU_COLUMNS, gpu_columns
from vdla.bench import onnx_peers
from vdla.bench.onnx_peers import PEERS as ORT_PEERS
from vdla.bench.timing import Summary, run_blocks, summarise
from vdla.compiler.workloads import RESNET18, Workload
from vdla.errors import VdlaError

__all__ = ["Column", "CheckError", "run_comparison", "timed_names", "ratios_of", "format_table",
           "markdown_table", "plot_comparison", "COLUMNS", "TIMED", "INT8_ORT", "NOSPIN",
           "DEFAULT_CLOCK_MHZ", "accel_clock"]

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
# The suffix of onnxruntime's columns with its intra-op spinning off.
NOSPIN = " nospin"
# The implementations timed on this CPU, in the tables' order.
TIMED = ("cpu int8", "cpu fp32", *ORT_PEERS, *(peer + NOSPIN for peer in ORT_PEERS),
         "numpy fp32")
COLUMNS = ("accel", *TIMED) + GPU_COLUMNS
INT8_ORT = ("ort qlinear u8", "ort qlinear s8", "ort convinteger")


@dataclasses.dataclass
class Column:
    """One implementation's seconds per layer (medians), or why it was not measured.

    ``timings`` holds, per layer, the `bench.timing.Summary` of its blocks
    (empty for the accelerator's computed cycles and the GPU's event times).
    """

    name: str
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    checked: dict[str, str] = dataclasses.field(default_factory=dict)
    note: str = ""
    missing: str | None = None
    timings: dict[str, Summary] = dataclasses.field(default_factory=dict)

    def total(self, workloads: Sequence[Workload]) -> float | None:
        if self.missing or any(w.name not in self.seconds for w in workloads):
            return None
        return sum(self.seconds[w.name] * w.uses for w in workloads)

    def round_totals(self, workloads: Sequence[Workload]) -> list[float] | None:
        """Round r's total: each layer's r-th block median x uses, summed."""
        if self.missing or any(w.name not in self.timings for w in workloads):
            return None
        blocks = [self.timings[w.name].block_medians for w in workloads]
        return [sum(medians[r] * w.uses for medians, w in zip(blocks, workloads))
                for r in range(min(map(len, blocks)))]


class CheckError(VdlaError):
    """An implementation's output disagrees with the numpy reference."""


def _check(name: str, layer: str, ok: bool, what: str) -> str:
    if not ok:
        raise CheckError(f"{name} on {layer}: output differs from numpy ({what})")
    return what


def _layer_inputs(workload: Workload, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, int(workload.name[1:])])
    return workload.op.random_inputs(rng)


def _accel_column(workloads, config, clock_mhz, inputs, references, progress) -> Column:
    from vdla.bench.baseline import baseline_path, load_baseline
    from vdla.compiler import compile_op
    from vdla.runtime.runner import AccelRunner
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
    device = AccelRunner(config, sim="fsim")
    for workload in workloads:
        progress(f"accel: {workload.name} on fsim")
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


def _ort_version() -> tuple[str | None, str | None]:
    """onnxruntime's version, or why its columns are not measured."""
    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError as error:
        return None, (f"not measured: {error.name} is not installed (a dependency of vdla: "
                      f"pip install {error.name})")
    return onnxruntime.__version__, None


def _numpy_calls(workload: Workload, inputs) -> Timed:
    def check(result, references):
        return _close(result, references["fp32"]), "rtol 1e-5"
    return _im2col_conv(workload.op, _as_float(inputs)), check


def timed_names(targets: Sequence[str], only: Sequence[str] | None = None) -> list[str]:
    """The implementations timed on this CPU for ``targets``, all or those in ``only``.

    Raises
    ------
    ValueError
        When ``only`` is empty, names an unknown implementation, or a cpu
        target column without ``"cpu"`` in ``targets``.
    """
    names = [name for name in TIMED if "cpu" in targets or not name.startswith("cpu ")]
    if only is None:
        return names
    if not only:
        raise ValueError("no implementation named")
    for name in only:
        if name not in TIMED:
            raise ValueError(f"unknown implementation {name!r} (known: {', '.join(TIMED)})")
        if name not in names:
            raise ValueError(f"implementation {name!r} needs target cpu")
    return [name for name in names if name in only]


def _timed_columns(workloads, names, threads, timing, inputs, references,
                   progress) -> list[Column]:
    """The columns ``names``, each layer's implementations timed in blocks (`bench.timing`).

    ``timing`` is ``(warmup, calls, repeats, order)`` of `run_blocks`.
    """
    version, missing = _ort_version()
    columns = {name: Column(name, missing=missing if name.startswith("ort") else None)
               for name in names}
    for name in names:
        if name.startswith("ort"):
            spinning = "off" if name.endswith(NOSPIN) else "on (onnxruntime's default)"
            columns[name].note = (f"onnxruntime {version}, {threads} threads, "
                                  f"intra-op spinning {spinning}")
    if "numpy fp32" in columns:
        columns["numpy fp32"].note = f"numpy {np.__version__} im2col + matmul, its BLAS's threads"
    warmup, calls_per_block, repeats, order = timing
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
                calls[name] = onnx_peers.session(name.removesuffix(NOSPIN), workload.op,
                                                 inputs[workload.name], threads,
                                                 spinning=not name.endswith(NOSPIN))
            else:
                calls[name] = _numpy_calls(workload, inputs[workload.name])
        for name, (call, check) in calls.items():
            ok, what = check(call(), references[workload.name])
            columns[name].checked[workload.name] = _check(name, workload.name, ok, what)
        # numpy's BLAS threads keep spinning after a call and would slow the
        # block after numpy's, so numpy's blocks come after the others'.
        groups = [[name for name in calls if name != "numpy fp32"],
                  [name for name in calls if name == "numpy fp32"]]
        for group in filter(None, groups):
            blocks = run_blocks({name: calls[name][0] for name in group}, warmup,
                                calls_per_block, repeats, order,
                                lambda message, name=workload.name: progress(f"{name}: {message}"))
            for name, seconds in blocks.items():
                summary = summarise(seconds)
                columns[name].timings[workload.name] = summary
                columns[name].seconds[workload.name] = summary.median
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
                   clock_mhz: float | None = None, threads: int = 2, repeats: int = 5,
                   workloads: Sequence[Workload] = RESNET18, seed: int = 0,
                   progress: Callable[[str], None] | None = None, calls: int = 10,
                   warmup: int = 2, only: Sequence[str] | None = None) -> dict:
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
        Rounds: how many blocks of each CPU implementation run per layer (and
        the GPU columns' event-timed samples per layer).
    seed : int
        Seeds the layers' inputs and the blocks' order.
    progress : callable, optional
        Called with a line of what runs now: ``numpy reference C2``, ``accel: C2
        on fsim``, then, timing each layer in turn, lines that begin with the
        layer's name and a colon (``C2: building``, ``C2: round 1/5: cpu int8``).
    calls, warmup : int
        Timed and untimed calls of each block.
    only : sequence of str, optional
        Time only these implementations (names in `TIMED`; `timed_names`).

    Returns
    -------
    dict
        JSON-serialisable: machine, settings, per-layer seconds (medians)
        and spread per column, totals (x uses) with the round totals,
        ratios with their ranges, and why any column was not measured.

    Raises
    ------
    CheckError
        When any implementation's output disagrees with numpy.
    ValueError
        When ``only`` names an implementation not measured here (`timed_names`).
    """
    from vdla.compiler.cpu.kernel import reference_fp32
    names = timed_names(targets, only)
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
        columns.append(_accel_column(workloads, config, clock_mhz, inputs, references, progress))
    timing = (warmup, calls, repeats, random.Random(seed))
    columns += _timed_columns(workloads, names, threads, timing, inputs, references, progress)
    gpu = None
    if "gpu" in targets:
        gpu_list, gpu = gpu_columns(workloads, Column, lambda w: _layer_inputs(w, seed), _check,
                                    repeats, progress=progress)
        columns += gpu_list
    settings = {"threads": threads, "repeats": repeats, "calls": calls, "warmup": warmup,
                "seed": seed, "targets": list(targets)}
    report = _report(columns, workloads, config, clock_mhz, settings)
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


def ratios_of(totals: dict[str, float]) -> dict[str, float]:
    """The cpu/onnxruntime (and accel/cpu) ratios of ``totals`` (column name to its
    total seconds), those whose columns are present."""
    ratios = {}
    for suffix in ("", NOSPIN):
        int8_peers = [totals[name + suffix] for name in INT8_ORT if name + suffix in totals]
        fp32_peer = totals.get("ort fp32" + suffix)
        if "cpu int8" in totals and int8_peers:
            ratios[f"cpu int8 / ort best int8{suffix}"] = totals["cpu int8"] / min(int8_peers)
        if "cpu int8" in totals and fp32_peer:
            ratios[f"cpu int8 / ort fp32{suffix}"] = totals["cpu int8"] / fp32_peer
        if "cpu fp32" in totals and fp32_peer:
            ratios[f"cpu fp32 / ort fp32{suffix}"] = totals["cpu fp32"] / fp32_peer
    if "accel" in totals and "cpu int8" in totals:
        ratios["accel / cpu int8"] = totals["accel"] / totals["cpu int8"]
    return ratios


def _ratio_ranges(columns, totals: dict[str, float], workloads) -> dict[str, list[float]]:
    """Each ratio's lowest and highest over the rounds (round r's totals against
    each other; a column without rounds, the accelerator's, keeps its total)."""
    rounds = {c.name: c.round_totals(workloads) for c in columns}
    counts = {len(values) for values in rounds.values() if values}
    if len(counts) != 1:
        return {}
    per_round = [ratios_of({name: rounds[name][r] if rounds[name] else total
                          for name, total in totals.items()})
                 for r in range(counts.pop())]
    return {name: [min(ratios[name] for ratios in per_round),
                   max(ratios[name] for ratios in per_round)] for name in per_round[0]}


def _report(columns, workloads, config, clock_mhz, settings) -> dict:
    from vdla.compiler.cpu.build import cpu_features
    totals = {c.name: c.total(workloads) for c in columns}
    measured = {name: value for name, value in totals.items() if value is not None}

    def timings(column, field):
        return {layer: getattr(summary, field) for layer, summary in column.timings.items()}
    return {
        "benchmark": "resnet18 C2-C11 x uses, batch 1",
        "machine": _machine(), "cpu_features": cpu_features(),
        "config": config.name, "clock_mhz": clock_mhz, **settings,
        "method": "blocks",
        "layers": {w.name: {"uses": w.uses, "macs": w.op.macs, "describe": w.op.describe()}
                   for w in workloads},
        "columns": {c.name: {"seconds": c.seconds, "checked": c.checked, "note": c.note,
                             "missing": c.missing, "total_seconds": totals[c.name],
                             "p10_seconds": timings(c, "p10"), "p90_seconds": timings(c, "p90"),
                             "block_medians": timings(c, "block_medians"),
                             "round_totals": c.round_totals(workloads)}
                    for c in columns},
        "ratios": ratios_of(measured),
        "ratio_ranges": _ratio_ranges(columns, measured, workloads),
    }


def _method(report: dict) -> str:
    return (f"medians of {report['repeats']} rounds x {report['calls']} calls (each "
            f"implementation alone in a block after {report['warmup']} warm-up calls, "
            f"blocks in random order, seed {report['seed']})")


def format_table(report: dict) -> list[str]:
    """The report as text lines: a row of ms per layer per implementation, with the
    total and the lowest-highest round total; the ratios with their ranges; notes."""
    columns = report["columns"]
    # GPU columns not measured get one line below, not twelve empty rows.
    unmeasured_gpu = [name for name in GPU_COLUMNS if columns.get(name, {}).get("missing")]
    names = [name for name in COLUMNS if name in columns and name not in unmeasured_gpu]
    labels = [f"{layer} x{info['uses']}" for layer, info in report["layers"].items()]
    width = max(len(label) for label in [*labels, "12.345"]) + 2
    first = max(len(name) for name in [*names, "implementation"])
    lines = [f"{report['benchmark']}; {report['machine']['cpu']}, {report['threads']} threads; "
             f"ms per call, {_method(report)}",
             "implementation".ljust(first) + "".join(label.rjust(width) for label in labels)
             + "total".rjust(10) + "  rounds' totals"]
    for name in names:
        column = columns[name]
        cells = [("-" if layer not in column["seconds"]
                  else f"{column['seconds'][layer] * 1e3:.3f}").rjust(width)
                 for layer in report["layers"]]
        total = column["total_seconds"]
        rounds = column.get("round_totals")
        lines.append(name.ljust(first) + "".join(cells)
                     + ("-" if total is None else f"{total * 1e3:.2f}").rjust(10)
                     + (f"  {min(rounds) * 1e3:.2f}-{max(rounds) * 1e3:.2f}" if rounds else ""))
    ranges = report.get("ratio_ranges", {})
    for name, value in report["ratios"].items():
        spread = (f" ({ranges[name][0]:.2f}-{ranges[name][1]:.2f} over the rounds)"
                  if name in ranges else "")
        lines.append(f"{name}: {value:.2f}{spread}")
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
    """The per-layer table as Markdown rows (ms, medians; measured columns only), the
    totals and the round totals' range."""
    columns = {name: column for name, column in report["columns"].items()
               if not column["missing"]}
    lines = ["| layer | uses | " + " | ".join(columns) + " |",
             "|---|--:|" + "--:|" * len(columns)]
    for layer, info in report["layers"].items():
        cells = [f"{column['seconds'][layer] * 1e3:.3f}" for column in columns.values()]
        lines.append(f"| {layer} | {info['uses']} | " + " | ".join(cells) + " |")
    totals = [f"**{column['total_seconds'] * 1e3:.2f}**" for column in columns.values()]
    lines.append("| **total** (x uses) | | " + " | ".join(totals) + " |")
    rounds = [column.get("round_totals") for column in columns.values()]
    if any(rounds):
        cells = [f"{min(values) * 1e3:.2f}–{max(values) * 1e3:.2f}" if values else ""
                 for values in rounds]
        lines.append("| rounds' totals, lowest–highest | | " + " | ".join(cells) + " |")
    return lines


def plot_comparison(report: dict, path) -> None:
    """A log-scale bar chart of ms per layer (one bar per measured column, the median;
    a whisker from the 10th to the 90th percentile where the column was timed)."""
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
        values = np.array([column["seconds"].get(layer, np.nan) * 1e3 for layer in layers])
        label = name + (f" @ {report['clock_mhz']:g} MHz" if name == "accel" else "")
        low, high = (column.get(f"{field}_seconds") or {} for field in ("p10", "p90"))
        whiskers = None
        if low:
            whiskers = [values - [low[layer] * 1e3 for layer in layers],
                        [high[layer] * 1e3 for layer in layers] - values]
        axes.bar(positions, values, width, label=label, yerr=whiskers,
                 color=plt.get_cmap("tab20")(index % 20),
                 error_kw={"elinewidth": 0.6, "capsize": 0})
    axes.set_yscale("log")
    axes.set_xticks(range(len(layers)), layers)
    axes.set_ylabel("ms per call (log)")
    axes.set_title(f"ResNet-18 layers, batch 1: {report['machine']['cpu']}, "
                   f"{report['threads']} threads")
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
