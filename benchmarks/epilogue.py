"""GEMM-bound epilogues (issue 39): the accumulator reset on the GEMM unit, before and after.

Usage::

    python benchmarks/epilogue.py [--rtl LAYER ...] [--output FILE.json]

For ResNet-18's 1x1 stride-2 layers (C4, C7, C10 of `compiler.workloads.RESNET18`)
on ``default`` and ``ecpix5-256``, each compiled with the schedule the compiler
chooses for it, in two forms that differ only in the reset
(`compiler.accel.passes.gemm_reset`): ``alu_reset`` (an ALU pass zeroes each
tile's accumulators, as before GEMM_OVERWRITE) and ``gemm_reset`` (the tiles'
first GEMMs overwrite them). Per form: the cost model's estimated cycles
(`compiler.accel.cost.estimate`) and GEMM utilisation (ideal cycles, MACs over
the core's MACs per cycle, over cycles), the ALU and GEMM instructions, and
fsim bit-exact with the numpy reference; which form the compiler picks. ``--rtl``
also runs the named layers in both forms on each config's RTL (Verilator):
cycles, utilisation, outputs bit-exact.

Prints the figures and writes ``benchmarks/results/epilogue.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

from vdla.compiler.accel import codegen  # noqa: E402
from vdla.compiler.accel.cost import estimate, reset_on_gemm  # noqa: E402
from vdla.compiler.accel.driver import compile_function  # noqa: E402
from vdla.compiler.accel.lower import lower  # noqa: E402
from vdla.compiler.accel.pipeline import PassContext, run_pipeline  # noqa: E402
from vdla.compiler.ops import accelerator_limits  # noqa: E402
from vdla.compiler.workloads import RESNET18  # noqa: E402
from vdla.hw import isa  # noqa: E402
from vdla.hw.config import PRESETS  # noqa: E402
from vdla.ints import ceil_div  # noqa: E402
from vdla.runtime.runner import AccelRunner  # noqa: E402

CONFIGS = ("default", "ecpix5-256")
FORMS = {"alu_reset": False, "gemm_reset": True}


def pointwise_stride2() -> list:
    """ResNet-18's 1x1 stride-2 layers (the downsampling shortcuts)."""
    return [w for w in RESNET18 if w.op.kernel == (1, 1) and w.op.stride == (2, 2)]


def compile_form(op, config, plan, gemm_reset: bool):
    """``op`` under ``plan``'s schedule with the reset on the ALU or on the GEMMs."""
    geometry = accelerator_limits(op.geometry(), config)
    function = lower(plan.schedule.check(geometry, config), name=op.describe())
    function, _ = run_pipeline(function, PassContext(config, gemm_reset=gemm_reset))
    return codegen.generate(function, {"stats": function.stats})


def _instructions(program) -> dict:
    gemms = [i for i in program.instructions if isinstance(i, isa.Gemm)]
    alus = [i for i in program.instructions if isinstance(i, isa.Alu)]
    return {"gemm": len(gemms), "gemm_overwrite": sum(i.overwrite for i in gemms),
            "alu": len(alus), "alu_reset": sum(i.reset for i in alus)}


def layer_figures(workload, config, rtl: bool) -> dict:
    op = workload.op
    plan = compile_function(op, config).plan
    ideal = ceil_div(op.macs, config.macs_per_cycle)
    inputs = op.random_inputs(np.random.default_rng(0))
    expected = op.reference(**inputs)
    figures = {"layer": workload.name, "op": op.describe(), "ideal_cycles": ideal,
               "tile": plan.tile, "threads": plan.threads,
               "compiler_chooses": "gemm_reset" if reset_on_gemm(plan) else "alu_reset"}
    for form, gemm_reset in FORMS.items():
        program = compile_form(op, config, plan, gemm_reset)
        cycles = estimate(plan, gemm_reset=gemm_reset)[0]
        result = AccelRunner(config).run(program, inputs)
        entry = {"estimated_cycles": round(cycles),
                 "estimated_gemm_utilization": round(ideal / cycles, 4),
                 "instructions": _instructions(program),
                 "fsim_bit_exact": bool(np.array_equal(result.outputs["out"], expected))}
        if rtl:
            started = time.perf_counter()
            measured = AccelRunner(config, sim="rtl").run(program, inputs)
            entry.update(rtl_cycles=int(measured.cycles),
                         rtl_gemm_utilization=round(ideal / measured.cycles, 4),
                         rtl_bit_exact=bool(np.array_equal(measured.outputs["out"], expected)),
                         rtl_seconds=round(time.perf_counter() - started, 1))
        figures[form] = entry
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rtl", nargs="*", default=[], metavar="LAYER",
                        help="also run these layers (e.g. C10) in both forms on the RTL")
    parser.add_argument("--output", type=Path, default=RESULTS / "epilogue.json")
    args = parser.parse_args(argv)
    layers = pointwise_stride2()
    unknown = sorted(set(args.rtl) - {w.name for w in layers})
    if unknown:
        print(f"Error: --rtl: {', '.join(unknown)} is not one of "
              f"{', '.join(w.name for w in layers)}", file=sys.stderr)
        return 2
    report = {"benchmark": "epilogue", "host": platform.machine(),
              "forms": {"alu_reset": "an ALU pass zeroes each tile's accumulators",
                        "gemm_reset": "the tiles' first GEMMs are GEMM_OVERWRITE"},
              "configs": {}}
    failed = False
    for name in CONFIGS:
        config = PRESETS[name]
        rows = []
        for workload in layers:
            figures = layer_figures(workload, config, workload.name in args.rtl)
            rows.append(figures)
            for form in FORMS:
                entry = figures[form]
                failed |= not entry["fsim_bit_exact"] or not entry.get("rtl_bit_exact", True)
                rtl = (f"  rtl {entry['rtl_cycles']:>8,} ({100 * entry['rtl_gemm_utilization']:.1f}%)"
                       if "rtl_cycles" in entry else "")
                print(f"{name:>10} {workload.name:>3} {form:>10}: estimated "
                      f"{entry['estimated_cycles']:>8,} "
                      f"({100 * entry['estimated_gemm_utilization']:.1f}% GEMM){rtl}", flush=True)
        report["configs"][name] = rows
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
