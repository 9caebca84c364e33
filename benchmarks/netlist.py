"""The synthesised netlists against the RTL, per shipped preset on its FPGA family.

Usage::

    python benchmarks/netlist.py                 # every preset, GEMM core and whole core
    python benchmarks/netlist.py --configs icebreaker --programs 20
    python benchmarks/netlist.py --chip-configs  # GEMM core miters only
    python benchmarks/netlist.py --configs ecpix5-256 --cycles 0 --chip-configs ecpix5-256 --jobs 2

For each preset x family (`PLAN`: ``icebreaker`` on iCE40, the others on
ECP5) the netlist Yosys writes after technology mapping (`hw.synth.netlist`,
the flow `vdla hw synth` and `vdla hw bitstream` use) is simulated with
Yosys's cell models (`sim.gate`) in two ways:

- the GEMM core alone against its RTL in one Verilator miter, ``--cycles``
  cycles of random operands (`sim.gate.gemm_core_check`);
- the whole accelerator core, under the RTL tier's harness: ``--programs``
  random programs (`testing.programs.generate`, every third with 30 % DRAM
  backpressure) whose final DRAM images must equal fsim's, and one compiled
  conv layer whose output must equal numpy's and fsim's (`bench.layer_run.run_layer`).

ECP5 block RAM (``DP16KD``) runs on vdla's model of it (sim/ecp5_dp16kd.v).
The whole-core run is for the presets in ``--chip-configs`` (default: all;
``default``'s 256 multipliers and 41,000 LUTs take Yosys about 4 min of CPU
and Verilator about 7 min to build, its 100 programs about 23 min in 2
processes). Prints one line per preset
and writes ``benchmarks/results/netlist.json`` (the core netlist's cells,
synthesis and Verilator build times, mismatch counts, failing seeds), keeping
the rows of presets not named in ``--configs``. ``--jobs`` runs a preset's
programs in that many worker processes; the row is written after every 10
programs (``complete`` false until the last), so a run stopped early leaves
what it checked.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from vdla.hw.config import PRESETS
from vdla.sim.backends import get_backend
from vdla.testing.programs import generate

RESULTS = Path(__file__).resolve().parent / "results" / "netlist.json"
# Every shipped preset on the family it ships for (a board's preset on its board's,
# `hw.boards.table.BOARDS`; `default` and `tiny` on ECP5), smallest netlist first.
PLAN = (("icebreaker", "ice40"), ("tiny", "ecp5"), ("ecpix5", "ecp5"), ("ulx3s", "ecp5"),
        ("ecpix5-256", "ecp5"), ("default", "ecp5"))
# The presets that ship for no FPGA, and why (tests/test_benchmarks.py: every other preset
# of `hw.config.PRESETS` is in `PLAN`, so that a new preset is not left unchecked).
NOT_SHIPPED = {"odd": "a lopsided shape for verification (batch 2, 8x4 block), on no board"}


def conv_workload():
    """One small conv layer (3x3, bias, shift, ReLU), compiled for every preset."""
    from vdla.compiler import Conv2d
    from vdla.compiler.workloads import Workload
    return Workload("conv3x3", Conv2d(1, 8, 12, 7, 7, kernel=3, stride=2, padding=1, bias=True,
                                      shift=6, relu=True), 1)


# Programs per task of the worker processes (``--jobs``); progress is printed per task.
CHUNK = 10
# One worker process's gate-level and fsim backends, made at its first task.
_BACKENDS: dict = {}


def run_programs(config, build, seeds) -> tuple[list[dict], int]:
    """Random programs ``seeds`` on the gate-level model ``build`` against fsim: (failures,
    cycles on the gates); every third seed with 30 % DRAM backpressure."""
    if _BACKENDS.get("key") != (config.hash, build.key):
        _BACKENDS.clear()
        _BACKENDS.update(key=(config.hash, build.key), fsim=get_backend("fsim", config), gates={
            pressure: get_backend("rtl", config, build=build, backpressure=pressure, check=False)
            for pressure in (0, 30)})
    failures, cycles = [], 0
    for seed in seeds:
        program = generate(config, seed)
        expected, _ = program.run(_BACKENDS["fsim"])
        try:
            actual, result = program.run(_BACKENDS["gates"][30 if seed % 3 == 2 else 0])
        except Exception as error:  # a hang on the gates is a failure, not a crash
            failures.append({"seed": seed, "error": f"{type(error).__name__}: {error}"[:500]})
            continue
        cycles += result.cycles or 0
        if not np.array_equal(expected, actual):
            failures.append({"seed": seed,
                             "difference": program.describe_difference(expected, actual)})
    return failures, cycles


def run_all(config, build, seeds: range, jobs: int = 1,
            on_progress=None) -> tuple[list[dict], int]:
    """`run_programs` of ``seeds`` in tasks of `CHUNK` seeds, in ``jobs`` worker processes
    (in this one when 1): (failures by seed, cycles on the gates). After each task a line
    to stderr and ``on_progress(failures, cycles, programs run)``."""
    from concurrent.futures import ProcessPoolExecutor
    chunks = [seeds[start:start + CHUNK] for start in range(0, len(seeds), CHUNK)]
    failures, cycles, run = [], 0, 0
    with ProcessPoolExecutor(jobs) if jobs > 1 else contextlib.nullcontext() as pool:
        results = (pool.map(run_programs, [config] * len(chunks), [build] * len(chunks), chunks)
                   if pool else (run_programs(config, build, chunk) for chunk in chunks))
        for chunk, (chunk_failures, chunk_cycles) in zip(chunks, results):
            failures += chunk_failures
            cycles += chunk_cycles
            run += len(chunk)
            print(f"  {config.name}: {run} programs run on the gates, {len(failures)} failed",
                  file=sys.stderr, flush=True)
            if on_progress:
                on_progress(failures, cycles, run)
    return failures, cycles


def check_chip(config, target: str, programs: int, first_seed: int, jobs: int = 1,
               on_progress=None) -> dict:
    """Random programs and a conv layer on the core's gate-level model, against fsim; the
    programs in ``jobs`` worker processes (``run_seconds`` is then wall clock).
    ``on_progress`` is called with the report so far (``complete`` False) after every
    `CHUNK` programs, so that a run stopped early leaves what it checked."""
    from vdla.bench.layer_run import run_layer
    from vdla.hw.synth import core_netlist
    from vdla.sim.gate import GATE_OPT_FAST, cell_counts, gate_model
    began = time.perf_counter()
    netlist = core_netlist(config, target)
    synth_seconds = time.perf_counter() - began
    began = time.perf_counter()
    build = gate_model(config, target)
    build_seconds = time.perf_counter() - began
    began = time.perf_counter()

    def report(failures, cycles, run, complete=False) -> dict:
        return {"netlist_bytes": len(netlist), "cells": cell_counts(netlist),
                "synth_seconds": round(synth_seconds, 1), "build_seconds": round(build_seconds, 1),
                "build_cached": build.cached,
                "cold_build_seconds": build.manifest.get("build_seconds"),
                "opt_fast": GATE_OPT_FAST, "programs": programs, "first_seed": first_seed,
                "jobs": jobs, "complete": complete, "programs_run": run,
                "passed": run - len(failures), "failures": failures, "gate_cycles": cycles,
                "run_seconds": round(time.perf_counter() - began, 1)}
    failures, cycles = run_all(config, build, range(first_seed, first_seed + programs), jobs,
                               on_progress and (lambda *state: on_progress(report(*state))))
    done = report(failures, cycles, programs, complete=True)
    layer = run_layer(conv_workload(), config, "rtl", backend_options={"build": build})
    reference = run_layer(conv_workload(), config, "fsim")
    return {**done, "conv": {"op": layer.op, "correct": layer.correct,
                             "fsim_correct": reference.correct, "cycles": layer.cycles,
                             "error": layer.error}}


def _equal(report: dict) -> bool:
    chip = report.get("chip")
    gemm = report.get("gemm")
    return (gemm is None or gemm["mismatches"] == 0) and (chip is None or (
        chip.get("complete", True) and chip["passed"] == chip["programs"]
        and chip["conv"]["correct"]))


def _rows(path: Path) -> list[dict]:
    return json.loads(path.read_text())["configs"] if path.exists() else []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=[name for name, _ in PLAN],
                        choices=[name for name, _ in PLAN])
    parser.add_argument("--programs", type=int, default=100, help="random programs per preset")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1,
                        help="worker processes running a preset's programs on its gates")
    parser.add_argument("--cycles", type=int, default=1_000_000,
                        help="random cycles of the GEMM core miter (0: keep the results file's)")
    parser.add_argument("--chip-configs", nargs="*", default=[name for name, _ in PLAN],
                        help="presets whose whole core also runs programs on its netlist")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    from vdla.sim.gate import GateError, gemm_core_check
    command = "python benchmarks/netlist.py " + " ".join(argv or sys.argv[1:])
    ok, reports = True, []

    def kept(row: dict, rows: list[dict]) -> dict:
        """``row`` with the parts this run did not check (the miter with ``--cycles 0``, the
        whole core of a preset not in ``--chip-configs``) as ``rows`` (the results file now)
        have them, each with the command that checked it."""
        current = next((old for old in rows if old["config"] == row["config"]), {})
        row = dict(row)
        for part, skipped in (("gemm", args.cycles == 0),
                              ("chip", row["config"] not in args.chip_configs)):
            if skipped and current.get(part):
                row[part] = {"command": current.get("command"), **current[part]}
        return row

    def save(rows_now: list[dict]) -> None:
        # Read again: another run may have written rows meanwhile, other presets' or the
        # parts of this run's presets that it does not check.
        rows = _rows(args.output)
        rows_now = [kept(row, rows) for row in rows_now]
        done = {row["config"] for row in rows_now}
        rows = [row for row in rows if row["config"] not in done] + rows_now
        rows.sort(key=lambda row: [plan for plan, _ in PLAN].index(row["config"]))
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({
            "benchmark": "synthesised netlists (Yosys cell models, Verilator) vs RTL and fsim",
            "machine": platform.platform(), "python": platform.python_version(),
            "all_equal": all(_equal(row) for row in rows), "configs": rows}, indent=2) + "\n")
    for name, target in PLAN:
        if name not in args.configs:
            continue
        config = PRESETS[name]
        earlier = next((row for row in _rows(args.output) if row["config"] == name), {})
        if args.cycles == 0:   # the miter's last run, if any (`kept`, again when writing)
            gemm = earlier.get("gemm") and {"command": earlier.get("command"), **earlier["gemm"]}
        else:
            check = gemm_core_check(config, target, cycles=args.cycles)
            gemm = {"cycles": check.cycles, "mismatches": check.mismatches,
                    "first_mismatch": check.first_mismatch, "seconds": check.seconds}
        report = {"config": name, "target": target, "command": command, "gemm": gemm}
        line = (f"{name:10s} {target}: GEMM core " + (
            f"{gemm['mismatches']} mismatches in {gemm['cycles']} cycles" if gemm
            else "miter not run"))
        chip = None
        if name in args.chip_configs:
            try:
                chip = check_chip(config, target, args.programs, args.first_seed, args.jobs,
                                  lambda partial, row=report: save(reports + [{**row,
                                                                               "chip": partial}]))
            except GateError as error:   # a netlist the cell models cannot simulate
                report["chip_refused"] = str(error)
                line += f"; core netlist not simulated: {error}"
        if chip is not None:
            report["chip"] = chip
            line += (f"; core netlist {chip['passed']}/{chip['programs']} programs equal fsim "
                     f"({chip['gate_cycles']} cycles), conv layer "
                     f"{'correct' if chip['conv']['correct'] else 'WRONG'}; synth "
                     f"{chip['synth_seconds']} s, Verilator build {chip['build_seconds']} s, "
                     f"run {chip['run_seconds']} s")
        print(line, flush=True)
        ok &= _equal(report)
        reports.append(report)
        save(reports)
    print(f"wrote {args.output}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
