"""Stem packing (`graph.passes.stem`): the stems of ResNet-18 and MobileNetV2 before and after.

Usage::

    python benchmarks/stem.py [--rtl] [--output FILE.json]

For ResNet-18 and MobileNetV2 at 1x3x224x224 (`benchmarks/models/`, seeded,
generated here), compiled whole for ``default`` with and without the pass:
each stem layer's estimated cycles (`compiler.accel.cost.estimate_cost` of
its compiled schedule, as `graph.network` records them) and the whole
network's (the sum over its accelerator layers); the host's im2col time and
the bytes it writes per inference; fsim bit-exact with the unpacked network's
integer reference (every tensor both compute) on one image. ``--rtl`` also runs each stem layer alone on
the ``default`` RTL (Verilator) in both forms, on the same random image
(packed: its im2col patches and the reshaped weight), checks the outputs
equal and records the cycles.

Prints the figures and writes ``benchmarks/results/stem.json``.
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

from vdla.frontend.onnx import load  # noqa: E402
from vdla.graph import network as network_module  # noqa: E402
from vdla.graph.kernels import execute  # noqa: E402
from vdla.graph.network import compile_network  # noqa: E402
from vdla.graph.ops.im2col import im2col  # noqa: E402
from vdla.graph.placement import layer_op  # noqa: E402
from vdla.hw.config import PRESETS  # noqa: E402

CONFIG = "default"


def _models(folder: Path) -> dict[str, tuple[Path, object]]:
    """ResNet-18 and MobileNetV2 written to ``folder``, each with its image sampler."""
    sys.path.insert(0, str(MODELS))
    from mobilenet import build_mobilenet
    from resnet18 import build_resnet18, random_images
    build_resnet18(folder / "resnet18.onnx")
    build_mobilenet(folder / "mobilenet_v2.onnx")
    return {"resnet18": folder / "resnet18.onnx", "mobilenet_v2": folder / "mobilenet_v2.onnx"}, \
        random_images


def _compile(graph, calibration, packed: bool):
    """The network compiled with the target pipeline as declared, or with none."""
    pipeline = network_module.TARGET_PIPELINE
    if not packed:
        network_module.TARGET_PIPELINE = []
    try:
        began = time.perf_counter()
        network = compile_network(graph, PRESETS[CONFIG], calibration)
        return network, time.perf_counter() - began
    finally:
        network_module.TARGET_PIPELINE = pipeline


def _stem(graph) -> str:
    """The first layer (the stem) of an integer graph."""
    return next(node.name for node in graph.nodes if node.op == "qconv")


def network_figures(path: Path, random_images) -> tuple[dict, dict]:
    """One model's figures, and what the RTL run of its stem needs."""
    graph = load(path)
    calibration = {"input": random_images(8, seed=1)}
    image = random_images(1, seed=7)
    packed, packed_seconds = _compile(graph, calibration, True)
    plain, plain_seconds = _compile(graph, calibration, False)
    stem = _stem(plain.graph)
    im2col_node = packed.graph.node(f"{stem}/im2col")
    estimates = {form: net.metadata["estimated_cycles"] for form, net in
                 (("unpacked", plain), ("packed", packed))}
    result = packed.run({"input": image}, sim="fsim", keep=True)
    reference = execute(plain.graph, {"input": image}, keep=True)
    exact = all(np.array_equal(result.tensors[name], reference[name])
                for name in reference if name in result.tensors)
    seconds = {row["name"]: row["seconds"] for row in result.layers}
    figures = {
        "stem": stem,
        "stem_layer": {form: layer_op(net.graph, net.graph.node(stem)).describe()
                       for form, net in (("unpacked", plain), ("packed", packed))},
        "stem_estimated_cycles": {form: cycles[stem] for form, cycles in estimates.items()},
        "network_estimated_cycles": {form: sum(cycles.values())
                                     for form, cycles in estimates.items()},
        "im2col_host_ms": round(seconds[im2col_node.name] * 1e3, 3),
        "host_copied_bytes": {"packed": result.copied_bytes,
                              "unpacked": plain.run({"input": image}, sim="fsim").copied_bytes},
        "fsim_bit_exact_with_unpacked_reference": bool(exact),
        "tensors_compared": sum(name in result.tensors for name in reference),
        "compile_seconds": {"unpacked": round(plain_seconds, 1),
                            "packed": round(packed_seconds, 1)},
    }
    integer = plain.graph
    x = integer.tensors[integer.node(stem).inputs[0]]
    rng = np.random.default_rng(3)
    data = rng.integers(-128, 128, x.shape).astype(np.int8)
    node = plain.graph.node(stem)
    needs = {"unpacked": (layer_op(plain.graph, node), data, node),
             "packed": (layer_op(packed.graph, packed.graph.node(stem)),
                        im2col(data, im2col_node.attrs["kernel"], im2col_node.attrs["stride"],
                               im2col_node.attrs["pads"], im2col_node.attrs["dilation"]),
                        packed.graph.node(stem))}
    return figures, {"needs": needs, "plain": plain, "packed": packed}


def rtl_figures(run) -> dict:
    """The stem alone on the RTL in both forms: cycles, and whether the outputs agree."""
    from vdla.compiler.accel.driver import compile_op
    from vdla.runtime.runner import AccelRunner
    runner = AccelRunner(PRESETS[CONFIG], "rtl")
    outputs, figures = {}, {}
    for form, (op, data, node) in run["needs"].items():
        network = run[form if form == "packed" else "plain"]
        inputs = {"data": data, "weight": network.graph.value(node.inputs[1]),
                  "bias": network.graph.value(node.inputs[2])}
        began = time.perf_counter()
        result = runner.run(compile_op(op, PRESETS[CONFIG]), inputs)
        outputs[form] = result.outputs["out"]
        figures[f"{form}_cycles"] = int(result.cycles)
        figures[f"{form}_seconds"] = round(time.perf_counter() - began, 1)
    figures["bit_exact"] = bool(np.array_equal(outputs["packed"], outputs["unpacked"]))
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rtl", action="store_true", help="also each stem alone on the RTL")
    parser.add_argument("--output", type=Path, default=RESULTS / "stem.json")
    args = parser.parse_args(argv)
    report = {"benchmark": "stem", "config": CONFIG, "machine": platform.node(),
              "measured_at": time.strftime("%Y-%m-%d")}
    failed = False
    with tempfile.TemporaryDirectory() as folder:
        paths, random_images = _models(Path(folder))
        for name, path in paths.items():
            figures, run = network_figures(path, random_images)
            if args.rtl:
                figures["rtl_stem_alone"] = rtl_figures(run)
                failed |= not figures["rtl_stem_alone"]["bit_exact"]
            failed |= not figures["fsim_bit_exact_with_unpacked_reference"]
            report[name] = figures
            print(name, json.dumps(figures, indent=1))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.output}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
