"""Hundreds of random programs on fsim vs the Verilator RTL, per config.

Usage::

    python benchmarks/differential.py                 # 300 tiny, 100 default, 100 odd
    python benchmarks/differential.py --tiny 50 --default 10 --odd 0 --first-seed 1000

Every program (`vdla.sim.programs.generate`) runs on fsim and on the "rtl" backend
(a third of them with 30 % random DRAM backpressure; a quarter with the
stress options: long bursts, deep loops, many tokens in flight; a quarter
"concurrent": mostly GEMM/ALU bursts with ``overlap`` wherever legal); final
DRAM images must be byte-equal. Programs use ALU REQUANT and ``overlap``
(``--no-requant`` / ``--no-overlap`` for RTL without them). Prints pass counts
per config and writes ``benchmarks/results/differential.json`` with every
failing seed and the feature counts (REQUANT instructions, overlap flags,
overlap instructions that may run beside the other unit's).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np


from vdla.hw.config import PRESETS, HwConfig
from vdla.hw.isa import Alu, AluOp, Gemm
from vdla.sim.backend import get_backend
from vdla.sim.programs import GeneratorOptions, generate

ODD = PRESETS["odd"]
STRESS = dict(actions=(30, 50), max_uops_per_insn=512, max_load_elements=200,
              eager_token_probability=0.4, max_pending_tokens=12)
CONCURRENT = dict(actions=(30, 50), max_uops_per_insn=256, overlap_probability=1.0,
                  burst_probability=0.9)
RESULTS = Path(__file__).resolve().parent / "results" / "differential.json"


def _style(seed: int) -> str:
    return {3: "stress", 1: "concurrent"}.get(seed % 4, "base")


def run_config(config: HwConfig, count: int, first_seed: int, features: dict) -> dict:
    started = time.perf_counter()
    options = {"base": GeneratorOptions(**features),
               "stress": GeneratorOptions(**features, **STRESS),
               "concurrent": GeneratorOptions(**features, **CONCURRENT)}
    used = {"requant_instructions": 0, "overlap_instructions": 0, "concurrent_overlaps": 0}
    fsim = get_backend("fsim", config)
    rtls = {}
    build_seconds = None
    passed, failures = 0, []
    fsim_seconds = rtl_seconds = 0.0
    cycles = instructions = 0
    for seed in range(first_seed, first_seed + count):
        style = _style(seed)
        backpressure = 30 if seed % 3 == 2 else 0
        program = generate(config, seed, options[style])
        used["requant_instructions"] += sum(isinstance(i, Alu) and i.alu_op == AluOp.REQUANT
                                            for i in program.instructions)
        used["overlap_instructions"] += sum(isinstance(i, (Gemm, Alu)) and i.overlap
                                            for i in program.instructions)
        used["concurrent_overlaps"] += program.summary["concurrent_overlaps"]
        t0 = time.perf_counter()
        expected, _ = program.run(fsim)
        fsim_seconds += time.perf_counter() - t0
        if backpressure not in rtls:
            t0 = time.perf_counter()
            rtls[backpressure] = get_backend("rtl", config, backpressure=backpressure)
            build_seconds = (build_seconds or 0.0) + time.perf_counter() - t0
        t0 = time.perf_counter()
        try:
            actual, result = program.run(rtls[backpressure])
        except Exception as error:  # a hang or model error is a failure, not a crash
            failures.append({"seed": seed, "style": style, "backpressure": backpressure,
                             "error": f"{type(error).__name__}: {error}"[:2000]})
            continue
        finally:
            rtl_seconds += time.perf_counter() - t0
        cycles += result.cycles or 0
        instructions += program.insn_count
        if np.array_equal(expected, actual):
            passed += 1
        else:
            failures.append({"seed": seed, "style": style, "backpressure": backpressure,
                             "difference": program.describe_difference(expected, actual)})
    return {"config": config.name, "config_hash": config.hash, "programs": count,
            "first_seed": first_seed, "passed": passed, "failed": len(failures),
            "failures": failures, "instructions": instructions, "rtl_cycles": cycles,
            "features": dict(features), **used,
            "seconds": round(time.perf_counter() - started, 2),
            "build_seconds": round(build_seconds or 0.0, 2),
            "fsim_seconds": round(fsim_seconds, 2), "rtl_seconds": round(rtl_seconds, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", type=int, default=300, help="programs at tiny")
    parser.add_argument("--default", type=int, default=100, help="programs at default")
    parser.add_argument("--odd", type=int, default=100,
                        help="programs at an odd shape (128-bit bus, batch 2, depth-2 queues)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--no-requant", action="store_true",
                        help="no ALU REQUANT (for RTL without it)")
    parser.add_argument("--no-overlap", action="store_true",
                        help="no overlap flags (for RTL that runs compute in order)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    features = {"requant": not args.no_requant, "overlap": not args.no_overlap}
    reports = []
    for config, count in ((PRESETS["tiny"], args.tiny), (PRESETS["default"], args.default),
                          (ODD, args.odd)):
        if count <= 0:
            continue
        report = run_config(config, count, args.first_seed, features)
        reports.append(report)
        print(f"{report['config']:8s} {report['passed']:4d}/{report['programs']} passed  "
              f"({report['instructions']} instructions, {report['rtl_cycles']} RTL cycles, "
              f"{report['requant_instructions']} REQUANT, {report['overlap_instructions']} "
              f"overlap, {report['concurrent_overlaps']} beside the other unit; "
              f"{report['seconds']} s of which build {report['build_seconds']} s)", flush=True)
        for failure in report["failures"][:10]:
            print(f"  FAIL seed {failure['seed']} ({failure['style']}, "
                  f"backpressure={failure['backpressure']}%): "
                  f"{failure.get('error') or failure.get('difference')}", flush=True)
    total = sum(r["programs"] for r in reports)
    passed = sum(r["passed"] for r in reports)
    print(f"total    {passed:4d}/{total} passed")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "benchmark": "differential fsim vs rtl on random programs",
        "command": "python benchmarks/differential.py " + " ".join(argv or sys.argv[1:]),
        "machine": platform.platform(), "python": platform.python_version(),
        "features": features,
        "total": total, "passed": passed, "configs": reports}, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
