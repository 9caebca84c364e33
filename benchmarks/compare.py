"""The accelerator, the cpu target and CPU libraries on ResNet-18 C2-C11, with the targets.

Usage::

    python benchmarks/compare.py [--config default] [--clock-mhz 100] [--threads 2]
                                 [--repeats 30]

Runs `vdla.bench.compare.run_comparison` (every output checked against numpy),
prints the table and the ratios against issue 10's targets (cpu int8 total at
most 1.5x onnxruntime's best int8 total and below its fp32 total; cpu fp32
within 1.25x onnxruntime fp32), the table as Markdown (for README), and writes ``benchmarks/results/compare_cpu.json``
and ``benchmarks/results/compare_cpu.png``. Wall-clock figures: the machine's
load average is recorded with them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vdla.bench.compare import (format_table, markdown_table, plot_comparison,
                                run_comparison)
from vdla.hw.config import load_config

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
# ratio name -> the largest value that meets the target
TARGETS = {"cpu int8 / ort best int8": 1.5, "cpu int8 / ort fp32": 1.0, "cpu fp32 / ort fp32": 1.25}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default", help="preset name or JSON file")
    parser.add_argument("--clock-mhz", type=float, default=None,
                        help="default: the config's Fmax if known, else 100 MHz")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--output", default=str(RESULTS / "compare_cpu.json"))
    parser.add_argument("--plot", default=str(RESULTS / "compare_cpu.png"))
    args = parser.parse_args()
    report = run_comparison(load_config(args.config), ("accel", "cpu"), args.clock_mhz,
                            args.threads, args.repeats,
                            progress=lambda message: print(f"\r{message:<40}", end="",
                                                           file=sys.stderr))
    print("\r" + " " * 41 + "\r", end="", file=sys.stderr)
    report["command"] = "python benchmarks/compare.py " + " ".join(sys.argv[1:])
    report["targets_met"] = {name: report["ratios"][name] <= limit
                             for name, limit in TARGETS.items() if name in report["ratios"]}
    for line in format_table(report):
        print(line)
    for name, met in report["targets_met"].items():
        print(f"target {name} <= {TARGETS[name]}: {'met' if met else 'NOT met'} "
              f"({report['ratios'][name]:.2f})")
    print("\n".join(markdown_table(report)))
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    plot_comparison(report, args.plot)
    print(f"wrote {args.output} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
