"""Whole networks from ONNX: the digits model and ResNet-18, on every tier, against references.

Usage::

    python benchmarks/network.py [--resnet18] [--mobilenet 224|small] [--rtl] [--output FILE.json]

Digits (`benchmarks/models/digits.onnx`, trained; 360 held-out images):
compile time, int8 accuracy against float and top-1 agreement, every
intermediate tensor of all 360 images against vdla's integer reference on
fsim and the cpu target, 16 images on the ``tiny`` and ``default`` RTL with
their accelerator cycles, and onnxruntime running vdla's scales as QDQ
(`graph.export`): each node on onnxruntime's own inputs, its largest
difference and mismatch rate.

``--resnet18`` adds ResNet-18 at 1x3x224x224 (`benchmarks/models/resnet18.py`,
seeded, generated here): compile time (twice: same bytes?), fsim bit-exact
with the reference on one image, cosine of the int8 logits with the float
model's (onnxruntime fp32 where installed), the share of MACs on the
accelerator, the host repacks and copied bytes per inference (`graph.layout`) and the
DRAM arena's size against the layers' own images (`graph.arena`); with ``--rtl`` also each
accelerator layer's cycles on the ``default`` RTL.

``--mobilenet 224`` adds MobileNetV2 at 1x3x224x224 (`benchmarks/models/mobilenet.py`,
seeded, generated here; ``small``: the tests' 32 px, width 0.25 network, on
``tiny``): compile time, fsim bit-exact, cosine with the float model; with
``--rtl`` each accelerator layer's cycles against its ideal on the
``default`` RTL, and the depthwise layers' total utilisation.

Digits and ResNet-18 get end-to-end latencies, each implementation timed in its own block:
vdla's whole network on the CPU, onnxruntime fp32 and its own int8, and vdla
with the accelerator (projected at the clock); and a time breakdown per kind
of work, all on the CPU (generated C, one thread, and numpy) against CPU +
accelerator (RTL cycles at 100 MHz, the
ECPIX-5 board's clock; the host work is the same in both bars):
``network_digits.png`` (and ``network_resnet18.png`` with ``--rtl``).

Prints the figures and writes ``benchmarks/results/network.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "benchmarks" / "models"
RESULTS = ROOT / "benchmarks" / "results"
# The clock accelerator cycles are shown at: the ECPIX-5 board's (README).
CLOCK_MHZ = 100.0

from vdla.frontend.onnx import load  # noqa: E402
from vdla.bench.breakdown import breakdown, end_to_end, plot_breakdown  # noqa: E402
from vdla.bench.onnx_quantize import node_differences  # noqa: E402
from vdla.graph.kernels import execute  # noqa: E402
from vdla.graph.network import compile_network  # noqa: E402
from vdla.graph.network_file import dumps  # noqa: E402
from vdla.graph.placement import LAYER_OPS, layer_op  # noqa: E402
from vdla.hw.config import PRESETS  # noqa: E402


def bit_exact(network, images, **options) -> tuple[bool, object]:
    """Whether every tensor of a run equals the integer reference; and the run."""
    name = network.graph.inputs[0]
    reference = execute(network.graph, {name: images}, keep=True)
    result = network.run({name: images}, keep=True, **options)
    return all(np.array_equal(a, reference[t]) for t, a in result.tensors.items()), result


def macs(network) -> dict[str, int]:
    """Multiply-accumulates per place (accel, cpu)."""
    totals = {"accel": 0, "cpu": 0}
    for node in network.graph.nodes:
        if node.op in LAYER_OPS:
            totals[network.placement[node.name]] += layer_op(network.graph, node).macs
    return totals


def onnxruntime_per_node(integer, images) -> dict[str, dict[str, float]] | str:
    """Per int8 node: the largest difference and mismatch rate of onnxruntime's QDQ run."""
    try:
        import onnx
        import onnxruntime as ort
    except ImportError:
        return "not measured (pip install onnxruntime: a dependency of vdla)"
    from vdla.graph.export import to_qdq
    model = to_qdq(integer)
    computed = [n for n, t in integer.tensors.items() if t.dtype == np.int8 and not t.constant]
    for name in computed:
        model.graph.output.append(onnx.helper.make_tensor_value_info(
            name, onnx.TensorProto.INT8, list(integer.tensors[name].shape)))
    session = ort.InferenceSession(model.SerializeToString())
    name = integer.inputs[0]
    theirs = dict(zip([o.name for o in session.get_outputs()], session.run(None, {name: images})))
    return node_differences(integer, {name: images}, theirs)


def digits_figures() -> dict:
    data = np.load(MODELS / "digits_data.npz")
    graph = load(MODELS / "digits.onnx", batch=360)
    began = time.perf_counter()
    network = compile_network(graph, PRESETS["default"], {"input": data["calibration"]})
    figures = {"compile_seconds": round(time.perf_counter() - began, 3)}
    exact, result = bit_exact(network, data["images"], sim="fsim")
    logits = result.outputs["logits"]
    figures.update(
        fsim_bit_exact_360=exact,
        cpu_bit_exact_360=bit_exact(network, data["images"], target="cpu")[0],
        float_accuracy=float(data["float_accuracy"]),
        int8_accuracy=float((logits.argmax(1) == data["labels"]).mean()),
        top1_agreement=float((logits.argmax(1) == data["float_logits"].argmax(1)).mean()),
        placement={p: sum(v == p for v in network.placement.values())
                   for p in ("accel", "cpu", "host")})
    batch16 = {}
    for config in ("tiny", "default"):
        small = batch16[config] = compile_network(load(MODELS / "digits.onnx", batch=16),
                                                  PRESETS[config],
                                                  {"input": data["calibration"]})
        exact, result = bit_exact(small, data["images"][:16], sim="rtl")
        figures[f"rtl_{config}_16"] = {
            "bit_exact": exact, "accel_cycles": result.accel_cycles,
            "layers": {r["name"]: r["cycles"] for r in result.layers if r["place"] == "accel"}}
    figures["onnxruntime_qdq_per_node"] = onnxruntime_per_node(network.graph, data["images"])
    figures["breakdown_16_ms"] = breakdown(batch16["default"], data["images"][:16],
                                           figures["rtl_default_16"]["layers"], CLOCK_MHZ)
    plot_breakdown(figures["breakdown_16_ms"], f"digits, batch 16, accelerator at {CLOCK_MHZ:g} "
                   "MHz", RESULTS / "network_digits.png")
    figures["end_to_end_batch16"] = end_to_end(
        batch16["default"], MODELS / "digits.onnx", data["images"][:16], data["calibration"],
        sum(figures["breakdown_16_ms"]["cpu + accelerator"].values()))
    return figures


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def resnet18_figures(rtl: bool) -> dict:
    sys.path.insert(0, str(MODELS))
    from resnet18 import build_resnet18, random_images
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "resnet18.onnx"
        build_resnet18(path)
        graph = load(path)
        float_logits = _float_logits(path, graph, random_images(1, seed=7))
    calibration = {"input": random_images(8, seed=1)}
    times, files = [], []
    for _ in range(2):
        began = time.perf_counter()
        network = compile_network(graph, PRESETS["default"], calibration)
        times.append(round(time.perf_counter() - began, 2))
        files.append(dumps(network))
    image = random_images(1, seed=7)
    figures = {"compile_seconds": times, "deterministic": files[0] == files[1],
               "file_bytes": len(files[0]), **fsim_figures(network, image, float_logits)}
    if rtl:
        exact, result = bit_exact(network, image, sim="rtl")
        figures["rtl_default"] = {
            "bit_exact": exact, "accel_cycles": result.accel_cycles,
            "layers": {r["name"]: r["cycles"] for r in result.layers if r["place"] == "accel"}}
        figures["against_alone"] = layers_against_alone(network,
                                                        figures["rtl_default"]["layers"])
        figures["breakdown_ms"] = breakdown(network, image, figures["rtl_default"]["layers"],
                                            CLOCK_MHZ)
        plot_breakdown(figures["breakdown_ms"], f"ResNet-18, batch 1, accelerator at "
                       f"{CLOCK_MHZ:g} MHz", RESULTS / "network_resnet18.png")
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "resnet18.onnx"
            build_resnet18(path)
            figures["end_to_end"] = end_to_end(
                network, path, image, calibration["input"],
                sum(figures["breakdown_ms"]["cpu + accelerator"].values()))
    return figures


def fsim_figures(network, image: np.ndarray, float_logits: np.ndarray) -> dict:
    """fsim against the reference, the int8 logits against the float ones, MACs per place."""
    exact, result = bit_exact(network, image, sim="fsim")
    logits = result.outputs[network.graph.outputs[0]]
    shares = macs(network)
    return {"fsim_bit_exact": exact, "cosine_vs_float": cosine(logits, float_logits),
            "top1_equal": bool(logits.argmax() == float_logits.argmax()),
            "macs": shares, "accel_mac_share": shares["accel"] / sum(shares.values()),
            "host_repacks_per_inference": result.repacks,
            "host_copied_bytes_per_inference": result.copied_bytes,
            "arena_bytes": network.arena().size,
            "layer_images_bytes": network.arena().images_bytes}


def mobilenet_figures(small: bool, rtl: bool) -> dict:
    """MobileNetV2 (`benchmarks/models/mobilenet.py`): fsim, cosine, and per node on the RTL.

    The 224 px network (``small=False``) on ``default``, or the tests' 32 px
    one on ``tiny``; each accelerator layer's cycles, ideal cycles and GEMM
    utilisation (useful MACs: a depthwise layer's are a ``1/block_in`` share
    of what its GEMMs multiply), the depthwise layers' totals, the time per
    kind of work (`breakdown`) and end-to-end latencies against onnxruntime
    fp32 and int8 (`end_to_end`).
    """
    sys.path.insert(0, str(MODELS))
    from vdla.bench.layer_run import ideal_cycles
    from mobilenet import MOBILENET_V2, SMALL, build_mobilenet, random_images
    shape, config = (SMALL, PRESETS["tiny"]) if small else (MOBILENET_V2, PRESETS["default"])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mobilenet.onnx"
        build_mobilenet(path, shape=shape)
        graph = load(path)
        image = random_images(1, seed=7, size=shape.size)
        float_logits = _float_logits(path, graph, image)
    began = time.perf_counter()
    network = compile_network(graph, config, {"input": random_images(8, 1, shape.size)})
    # (the same 8 images calibrate onnxruntime's own int8 in end_to_end)
    figures = {"input": [1, 3, shape.size, shape.size], "width": shape.width,
               "config": config.name, "compile_seconds": round(time.perf_counter() - began, 2),
               **fsim_figures(network, image, float_logits)}
    if not rtl:
        return figures
    exact, result = bit_exact(network, image, sim="rtl")
    rows, depthwise = {}, {"layers": 0, "cycles": 0, "ideal": 0}
    for row in result.layers:
        if row["place"] != "accel":
            continue
        op = layer_op(network.graph, network.graph.node(row["name"]))
        ideal = ideal_cycles(op, config)
        kind = ("depthwise" if getattr(op, "groups", 1) > 1 else
                "dense" if op.kind == "dense" else f"conv {op.kernel[0]}x{op.kernel[1]}")
        rows[row["name"]] = {"kind": kind, "cycles": row["cycles"], "ideal": ideal,
                             "gemm_utilization": round(ideal / row["cycles"], 4)}
        if kind == "depthwise":
            depthwise = {"layers": depthwise["layers"] + 1,
                         "cycles": depthwise["cycles"] + row["cycles"],
                         "ideal": depthwise["ideal"] + ideal}
    depthwise["gemm_utilization"] = round(depthwise["ideal"] / max(depthwise["cycles"], 1), 4)
    total_ideal = sum(r["ideal"] for r in rows.values())
    figures["rtl"] = {"bit_exact": exact, "accel_cycles": result.accel_cycles,
                      "gemm_utilization": round(total_ideal / result.accel_cycles, 4),
                      "depthwise": depthwise, "layers": rows}
    figures["breakdown_ms"] = breakdown(
        network, image, {name: row["cycles"] for name, row in rows.items()}, CLOCK_MHZ)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mobilenet.onnx"
        build_mobilenet(path, shape=shape)
        figures["end_to_end"] = end_to_end(
            network, path, image, random_images(8, 1, shape.size),
            sum(figures["breakdown_ms"]["cpu + accelerator"].values()))
    return figures


def layers_against_alone(network, cycles: dict[str, int]) -> dict:
    """Each accelerator layer inside the network against the same layer measured alone.

    Layers of ResNet-18's C2-C11 shapes (`compiler.workloads.RESNET18`) are
    compared with the committed cycle baseline of the config
    (`bench/baselines`), and their GEMM utilisation (useful MACs over cycles
    times the MACs per cycle) is given with its geometric mean.
    """
    import math
    from vdla.bench.baseline import baseline_path, load_baseline
    from vdla.bench.layer_run import ideal_cycles
    from vdla.compiler.workloads import RESNET18
    baseline = load_baseline(baseline_path(network.config))["layers"]
    rows, network_total, alone_total = {}, 0, 0
    for node in network.graph.nodes:
        if node.name not in cycles:
            continue
        op = layer_op(network.graph, node)
        shape = (op.in_channels, op.out_channels, op.height, op.kernel, op.stride) \
            if op.kind == "conv2d" else None
        name = next((w.name for w in RESNET18 if shape == (
            w.op.in_channels, w.op.out_channels, w.op.height, w.op.kernel, w.op.stride)), None)
        row = {"workload": name, "cycles": cycles[node.name],
               "gemm_utilization": ideal_cycles(op, network.config) / cycles[node.name]}
        if name in baseline:
            row["alone_cycles"] = baseline[name]["cycles"]
            network_total += cycles[node.name]
            alone_total += baseline[name]["cycles"]
        rows[node.name] = row
    named = [row["gemm_utilization"] for row in rows.values() if row["workload"]]
    return {"layers": rows,
            "c2_c11_network_over_alone": network_total / alone_total if alone_total else None,
            "c2_c11_geomean_utilization": math.exp(sum(map(math.log, named)) / len(named))
            if named else None}


def _float_logits(path: Path, graph, image: np.ndarray) -> np.ndarray:
    """onnxruntime fp32's logits where installed, else vdla's float execution."""
    try:
        import onnxruntime as ort
    except ImportError:
        return execute(graph, {"input": image})[graph.outputs[0]]
    return ort.InferenceSession(str(path)).run(None, {"input": image})[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resnet18", action="store_true", help="also ResNet-18 (minutes)")
    parser.add_argument("--mobilenet", choices=("224", "small"),
                        help="also MobileNetV2 at 224 px (default RTL) or the tests' 32 px "
                             "(tiny RTL)")
    parser.add_argument("--rtl", action="store_true",
                        help="ResNet-18 and MobileNet on the RTL too")
    parser.add_argument("--output", default=str(RESULTS / "network.json"))
    args = parser.parse_args()
    results = {"machine": platform.processor() or platform.machine(),
               "digits": digits_figures()}
    if args.resnet18:
        results["resnet18"] = resnet18_figures(args.rtl)
    if args.mobilenet:
        results["mobilenet"] = mobilenet_figures(args.mobilenet == "small", args.rtl)
    print(json.dumps(results, indent=1))
    Path(args.output).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
