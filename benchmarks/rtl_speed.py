"""Simulated cycles per second of the RTL tier (Verilator model through ctypes).

Usage::

    python benchmarks/rtl_speed.py                    # default config, ~4 M-cycle program
    python benchmarks/rtl_speed.py --config tiny --tiles 2000 --repeat 3

Runs a long double-buffered GEMM program (testing/programs/handbuilt.py: input tiles
streamed by load, GEMM on compute, results drained by store, all four token
queues busy) on the ``rtl`` backend, checks its output against numpy, and
reports build time (cold or cached), simulated cycles, wall time of the
native run and cycles per second. Writes ``benchmarks/results/rtl_speed.json``.
Target: at least 1 M cycles/s at the default config. Wall-clock rates suffer
when other work shares the CPU; the per-CPU-second rate (the native run is
single-threaded) and the load average are reported too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np


from vdla.hw.config import load_config
from vdla.sim.rtl import RtlSimulator, build_model
from vdla.sim.rtl.backend import DONE
from vdla.testing.programs.handbuilt import double_buffer_program

RESULTS = Path(__file__).resolve().parent / "results" / "rtl_speed.json"
TARGET = 1_000_000


def tile_shape(config) -> tuple[int, int, int]:
    """(m, n, k) of one tile: as large as half of each buffer allows, capped at 32x8x16."""
    m, n, k = 32, 8, 16
    while 2 * m * k > config.depth("inp") or 2 * m * n > config.depth("acc") \
            or n * k > config.depth("wgt"):
        m, n, k = max(1, m // 2), max(1, n // 2), max(1, k // 2)
    return m, n, k


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default", help="preset name or JSON file")
    parser.add_argument("--tiles", type=int, default=1000, help="GEMM tiles in the program")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (best is reported)")
    parser.add_argument("--json", action="store_true", help="print the JSON report only")
    parser.add_argument("--no-write", action="store_true", help="do not write results/")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    say = (lambda *a: None) if args.json else print

    started = time.perf_counter()
    build = build_model(config, progress=lambda line: say(line + " ..."))
    build_seconds = time.perf_counter() - started
    cached_started = time.perf_counter()
    build_model(config)
    lookup_seconds = time.perf_counter() - cached_started
    say(f"model: {'cached' if build.cached else 'cold build'} in {build_seconds:.1f} s "
        f"(cached lookup {lookup_seconds * 1000:.0f} ms)")

    m, n, k = tile_shape(config)
    program = double_buffer_program(config, tiles=args.tiles, m=m, n=n, k=k)
    say(f"program: {args.tiles} tiles of {m}x{n}x{k} blocks, {program.insn_count} instructions, "
        f"{program.dram.size / 2**20:.1f} MiB DRAM")
    simulator = RtlSimulator(config, build=build)
    runs = []
    for _ in range(args.repeat):
        dram = program.dram.copy()
        # Time the native run alone, then the whole backend call (copies, checks, result).
        model = simulator.model
        model.load_dram(dram)
        began, began_cpu = time.perf_counter(), time.process_time()
        status = model.run(program.insn_offset, program.insn_count, 1 << 40)
        native = time.perf_counter() - began
        native_cpu = time.process_time() - began_cpu
        assert status == DONE, f"the program did not finish (status {status})"
        began = time.perf_counter()
        result = simulator.run(dram, program.insn_offset, program.insn_count)
        whole = time.perf_counter() - began
        np.testing.assert_array_equal(program.out_bytes(dram), program.expected_out)
        runs.append({"cycles": result.cycles, "native_seconds": round(native, 4),
                     "native_cpu_seconds": round(native_cpu, 4),
                     "backend_seconds": round(whole, 4),
                     "cycles_per_second": round(result.cycles / native),
                     "cycles_per_cpu_second": round(result.cycles / native_cpu)})
        say(f"  {result.cycles:,} cycles in {native:.3f} s native "
            f"({result.cycles / native / 1e6:.2f} M cycles/s wall, "
            f"{result.cycles / native_cpu / 1e6:.2f} M per CPU second), "
            f"{whole:.3f} s through the backend")
    best = max(runs, key=lambda r: r["cycles_per_second"])
    report = {
        "benchmark": "rtl_speed",
        "config": config.name, "config_hash": config.hash,
        "shape": f"{config.batch}x{config.block_in}x{config.block_out}",
        "program": {"kind": "double_buffer_gemm", "tiles": args.tiles, "tile_mnk": [m, n, k],
                    "instructions": program.insn_count, "dram_bytes": int(program.dram.size)},
        "cycles": best["cycles"],
        "cycles_per_second": best["cycles_per_second"],
        "cycles_per_cpu_second": max(r["cycles_per_cpu_second"] for r in runs),
        "opt_fast": build.manifest.get("opt_fast"),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "target_cycles_per_second": TARGET,
        "meets_target": best["cycles_per_second"] >= TARGET,
        "gemm_utilization": round(result.details["gemm_uops_per_cycle"], 4),
        "modules": result.details["modules"],
        "runs": runs,
        "build": {"cached": build.cached, "seconds": round(build_seconds, 2),
                  "cached_lookup_seconds": round(lookup_seconds, 3), "key": build.key},
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or
                    platform.machine(), "cpus": os.cpu_count()},
        "command": "python benchmarks/rtl_speed.py " + " ".join(argv if argv is not None
                                                                else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    say(f"best: {best['cycles_per_second'] / 1e6:.2f} M cycles/s wall "
        f"({report['cycles_per_cpu_second'] / 1e6:.2f} M per CPU second) at config {config.name} "
        f"(target {TARGET / 1e6:.1f} M: {'met' if report['meets_target'] else 'NOT met'}); "
        f"GEMM utilization {report['gemm_utilization']:.1%}")
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
        say(f"wrote {RESULTS}")
    if args.json:
        print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
