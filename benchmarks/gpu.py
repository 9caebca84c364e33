"""The gpu target on a CUDA GPU: its test suite, then the comparison with cuDNN, in one command.

Usage (on the GPU machine, from the repository's root, with CuPy and PyTorch
installed)::

    python benchmarks/gpu.py [--targets accel,cpu,gpu] [--repeats 20] [--config default]

1. Runs the gpu target's tests (``tests/compiler/gpu``,
   ``tests/bench/test_gpu_compare.py``: int8 bit-exact with numpy on C2–C11
   at batch 1 and 8 and on odd shapes, fp16/fp32 close, graph replay, the
   CLI; the nvcc compile checks) with pytest, and records passed / failed /
   skipped with every skip reason. A skipped ``gpu`` test means no device was
   usable: the script says so and exits non-zero.
2. Runs `vdla.bench.compare.run_comparison` with the targets (the gpu target
   and PyTorch cuDNN fp16/tf32/fp32 at batch 1 and 8 on the same GPU, every
   output checked), prints the table, the ratio of issue 11's target (gpu
   int8 total at batch 1 <= cuDNN's best total, per layer the fastest of
   fp16/tf32/fp32) and the Markdown table for ``benchmarks/README.md``.
3. Writes ``benchmarks/results/gpu_resnet18.json`` (device name, driver,
   clocks, library versions, the tests' outcome, the command) and
   ``benchmarks/results/gpu_resnet18.png``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from vdla.bench.compare import format_table, markdown_table, plot_comparison, run_comparison
from vdla.hw.config import load_config

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
TESTS = ["tests/compiler/gpu", "tests/bench/test_gpu_compare.py"]
# ratio name -> the largest value that meets issue 11's target
TARGETS = {"gpu int8 / cudnn best": 1.0}


def run_tests() -> dict:
    """pytest over `TESTS` in one process; counts and every failure and skip reason."""
    with tempfile.TemporaryDirectory() as folder:
        junit = Path(folder) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-n", "0", "-q", "-rs", "-p", "no:cacheprovider",
                   f"--junitxml={junit}", *TESTS]
        completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        print(completed.stdout[-4000:], completed.stderr[-2000:], sep="\n")
        outcome = {"command": " ".join(command[2:]), "exit_code": completed.returncode,
                   "passed": 0, "failed": [], "skipped": []}
        if not junit.exists():
            return outcome
        for case in ElementTree.parse(junit).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                outcome["failed"].append(name)
            elif case.find("skipped") is not None:
                outcome["skipped"].append(f"{name}: {case.find('skipped').get('message')}")
            else:
                outcome["passed"] += 1
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="accel,cpu,gpu")
    parser.add_argument("--config", default="default", help="preset name or JSON file")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="threads of the CPU columns")
    parser.add_argument("--skip-tests", action="store_true", help="only the benchmark")
    parser.add_argument("--output", default=str(RESULTS / "gpu_resnet18.json"))
    parser.add_argument("--plot", default=str(RESULTS / "gpu_resnet18.png"))
    args = parser.parse_args()
    tests = None if args.skip_tests else run_tests()
    report = run_comparison(load_config(args.config), tuple(args.targets.split(",")),
                            threads=args.threads, repeats=args.repeats,
                            progress=lambda message: print(f"\r{message:<48}", end="",
                                                           file=sys.stderr))
    print("\r" + " " * 49 + "\r", end="", file=sys.stderr)
    report["command"] = "python benchmarks/gpu.py " + " ".join(sys.argv[1:])
    report["tests"] = tests
    report["targets_met"] = {name: report["ratios"][name] <= limit
                             for name, limit in TARGETS.items() if name in report["ratios"]}
    for line in format_table(report):
        print(line)
    for name, value in report.get("gpu", {}).get("graph_seconds", {}).items():
        print(f"gpu {name}, C2-C11 x uses as one CUDA graph: {value * 1e3:.3f} ms")
    for name, met in report["targets_met"].items():
        print(f"target {name} <= {TARGETS[name]}: {'met' if met else 'NOT met'} "
              f"({report['ratios'][name]:.2f})")
    print("\n".join(markdown_table(report)))
    Path(args.output).write_text(json.dumps(report, indent=2, default=str) + "\n")
    plot_comparison(report, args.plot)
    print(f"wrote {args.output} and {args.plot}")
    problems = []
    if tests is not None and (tests["failed"] or tests["exit_code"] != 0):
        problems.append(f"{len(tests['failed'])} gpu test(s) failed (exit {tests['exit_code']})")
    if tests is not None and any("gpu test:" in skip for skip in tests["skipped"]):
        problems.append("gpu tests were skipped: no usable CUDA device")
    gpu = report.get("gpu")
    if gpu is None:
        problems.append("the gpu columns did not run (--targets lacks gpu)")
    elif "missing" in gpu:
        problems.append(gpu["missing"])
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
