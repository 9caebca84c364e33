"""The residual add fused into its conv's epilogue (issue 22): ResNet-18 and digits, before/after.

Usage::

    python benchmarks/residual_fusion.py [--no-rtl] [--output FILE.json]

ResNet-18 (`benchmarks/models/resnet18.py`, 1x3x224x224, seeded, calibrated on
8 random images; one image) compiled at ``default`` twice: with the residual
adds on the host (``fuse_residuals=False``, before) and fused into the conv
that produces one operand (`graph.passes.residual`, after). For each: the
nodes left on the host, the bytes the host copies into DRAM per inference
(`NetworkResult.copied_bytes`), fsim and (unless ``--no-rtl``) RTL
bit-exact with vdla's integer reference, the accelerator's cycles on the RTL
and per fused layer against its estimate (`compiler.accel.cost`), and the cosine
of the int8 logits with onnxruntime fp32's. Digits (360 held-out images):
int8 accuracy and top-1 agreement with float, fsim and cpu bit-exact, before
and after.

Prints the figures and writes ``benchmarks/results/residual_fusion.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "benchmarks" / "models"
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(MODELS))

from network import _float_logits, bit_exact, cosine  # noqa: E402

from vdla.compiler.accel.cost import estimate_cost  # noqa: E402
from vdla.compiler.accel.schedule import Schedule  # noqa: E402
from vdla.frontend.onnx import load  # noqa: E402
from vdla.graph.network import compile_network  # noqa: E402
from vdla.graph.placement import layer_op  # noqa: E402
from vdla.hw.config import PRESETS  # noqa: E402


def _estimate(network, name: str) -> float:
    program = network.programs[name]
    op = layer_op(network.graph, network.graph.node(name))
    plan = Schedule.from_dict(program.metadata["schedule"]).check(op.geometry(),
                                                                    network.config)
    return estimate_cost(plan)


def resnet18(rtl: bool) -> dict:
    from resnet18 import build_resnet18, random_images
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "resnet18.onnx"
        build_resnet18(path)
        graph = load(path)
        image = random_images(1, seed=7)
        float_logits = _float_logits(path, graph, image)
    calibration = {"input": random_images(8, seed=1)}
    figures = {}
    for label, fuse in (("host_add", False), ("fused", True)):
        began = time.perf_counter()
        network = compile_network(graph, PRESETS["default"], calibration, fuse_residuals=fuse)
        compile_seconds = time.perf_counter() - began
        fused = [n.name for n in network.graph.nodes if "residual_shift" in n.attrs]
        exact, result = bit_exact(network, image, sim="fsim")
        logits = result.outputs[network.graph.outputs[0]]
        row = {"compile_seconds": round(compile_seconds, 1),
               "host_nodes": sum(p == "host" for p in network.placement.values()),
               "host_adds": sum(n.op == "qadd" for n in network.graph.nodes),
               "fused_layers": {n: network.graph.node(n).attrs["residual_shift"]
                                for n in fused},
               "fsim_bit_exact": exact,
               "host_copied_bytes_per_inference": result.copied_bytes,
               "arena_bytes": network.arena().size,
               "cosine_vs_onnxruntime_fp32": cosine(logits, float_logits),
               "top1_equal": bool(logits.argmax() == float_logits.argmax())}
        if rtl:
            exact, result = bit_exact(network, image, sim="rtl")
            layers = {r["name"]: r["cycles"] for r in result.layers if r["place"] == "accel"}
            row["rtl"] = {"bit_exact": exact, "accel_cycles": result.accel_cycles,
                          "layers": layers}
            row["estimates"] = {name: round(_estimate(network, name)) for name in layers}
        figures[label] = row
        print(label, json.dumps({k: v for k, v in row.items()
                                 if k not in ("rtl", "estimates")}), flush=True)
    if rtl:
        before, after = figures["host_add"], figures["fused"]
        layers = {}
        for name in after["fused_layers"]:
            cycles, estimate = after["rtl"]["layers"][name], after["estimates"][name]
            layers[name] = {"rtl_before": before["rtl"]["layers"][name], "rtl_after": cycles,
                            "estimate_after": estimate,
                            "estimate_error": round(estimate / cycles - 1, 4)}
        figures["fused_layers_cycles"] = layers
        figures["accel_cycles_added"] = (after["rtl"]["accel_cycles"]
                                         - before["rtl"]["accel_cycles"])
    return figures


def digits() -> dict:
    data = np.load(MODELS / "digits_data.npz")
    figures = {}
    for label, fuse in (("host_add", False), ("fused", True)):
        graph = load(MODELS / "digits.onnx", batch=360)
        network = compile_network(graph, PRESETS["default"], {"input": data["calibration"]},
                                  fuse_residuals=fuse)
        exact, result = bit_exact(network, data["images"], sim="fsim")
        logits = result.outputs["logits"]
        figures[label] = {
            "fsim_bit_exact_360": exact,
            "cpu_bit_exact_360": bit_exact(network, data["images"], target="cpu")[0],
            "int8_accuracy": float((logits.argmax(1) == data["labels"]).mean()),
            "float_accuracy": float(data["float_accuracy"]),
            "top1_agreement": float((logits.argmax(1) == data["float_logits"].argmax(1))
                                    .mean()),
            "host_nodes": sum(p == "host" for p in network.placement.values()),
            "host_copied_bytes_per_inference": result.copied_bytes}
        print("digits", label, json.dumps(figures[label]), flush=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-rtl", action="store_true", help="leave out the RTL runs")
    parser.add_argument("--output", default=str(RESULTS / "residual_fusion.json"))
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    figures = {"date": time.strftime("%Y-%m-%d"), "commit": commit,
               "machine": platform.machine(), "digits": digits(),
               "resnet18": resnet18(rtl=not args.no_rtl)}
    print(json.dumps(figures, indent=1))
    Path(args.output).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
