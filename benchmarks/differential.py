"""Random programs on fsim vs the Verilator RTL, on any list of presets.

Usage::

    python benchmarks/differential.py             # 300 tiny, 100 default, 100 odd
    python benchmarks/differential.py --configs tiny=50,default=10 --first-seed 1000
    python benchmarks/differential.py \
        --configs tiny,default,odd,ecpix5,ulx3s,icebreaker,ecpix5-256 \
        --programs 10000 --jobs 2 --output benchmarks/results/differential_10k.json

``--configs`` names `hw.config.PRESETS` (each with its own timing switches: the
board presets run the variants they ship with), each ``name`` or ``name=count``;
``--programs`` is the count of a name without one. Every program
(`vdla.testing.programs.generate`) runs on fsim and on the "rtl" backend
(a third of them with 30 % random DRAM backpressure; a quarter with the
stress options: long bursts, deep loops, many tokens in flight; a quarter
"concurrent": mostly GEMM/ALU bursts with ``overlap`` wherever legal); final
DRAM images must be byte-equal. The rtl backend applies `sim.checker` to
every program before it runs, so each one also passes the verifier. The
report tallies mismatches (images differ) and errors (a tier failed) apart.
Programs use ALU REQUANT and ``overlap`` (``--no-requant`` / ``--no-overlap``
for RTL without them). Prints pass counts per config and writes
``benchmarks/results/differential.json`` with every failing seed and the
feature counts (REQUANT instructions, overlap flags,
overlap instructions that may run beside the other unit's).

Seeds start at ``--first-seed`` for every config, except that a config with the
same hardware as an earlier one in the list (``ecpix5`` is ``ulx3s``'s core on
a faster part: one `HwConfig.hash`) takes the seeds after that one's, so it adds
programs rather than repeating them. Chunks of the configs run interleaved, so a
run cut short has covered every config alike.
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
from vdla.sim.backends import get_backend
from vdla.testing.programs import GeneratorOptions, generate

STRESS = dict(actions=(30, 50), max_uops_per_insn=512, max_load_elements=200,
              eager_token_probability=0.4, max_pending_tokens=12)
CONCURRENT = dict(actions=(30, 50), max_uops_per_insn=256, overlap_probability=1.0,
                  burst_probability=0.9)
RESULTS = Path(__file__).resolve().parent / "results" / "differential.json"
# Programs per work unit of `run_configs`.
CHUNK = 100
# What a plain run covers: the switch-free shapes (``--configs`` adds the boards').
DEFAULT_CONFIGS = "tiny=300,default=100,odd=100"


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


def seed_plan(plan: list[tuple[HwConfig, int]], first_seed: int) -> list[tuple[HwConfig, int, int]]:
    """(config, count, first seed) per config: ``first_seed``, or the seed after the
    last one an earlier config of the same hardware (`HwConfig.hash`) takes."""
    next_seed: dict[str, int] = {}
    seeded = []
    for config, count in plan:
        start = next_seed.get(config.hash, first_seed)
        seeded.append((config, count, start))
        next_seed[config.hash] = start + count
    return seeded


def run_configs(plan: list[tuple[HwConfig, int]], first_seed: int, features: dict,
                jobs: int, on_progress=None) -> list[dict]:
    """`run_config` for every (config, count) in chunks of at most `CHUNK` seeds (the
    configs' chunks interleaved; seeds by `seed_plan`), run in ``jobs`` worker
    processes (``seconds`` then sums the workers' time).

    ``on_progress(reports)`` is called with the merged reports so far after
    every chunk, so a long run leaves its results behind as it goes.
    """
    from concurrent.futures import ProcessPoolExecutor, as_completed
    # Sorted by the offset in each config's seeds (stable): the configs take turns.
    chunks = sorted(((offset, config, seed + offset, min(CHUNK, count - offset))
                     for config, count, seed in seed_plan(plan, first_seed)
                     for offset in range(0, count, CHUNK)), key=lambda chunk: chunk[0])
    done: dict[str, list[dict]] = {config.name: [] for config, _ in plan}

    def merged() -> list[dict]:
        return [_merge(parts) for parts in done.values() if parts]

    with ProcessPoolExecutor(max(1, jobs)) as pool:
        futures = {pool.submit(run_config, config, size, seed, features): config
                   for _, config, seed, size in chunks}
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


def parse_configs(text: str, programs: int) -> list[tuple[HwConfig, int]]:
    """``--configs`` as (preset, count) pairs; ``programs`` for a name without a count."""
    plan = []
    for item in text.split(","):
        name, has_count, count = item.strip().partition("=")
        if name not in PRESETS:
            raise ValueError(f"--configs: no preset {name!r} (presets: {', '.join(PRESETS)})")
        if any(config.name == name for config, _ in plan):
            raise ValueError(f"--configs: {name} named twice")
        if has_count and not count.isdigit():
            raise ValueError(f"--configs: {item.strip()!r}: expected NAME=COUNT with a count "
                             "of 0 or more")
        plan.append((PRESETS[name], int(count) if has_count else programs))
    if programs < 0:
        raise ValueError(f"--programs: expected 0 or more, got {programs}")
    return plan


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default=DEFAULT_CONFIGS,
                        help="comma-separated presets, each NAME or NAME=COUNT "
                             f"(default {DEFAULT_CONFIGS})")
    parser.add_argument("--programs", type=int, default=100,
                        help="programs per preset named without a count")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1,
                        help="worker processes (the seeds run in chunks of CHUNK programs)")
    parser.add_argument("--no-requant", action="store_true",
                        help="no ALU REQUANT (for RTL without it)")
    parser.add_argument("--no-overlap", action="store_true",
                        help="no overlap flags (for RTL that runs compute in order)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    try:
        plan = [(config, count) for config, count in parse_configs(args.configs, args.programs)
                if count > 0]
    except ValueError as error:
        parser.error(str(error))
    features = {"requant": not args.no_requant, "overlap": not args.no_overlap}
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
        print(f"{report['config']:10s} {report['passed']:5d}/{report['programs']} passed  "
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
