"""ResNet-18 C2–C11 cycles on the RTL under each memory system (sensitivity table).

Usage::

    python benchmarks/memory.py                      # every system, all layers, 2 workers
    python benchmarks/memory.py --layers C2,C9 --jobs 1
    python benchmarks/memory.py --systems ideal,axi3-hp --stalls 0,25

Runs each ResNet-18 layer (checked against numpy) on the cycle-accurate RTL of
``--config`` (default: ``default``) with its ``memory`` set to each of
`hw.config.MEMORY_SYSTEMS` in turn, and under the DRAM model's random stalls
(``--stalls``, percent of cycles in which each memory stream stalls), prints
the table and writes ``benchmarks/results/memory.json`` (or ``--output``). Each memory system is other
hardware (its burst rules, its write-response wait), so each builds its own
model. Exits non-zero when a layer is wrong.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import sys
import time
from pathlib import Path

from vdla.bench import suite as bench
from vdla.hw.config import MEMORY_SYSTEMS, load_config
from vdla.sim.rtl.build import build_model

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _row(config, stall: int, layers: list[bench.LayerResult]) -> dict:
    result = bench.BenchResult("resnet18", config, "rtl", True, 0, layers, complete=False)
    return {
        "memory": config.memory, "stall_percent": stall,
        "rules": dataclasses.asdict(config.memory_system),
        "cycles": result.total_cycles, "gemm_utilization": result.gemm_utilization,
        "geomean_gemm_utilization": result.geomean_utilization,
        "correct": result.all_correct,
        "layers": {layer.name: layer.cycles for layer in layers},
    }


def table(rows: list[dict]) -> list[str]:
    """The sensitivity table in Markdown: cycles relative to the first row."""
    base = rows[0]["cycles"]
    names = list(rows[0]["layers"])
    lines = ["| memory | stalls | " + " | ".join(names) + " | total | vs first | geomean util |",
             "|" + "---|" * (len(names) + 5)]
    for row in rows:
        lines.append(f"| {row['memory']} | {row['stall_percent']} % | "
                     + " | ".join(f"{row['layers'][name]:,}" for name in names)
                     + f" | {row['cycles']:,} | {100 * (row['cycles'] / base - 1):+.1f} % | "
                     f"{100 * row['geomean_gemm_utilization']:.1f} % |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default", help="preset or JSON file")
    parser.add_argument("--systems", default=",".join(MEMORY_SYSTEMS),
                        help="memory systems, comma separated")
    parser.add_argument("--stalls", default="0", help="random stall percentages, e.g. 0,25")
    parser.add_argument("--layers", default=None, help="e.g. C2,C9 (default: C2-C11)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--output", type=Path, default=RESULTS / "memory.json",
                        help="results file (default: benchmarks/results/memory.json)")
    args = parser.parse_args(argv)
    base = load_config(args.config)
    workloads = bench.select_workloads(args.layers)
    stalls = [int(value) for value in args.stalls.split(",")]
    runs = [(dataclasses.replace(base, memory=memory, name=f"{base.name}-{memory}"), stall)
            for memory in args.systems.split(",") for stall in stalls]
    for config in {config for config, _ in runs}:   # build before the workers start
        build_model(config, progress=lambda text: print(text, file=sys.stderr))

    began = time.monotonic()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        futures = {(config, stall): [pool.submit(bench.run_layer, workload, config, "rtl",
                                                 backend_options={"backpressure": stall})
                                     for workload in workloads]
                   for config, stall in runs}
        rows = []
        for (config, stall), layer_futures in futures.items():
            layers = [future.result() for future in layer_futures]
            rows.append(_row(config, stall, layers))
            print(f"  {config.memory} at {stall} % stalls: {rows[-1]['cycles']:,} cycles",
                  file=sys.stderr)
    lines = table(rows)
    print("\n".join(lines))
    report = {"config": base.to_dict(), "rows": rows, "table": lines,
              "seconds": round(time.monotonic() - began, 1),
              "measured_at": time.strftime("%Y-%m-%d"),
              "command": " ".join(["python", "benchmarks/memory.py", *sys.argv[1:]])}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    return 0 if all(row["correct"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
