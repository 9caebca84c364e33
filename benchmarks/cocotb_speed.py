"""Speed of the chip-level cocotb bench: simulated cycles per wall-clock second.

Usage::

    python benchmarks/cocotb_speed.py                   # default config, 150-action program
    python benchmarks/cocotb_speed.py --config tiny --actions 60 --repeat 3

Builds (or reuses) the cocotb Verilator model of the accelerator, runs the
``speed`` test case of ``tests/cocotb/bench_chip.py``: one long random program
(loads, GEMM/ALU loops, stores and the final dump of out and acc) through the
Python DRAM model at full speed, timed from ``start`` to ``done``, the final
DRAM image checked against fsim. Prints the rate and writes
``benchmarks/results/cocotb_speed.json``. Target: >= 20 k cycles/s at default.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path


from vdla.hw.config import load_config
from vdla.testing.cocotb import harness

RESULTS = Path(__file__).resolve().parent / "results" / "cocotb_speed.json"
TARGET = 20_000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="default", help="preset name or JSON file")
    parser.add_argument("--actions", type=int, default=150, help="random program body actions")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="runs; the median is reported")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    config = load_config(args.config)

    from vdla.hw.generate import TOP_NAME, verilog
    started = time.perf_counter()
    model = harness.build(TOP_NAME, verilog(config))
    build_seconds = time.perf_counter() - started

    runs = []
    for attempt in range(args.repeat):
        with tempfile.TemporaryDirectory() as work:
            output = Path(work) / "speed.json"
            env = harness.config_env(config)
            env.update(VDLA_SPEED_JSON=str(output), VDLA_SPEED_ACTIONS=str(args.actions),
                       VDLA_SPEED_SEED=str(args.seed))
            wall = time.perf_counter()
            results = harness.run("bench_chip", model, testcases=["speed"], env=env,
                                  work_dir=Path(work))
            wall = time.perf_counter() - wall
            if results.failed or not output.exists():
                print("speed run failed:\n" + "\n".join(results.failures), file=sys.stderr)
                return 1
            run = json.loads(output.read_text())
            run["process_seconds"] = round(wall, 2)
            runs.append(run)
            print(f"run {attempt + 1}: {run['cycles']} cycles in {run['seconds']:.2f} s = "
                  f"{run['cycles_per_second']:,.0f} cycles/s (equal to fsim: "
                  f"{run['equal_to_fsim']}; whole simulator process {wall:.1f} s)", flush=True)
    rate = statistics.median(r["cycles_per_second"] for r in runs)
    print(f"{config.name}: median {rate:,.0f} cycles/s over {len(runs)} runs "
          f"(target {TARGET:,}: {'met' if rate >= TARGET else 'NOT met'}); "
          f"model build {build_seconds:.1f} s")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "benchmark": "cocotb chip bench speed (bench_chip.speed)",
        "command": "python benchmarks/cocotb_speed.py " + " ".join(argv or sys.argv[1:]),
        "config": config.name, "config_hash": config.hash, "actions": args.actions,
        "seed": args.seed, "cycles": runs[0]["cycles"], "instructions": runs[0]["instructions"],
        "median_cycles_per_second": round(rate), "target_cycles_per_second": TARGET,
        "target_met": rate >= TARGET, "build_seconds": round(build_seconds, 1),
        "runs": [{k: v for k, v in r.items() if k != "counters"} for r in runs],
        "counters": runs[0]["counters"], "machine": platform.platform(),
        "python": platform.python_version()}, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0 if all(r["equal_to_fsim"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
