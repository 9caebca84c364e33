"""Every convolution `Conv2d` takes, on every target, against numpy: a random sweep.

Random layers (``compiler.workloads.random_conv2d``: groups incl. depthwise,
dilation 1–3, asymmetric padding 0–5 incl. padding at or past the kernel,
rectangular kernels and strides, batch 1–3) run

- on fsim for the accelerator configs ``tiny``, ``default`` and ``odd``
  (layers the accelerator takes: groups of whole GEMM blocks or depthwise on a
  square block, padding below the kernel's extent and at most 15);
- as the ``cpu`` target's int8 C (every layer, any padding);
- through the ``gpu`` target's tiling model (the formulas its CUDA C is
  generated from) for every layer, and through the CUDA C itself on the CPU
  (``compiler.gpu.host_emulation``) for every tenth;

and prints how many are bit-exact per target, writing
``benchmarks/results/conv_sweep.json``. Run::

    python -m benchmarks.conv_sweep [--shapes 300] [--seed 0] [--targets "cpu int8,gpu model"]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from vdla.compiler import compile_op
from vdla.compiler.cpu import CpuKernel
from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.gpu import default_gpu_schedule
from vdla.compiler.gpu.host_emulation import emulate
from vdla.compiler.gpu.model import run_model
from vdla.compiler.gpu.tiling import Tiling
from vdla.hw.config import PRESETS
from vdla.runtime.runner import AccelRunner
from vdla.compiler.workloads import random_conv2d


RESULTS = Path(__file__).with_name("results") / "conv_sweep.json"
ACCEL_CONFIGS = ("tiny", "default", "odd")


def _cpu(op, inputs):
    kernel = CpuKernel(op, "int8")
    kernel.set_weights(inputs["weight"], inputs.get("bias"))
    return kernel.run(inputs["data"])


def _gpu_model(op, inputs):
    problem = CpuProblem.from_op(op)
    tiling = Tiling(problem, default_gpu_schedule(problem, "int8"), "int8")
    return run_model(tiling, inputs["data"], inputs["weight"], inputs.get("bias"), op.shift,
                     op.relu)


def _gpu_emulation(op, inputs):
    return emulate(op, "int8", None, inputs["data"], inputs["weight"], inputs.get("bias"))


def _fsim(config):
    device = AccelRunner(config)
    return lambda op, inputs: device.run(compile_op(op, config), inputs).outputs["out"]


def sweep(shapes: int, seed: int, targets: list[str] | None = None) -> dict:
    """Run ``shapes`` random layers per target (all, or ``targets``); return counts and any
    mismatching layer."""
    runs = {f"fsim {name}": (_fsim(PRESETS[name]), PRESETS[name]) for name in ACCEL_CONFIGS}
    runs |= {"cpu int8": (_cpu, None), "gpu model": (_gpu_model, None),
             "gpu emulation": (_gpu_emulation, None)}
    report = {}
    for number, (target, (run, config)) in enumerate(runs.items()):
        if targets and target not in targets:
            continue
        rng = np.random.default_rng([seed, number])    # the same layers when run alone
        began, exact, failures = time.perf_counter(), 0, []
        count = shapes // 10 if target == "gpu emulation" else shapes
        features = {"groups": 0, "depthwise": 0, "dilated": 0, "asymmetric": 0,
                    "pad_at_least_kernel": 0}
        for index in range(count):
            op = random_conv2d(rng, config, max_channels=12 if target == "gpu emulation" else 24)
            inputs = op.random_inputs(np.random.default_rng(index), bias_range=1 << 30)
            if np.array_equal(run(op, inputs), op.reference(**inputs)):
                exact += 1
            else:
                failures.append(op.to_dict())
            top, left, bottom, right = op.padding
            features["groups"] += op.groups > 1 and not op.depthwise
            features["depthwise"] += op.depthwise
            features["dilated"] += op.dilation != (1, 1)
            features["asymmetric"] += (top, left) != (bottom, right)
            features["pad_at_least_kernel"] += max(op.padding) >= min(op.kernel)
        report[target] = {"layers": count, "bit_exact": exact, "failures": failures,
                          "with": features, "seconds": round(time.perf_counter() - began, 1)}
        print(f"{target:14s} {exact}/{count} bit-exact  ({features}; "
              f"{report[target]['seconds']} s)", flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", default=None,
                        help="Comma-separated targets to run (default: all), e.g. 'cpu int8'.")
    args = parser.parse_args()
    targets = args.targets.split(",") if args.targets else None
    report = {"shapes": args.shapes, "seed": args.seed,
              "targets": sweep(args.shapes, args.seed, targets)}
    if targets and RESULTS.exists():      # keep the other targets' last results
        report["targets"] = json.loads(RESULTS.read_text())["targets"] | report["targets"]
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
