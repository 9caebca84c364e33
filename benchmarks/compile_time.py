"""Compile time of ResNet-18 C2-C11 at a config (target: < 2 s in total at default).

Usage::

    python benchmarks/compile_time.py [--config default] [--repeat 3]

Prints per-layer and total compile time (best of ``--repeat`` runs, so other
processes on the machine disturb it less) with the instruction counts, and
writes ``benchmarks/results/compile_time.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from vdla.compiler import compile_op
from vdla.compiler.workloads import RESNET18
from vdla.hw.config import load_config

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default", help="preset name or JSON file")
    parser.add_argument("--repeat", type=int, default=3, help="runs per layer (best is kept)")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "compile_time.json"))
    args = parser.parse_args()
    config = load_config(args.config)
    rows = []
    for workload in RESNET18:
        best, program = float("inf"), None
        for _ in range(max(1, args.repeat)):
            start = time.perf_counter()
            program = compile_op(workload.op, config)
            best = min(best, time.perf_counter() - start)
        rows.append({"layer": workload.name, "op": workload.op.describe(), "seconds": best,
                     "instructions": len(program.instructions), "uops": len(program.uops),
                     "schedule": program.metadata["schedule"],
                     "pass_seconds": program.metadata["stats"]["timings_s"]})
        print(f"{workload.name:4s} {best * 1000:8.1f} ms  {len(program.instructions):6d} insns  "
              f"{len(program.uops):5d} uops  {workload.op.describe()}")
    total = sum(row["seconds"] for row in rows)
    print(f"total {total * 1000:7.1f} ms  (target < 2000 ms) on config {config.name}")
    result = {"config": config.name, "total_seconds": total, "target_seconds": 2.0,
              "repeat": args.repeat, "python": platform.python_version(),
              "machine": platform.machine(), "layers": rows}
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
