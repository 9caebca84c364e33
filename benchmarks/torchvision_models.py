"""torchvision's classifiers through vdla: which compile, how close they come, and where not.

Usage::

    python benchmarks/torchvision_models.py [--only NAME,...] [--samples 8] [--size 64]
                                            [--max-gmacs 5] [--timeout 900] [--config default]
                                            [--calibration-method mse]
                                            [--output benchmarks/results/torchvision.json]

Needs torch and torchvision (``pip install 'vdla[torch]' torchvision``).

Each family, in a process of its own stopped after ``--timeout`` seconds: the
module built with ``weights=None`` after ``torch.manual_seed(seed)``, every
BatchNorm's scale and shift drawn (scale in [0.75, 1.25], shift N(0, 0.1)) and
its running statistics measured in train mode on two seeded batches, so that
eval mode normalises real activations instead of being the identity; exported
at ``--size`` x ``--size`` (or the smallest input the family accepts, `MODELS`)
with `vdla.frontend.torch.export` (again at the batch it runs, where that is
not 1), then given to `models_status.model_status`: imported from those bytes
(`vdla.frontend.onnx.from_bytes`, which is what `vdla.frontend.torch.load`
does), compiled by `compile_network` with per-channel weight scales,
``--calibration-method`` and ``--samples`` seeded calibration inputs, then run
on other seeded inputs on fsim and as the cpu target's C and compared with
onnxruntime's fp32 run of the same ONNX bytes. A refusal is recorded as vdla
said it (its first line). Each family runs in `models_status._bounded`'s
process, so both tables count alike, down to the cycles of the accelerator
layers at the compiled batch (``batch``) as the cost model estimates them
(``estimated_cycles``).

Prints one row per model and writes ``benchmarks/results/torchvision.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import models_status  # noqa: E402
from models_status import _bounded, _failed, model_status  # noqa: E402

# The ``source`` of this script's records (and of the model in vdla's messages).
SOURCE = "torch export"

__all__ = ["MODELS", "build", "model_record", "main"]

# Family -> (torchvision builder, its keyword arguments, the smallest input side it takes, or
# None where --size works). AlexNet and VGG pool adaptively to 6x6 and 7x7, which the ONNX
# export writes only as a plain pool of an exact multiple: 224 is the smallest input.
# Inception-v3 needs 75 (torchvision's documented minimum).
MODELS: dict[str, tuple[str, dict, int | None]] = {
    "alexnet": ("alexnet", {}, 224),
    "vgg11": ("vgg11", {}, 224),
    "resnet18": ("resnet18", {}, None),
    "resnet50": ("resnet50", {}, None),
    "resnext50_32x4d": ("resnext50_32x4d", {}, None),
    "wide_resnet50_2": ("wide_resnet50_2", {}, None),
    "squeezenet1_0": ("squeezenet1_0", {}, None),
    "squeezenet1_1": ("squeezenet1_1", {}, None),
    "densenet121": ("densenet121", {}, None),
    "googlenet": ("googlenet", {"aux_logits": False, "init_weights": True}, None),
    "inception_v3": ("inception_v3", {"aux_logits": False, "init_weights": True}, 75),
    "shufflenet_v2_x1_0": ("shufflenet_v2_x1_0", {}, None),
    "mobilenet_v2": ("mobilenet_v2", {}, None),
    "mobilenet_v3_small": ("mobilenet_v3_small", {}, None),
    "mobilenet_v3_large": ("mobilenet_v3_large", {}, None),
    "mnasnet1_0": ("mnasnet1_0", {}, None),
    "efficientnet_b0": ("efficientnet_b0", {}, None),
    "regnet_x_400mf": ("regnet_x_400mf", {}, None),
    "regnet_y_400mf": ("regnet_y_400mf", {}, None),
}


def input_side(name: str, size: int) -> int:
    """The input side a family is exported at: ``size``, or its smallest where larger."""
    return max(size, MODELS[name][2] or 0)


def build(name: str, side: int, seed: int):
    """The family's module with seeded weights and measured BatchNorm statistics, in eval mode."""
    import torch
    import torchvision
    function, kwargs, _ = MODELS[name]
    torch.manual_seed(seed)
    module = getattr(torchvision.models, function)(weights=None, **kwargs)
    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for norm in norms:
            norm.weight.copy_(0.75 + 0.5 * torch.rand(norm.weight.shape, generator=generator))
            norm.bias.copy_(0.1 * torch.randn(norm.bias.shape, generator=generator))
            norm.reset_running_stats()
            norm.momentum = None   # a cumulative average over the batches below
        module.train()
        for _ in range(2):
            module(torch.randn(8, 3, side, side, generator=generator))
    return module.eval()


def model_record(name: str, options: dict, progress=lambda stage: None) -> dict:
    """One family's record (see the module's docstring); ``progress(stage)`` as it goes."""
    side = input_side(name, options["size"])
    head = {"model": name, "source": SOURCE, "input": [3, side, side], "compiles": False,
            "stage": None, "refusal": None}
    stage = "build"
    try:
        import onnx
        import torch
        from vdla.frontend.torch import export
        progress(stage)
        module = build(name, side, seed=options["seed"])
        stage = "export"
        progress(stage)

        def at_batch(batch: int):
            # As a user would export it: the exporter bakes the batch into Reshape shapes
            # (ShuffleNet's channel shuffle) that import cannot rebatch.
            return onnx.load_model_from_string(export(module, torch.zeros(batch, 3, side, side)))
        model = at_batch(1)
    except Exception as error:  # noqa: BLE001 - a refusal, or a bug (vdla's or torch's)
        return _failed(head, stage, error)
    # torchvision's classifiers end at their logits: the cosine is of those.
    return {**head, **model_status(name, SOURCE, model, True, {**options, "per_channel": True},
                                   progress, at_batch=at_batch)}


def _task(job: tuple, progress) -> dict:
    name, _, options = job
    return model_record(name, options, progress)


def _row(record: dict) -> str:
    side = record.get("input", [0, 0, 0])[1]
    macs = record.get("macs")
    head = f"{record['model']:20s} {side:4d} {macs / 1e6 if macs else 0:8.1f}"
    if record.get("compiles") and "crash" not in record:
        fsim = record.get("fsim")
        share = record.get("accel_mac_share")
        figures = (f"cos {fsim['cosine']:.4f}, top-1 {fsim['top1_agreement']:.2f}"
                   if fsim else record.get("run", ""))
        return (f"{head}  {'compiles':18s} {figures}; accel MACs {share:.2f}, "
                f"{record['estimated_cycles']:,} cycles (estimated, batch {record['batch']})")
    status = "timeout" if "timeout" in record else \
        f"crash at {record['stage']}" if "crash" in record else f"refused at {record['stage']}"
    what = record.get("refusal") or record.get("crash") or record.get("timeout")
    return f"{head}  {status:18s} {what}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=None, help="comma-separated family names")
    parser.add_argument("--samples", type=int, default=8,
                        help="calibration samples, and inputs compared (default 8)")
    parser.add_argument("--size", type=int, default=64,
                        help="input side (default 64; larger where a family needs it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="default")
    parser.add_argument("--max-gmacs", type=float, default=5.0,
                        help="G MACs of the runs of one model on each target: the samples "
                             "in one batch if they fit, else as many as fit one at a time")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per model")
    models_status.add_quantization_options(parser, per_channel=False)
    parser.add_argument("--output", type=Path, default=models_status.RESULTS / "torchvision.json")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(MODELS)
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        raise SystemExit(f"Error: --only: unknown model {unknown[0]!r} (models: "
                         f"{', '.join(MODELS)})")
    options = {"samples": args.samples, "seed": args.seed, "config": args.config,
               "size": args.size, "max_gmacs": args.max_gmacs,
               "calibration_method": args.calibration_method}
    # Versions without importing torch here: the workers are forked from this process.
    report = {"machine": platform.machine(),
              **{package: version(package) for package in ("torch", "torchvision", "onnx",
                                                           "onnxruntime")},
              "per_channel": True, **options, "models": []}
    print(f"{'model':20s} {'side':>4s} {'M MACs':>8s}  {'status':18s} "
          "fsim vs onnxruntime fp32, or the first refusal")
    for name in names:
        record = _bounded((name, SOURCE, options), args.timeout, task=_task)
        report["models"].append(record)
        print(_row(record), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
