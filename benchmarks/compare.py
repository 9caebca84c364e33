"""The accelerator, the cpu target and CPU libraries on ResNet-18 C2-C11, with the targets.

Usage::

    python benchmarks/compare.py [--config default] [--clock-mhz 100] [--threads 2]
                                 [--repeats 5] [--calls 10] [--warmup 2] [--layers C2,C5]
                                 [--only 'cpu fp32,ort fp32'] [--alone [PASSES]]

Runs `vdla.bench.compare.run_comparison` (every output checked against numpy;
each implementation timed in blocks of its own, rounds in random order),
prints the table and the ratios against issue 10's targets (cpu int8 total at
most 1.5x onnxruntime's best int8 total and below its fp32 total; cpu fp32
within 1.25x onnxruntime fp32), the table as Markdown (for README), and
writes ``benchmarks/results/compare_cpu.json`` and ``compare_cpu.png`` (``--output``,
``--plot``).

``--alone [PASSES]`` then times each CPU implementation alone, in a fresh
process of its own (the same blocks, nothing else timed in it), PASSES times
in random order, and prints each ratio from both measurements (the lone
one from the median totals, with its range over the passes) and their
difference: the check of issue 24 that the shared run's ratios agree with
the lone runs' within 10 %. Wall-clock
figures: the machine's load average is recorded with them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from vdla.bench.compare import (format_table, markdown_table, plot_comparison, ratios_of,
                                run_comparison)
from vdla.compiler.workloads import RESNET18
from vdla.hw.config import load_config

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
# ratio name -> the largest value that meets the target
TARGETS = {"cpu int8 / ort best int8": 1.5, "cpu int8 / ort fp32": 1.0, "cpu fp32 / ort fp32": 1.25}
# How far the shared run's ratios may be from the lone runs' (issue 24).
AGREEMENT = 0.10


def _progress(message: str) -> None:
    print(f"\r{message:<48}", end="", file=sys.stderr)


def alone(report: dict, config, settings: dict, passes: int) -> dict:
    """Each measured CPU implementation of ``report`` timed alone in a fresh process,
    ``passes`` times (implementations in a random order each pass): the median totals,
    the ratios from them with their range over the passes, and each ratio's
    difference from the report's."""
    names = [name for name in report["columns"]
             if name != "accel" and not report["columns"][name]["missing"]]
    runs: dict[str, list[float]] = {name: [] for name in names}
    order = random.Random(report["seed"])
    spawn = multiprocessing.get_context("spawn")
    for number in range(passes):
        order.shuffle(names)
        for name in names:
            _progress(f"alone, pass {number + 1}/{passes}: {name}")
            with ProcessPoolExecutor(1, mp_context=spawn) as process:
                lone = process.submit(run_comparison, config, ("cpu",), only=[name],
                                      **settings).result()
            runs[name].append(lone["columns"][name]["total_seconds"])
    fixed = {}
    if "accel" in report["columns"]:
        fixed["accel"] = report["columns"]["accel"]["total_seconds"]
    totals = {**fixed, **{name: statistics.median(values) for name, values in runs.items()}}
    ratios = ratios_of(totals)
    per_pass = [ratios_of({**fixed, **{name: values[number] for name, values in runs.items()}})
                for number in range(passes)]
    difference = {name: report["ratios"][name] / value - 1 for name, value in ratios.items()}
    return {"passes": passes, "totals": totals, "pass_totals": runs, "ratios": ratios,
            "ratio_ranges": {name: [min(r[name] for r in per_pass), max(r[name] for r in per_pass)]
                             for name in ratios},
            "difference": difference, "agree_within": AGREEMENT,
            "agree": {name: abs(value) <= AGREEMENT for name, value in difference.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default", help="preset name or JSON file")
    parser.add_argument("--clock-mhz", type=float, default=None,
                        help="default: the config's Fmax if known, else 100 MHz")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="rounds of blocks")
    parser.add_argument("--calls", type=int, default=10, help="timed calls per block")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls per block")
    parser.add_argument("--layers", default=None, help="e.g. C2,C5 (default: C2-C11)")
    parser.add_argument("--only", default=None,
                        help="time only these implementations, e.g. 'cpu fp32,ort fp32'")
    parser.add_argument("--alone", type=int, nargs="?", const=1, default=0, metavar="PASSES",
                        help="then time each implementation alone (in PASSES passes, "
                             "default 1) and compare the ratios")
    parser.add_argument("--output", default=str(RESULTS / "compare_cpu.json"))
    parser.add_argument("--plot", default=None, help="default: --output's name with .png")
    args = parser.parse_args()
    args.plot = args.plot or str(Path(args.output).with_suffix(".png"))
    config = load_config(args.config)
    layers = args.layers.split(",") if args.layers else [w.name for w in RESNET18]
    if not set(layers) <= {w.name for w in RESNET18}:
        parser.error(f"--layers {args.layers}: not all of {', '.join(w.name for w in RESNET18)}")
    settings = {"threads": args.threads, "repeats": args.repeats, "calls": args.calls,
                "warmup": args.warmup, "workloads": [w for w in RESNET18 if w.name in layers]}
    only = args.only.split(",") if args.only else None
    report = run_comparison(config, ("accel", "cpu"), args.clock_mhz, progress=_progress,
                            only=only, **settings)
    if args.alone:
        report["alone"] = alone(report, config, settings, args.alone)
    print("\r" + " " * 49 + "\r", end="", file=sys.stderr)
    report["command"] = "python benchmarks/compare.py " + " ".join(sys.argv[1:])
    report["targets_met"] = {name: report["ratios"][name] <= limit
                             for name, limit in TARGETS.items() if name in report["ratios"]}
    for line in format_table(report):
        print(line)
    for name, met in report["targets_met"].items():
        print(f"target {name} <= {TARGETS[name]}: {'met' if met else 'NOT met'} "
              f"({report['ratios'][name]:.2f})")
    print("\n".join(markdown_table(report)))
    if args.alone:
        lone = report["alone"]
        print(f"ratio: this run (blocks) / each implementation alone, median of "
              f"{lone['passes']} passes (lowest-highest pass; difference, agree within "
              f"{AGREEMENT:.0%})")
        for name, value in lone["ratios"].items():
            low, high = lone["ratio_ranges"][name]
            print(f"{name}: {report['ratios'][name]:.3f} / {value:.3f} ({low:.3f}-{high:.3f}; "
                  f"{lone['difference'][name]:+.1%}, "
                  f"{'agree' if lone['agree'][name] else 'DIFFER'})")
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    plot_comparison(report, args.plot)
    print(f"wrote {args.output} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
