"""onnxruntime on the whole digits and ResNet-18 models: fp32 and its own int8, timed.

Usage::

    python benchmarks/models/onnxruntime_network.py [--threads 1] [--calls 20]

For each model, onnxruntime's fp32 session and its QDQ quantisations
(`bench.onnx_quantize`: symmetric ``int8``, ``int8-pow2``, and its fast
``uint8``-activation form) are timed at batch 1, each in a block of its own,
with and without intra-op spinning (`bench.onnx_network`); each int8 output is
compared with fp32's (cosine, top-1 agreement) and, for digits, every
implementation's accuracy on the 360 held-out images is measured. Prints the
tables and writes ``benchmarks/results/onnxruntime_network.json``.
ResNet-18 is generated into a temporary folder (`resnet18.build_resnet18`).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

from vdla.bench.onnx_network import (compare_outputs, format_timings, peer_models, session,
                                     time_model)
from vdla.bench.onnx_quantize import SCHEMES

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results" / "onnxruntime_network.json"
RESNET18_CALIBRATION = 8


def _digits(folder: Path):
    from_file = np.load(HERE / "digits_data.npz")
    return (HERE / "digits.onnx", from_file["calibration"], from_file["images"][:1],
            (from_file["images"], from_file["labels"]))


def _resnet18(folder: Path):
    from resnet18 import build_resnet18, random_images
    path = folder / "resnet18.onnx"
    build_resnet18(path, seed=0, batch=1)
    return path, random_images(RESNET18_CALIBRATION, seed=1), random_images(1, seed=2), None


def measure(name: str, source, folder: Path, args) -> dict:
    """Every implementation of one model: timings, output quality, accuracy."""
    model_path, calibration, sample, labelled = source(folder)
    models = peer_models(model_path, calibration, folder, SCHEMES)
    report = {"model": name, "timings": [], "quality": {}, "accuracy": {}}
    outputs = {}
    for implementation, path in models.items():
        for spinning in (False, True):
            print(f"{name}: {implementation}, spinning {spinning}", file=sys.stderr)
            timing, outputs[implementation] = time_model(
                implementation, path, {"input": sample}, args.threads, spinning,
                args.warmup, args.calls)
            report["timings"].append(timing)
        if labelled is not None:
            images, labels = labelled
            logits = session(path, args.threads, False).run(None, {"input": images})[0]
            report["accuracy"][implementation] = float((logits.argmax(axis=1) == labels).mean())
    for implementation, output in outputs.items():
        if implementation != "ort fp32":
            report["quality"][implementation] = compare_outputs(output, outputs["ort fp32"])
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--models", default="digits,resnet18")
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    import onnxruntime
    sources = {"digits": _digits, "resnet18": _resnet18}
    reports = []
    with tempfile.TemporaryDirectory(prefix="vdla-ort-") as folder:
        for name in args.models.split(","):
            reports.append(measure(name, sources[name], Path(folder), args))
    for report in reports:
        print(f"\n{report['model']} (batch 1, onnxruntime {onnxruntime.__version__}, "
              f"{args.calls} calls after {args.warmup} warm-up)")
        print("\n".join(format_timings(report["timings"])))
        report["timings"] = [timing.as_dict() for timing in report["timings"]]
        for implementation, quality in report["quality"].items():
            print(f"{implementation}: cosine with fp32 {quality['cosine']:.5f}, "
                  f"top-1 agreement {100 * quality['top1_agreement']:.1f} %")
        for implementation, accuracy in report["accuracy"].items():
            print(f"{implementation}: accuracy on the 360 held-out digits {100 * accuracy:.2f} %")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "onnxruntime": onnxruntime.__version__, "threads": args.threads, "calls": args.calls,
        "warmup": args.warmup, "machine": platform.processor() or platform.machine(),
        "models": reports}, indent=1) + "\n")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
