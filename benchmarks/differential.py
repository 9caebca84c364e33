"""Hundreds of random programs on fsim vs the Verilator RTL, per config.

Usage::

    python benchmarks/differential.py                 # 300 tiny, 100 default, 100 odd
    python benchmarks/differential.py --tiny 50 --default 10 --odd 0 --first-seed 1000
    python benchmarks/differential.py --programs 10000 --jobs 8 \
        --output benchmarks/results/differential_10k.json   # 6000 tiny, 2000 default, 2000 odd

Every program (`vdla.sim.programs.generate`) runs on fsim and on the "rtl" backend
(a third of them with 30 % random DRAM backpressure; a quarter with the
stress options: long bursts, deep loops, many tokens in flight; a quarter
"concurrent": mostly GEMM/ALU bursts with ``overlap`` wherever legal); final
DRAM images must be byte-equal. The rtl backend applies `sim.checker` to
every program before it runs, so each one also passes the verifier. The
report tallies mismatches (images differ) and errors (a tier failed) apart. Programs use ALU REQUANT and ``overlap``
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
# Programs per work unit of `run_configs`.
CHUNK = 100


def _style(seed: int) -> str:
    return {3: "stress", 1: "concurrent"}.get(seed % 4, "base")


def _merge(parts: list[dict]) -> dict:
    """One config's report from the reports of its seed chunks."""
    merged = dict(parts[0])
    for part in parts[1:]:
        for key, value in part.items():
            if key == "failures":
                merged[key] = merged[key] + value
            elif key in ("seconds", "build_seconds", "fsim_seconds", "rtl_seconds"):
                merged[key] = round(merged[key] + value, 2)
            elif isinstance(value, int) and key not in ("first_seed",):
                merged[key] += value
    merged["first_seed"] = min(part["first_seed"] for part in parts)
    return merged


def run_configs(plan: list[tuple[HwConfig, int]], first_seed: int, features: dict,
                jobs: int, on_progress=None) -> list[dict]:
    """`run_config` for every (config, count) in chunks of at most `CHUNK` seeds, run
    in ``jobs`` worker processes (``seconds`` then sums the workers' time).

    ``on_progress(reports)`` is called with the merged reports so far after
    every chunk, so a long run leaves its results behind as it goes.
    """
    from concurrent.futures import ProcessPoolExecutor, as_completed
    chunks = [(config, start, min(CHUNK, count - start)) for config, count in plan
              for start in range(0, count, CHUNK)]
    done: dict[str, list[dict]] = {config.name: [] for config, _ in plan}

    def merged() -> list[dict]:
        return [_merge(parts) for parts in done.values() if parts]

    with ProcessPoolExecutor(max(1, jobs)) as pool:
        futures = {pool.submit(run_config, config, size, first_seed + start, features): config
                   for config, start, size in chunks}
        for future in as_completed(futures):
            done[futures[future].name].append(future.result())
            if on_progress is not None:
                on_progress(merged())
    return merged()


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
            # check=False: fsim has just applied the same rules (sim.checker) to
            # this program and accepted it; checking twice would only cost time.
            rtls[backpressure] = get_backend("rtl", config, backpressure=backpressure,
                                             check=False)
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
            "mismatches": sum("difference" in f for f in failures),
            "errors": sum("error" in f for f in failures),
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
    parser.add_argument("--programs", type=int, default=None,
                        help="total programs, split 3:1:1 over tiny, default and odd "
                             "(overrides --tiny/--default/--odd)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1,
                        help="worker processes (the seeds run in chunks of CHUNK programs)")
    parser.add_argument("--no-requant", action="store_true",
                        help="no ALU REQUANT (for RTL without it)")
    parser.add_argument("--no-overlap", action="store_true",
                        help="no overlap flags (for RTL that runs compute in order)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.programs is not None:
        args.default = args.odd = args.programs // 5
        args.tiny = args.programs - args.default - args.odd
    features = {"requant": not args.no_requant, "overlap": not args.no_overlap}
    plan = [(config, count) for config, count in ((PRESETS["tiny"], args.tiny),
                                                  (PRESETS["default"], args.default),
                                                  (ODD, args.odd)) if count > 0]
    # Build each model once, before workers race to build it.
    for config, _ in plan:
        for backpressure in (0, 30):
            get_backend("rtl", config, backpressure=backpressure, check=False)
    planned = sum(count for _, count in plan)

    def write(reports: list[dict]) -> tuple[int, int]:
        total = sum(r["programs"] for r in reports)
        passed = sum(r["passed"] for r in reports)
        mismatches = sum(r["mismatches"] for r in reports)
        errors = sum(r["errors"] for r in reports)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({
            "benchmark": "differential fsim vs rtl on random programs",
            "command": "python benchmarks/differential.py " + " ".join(argv or sys.argv[1:]),
            "machine": platform.platform(), "python": platform.python_version(),
            "features": features, "complete": total == planned,
            "total": total, "passed": passed, "mismatches": mismatches, "errors": errors,
            "configs": reports}, indent=2) + "\n")
        print(f"  {total}/{planned} programs run: {passed} passed, {mismatches} mismatches, "
              f"{errors} errors", flush=True)
        return total, passed

    reports = run_configs(plan, args.first_seed, features, args.jobs, on_progress=write)
    for report in reports:
        print(f"{report['config']:8s} {report['passed']:4d}/{report['programs']} passed  "
              f"({report['instructions']} instructions, {report['rtl_cycles']} RTL cycles, "
              f"{report['requant_instructions']} REQUANT, {report['overlap_instructions']} "
              f"overlap, {report['concurrent_overlaps']} beside the other unit; "
              f"{report['seconds']} s of which build {report['build_seconds']} s)", flush=True)
        for failure in report["failures"][:10]:
            print(f"  FAIL seed {failure['seed']} ({failure['style']}, "
                  f"backpressure={failure['backpressure']}%): "
                  f"{failure.get('error') or failure.get('difference')}", flush=True)
    total, passed = write(reports)
    print(f"wrote {args.output}")
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
