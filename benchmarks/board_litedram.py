"""A ResNet-18 layer on the simulated board top with its DRAM behind LiteDRAM.

Runs ``--layer`` (default C2) of ResNet-18, compiled for ``--config`` (default
``ulx3s``), on ``--sim board-sim`` with the board's memory replaced by the
LiteDRAM controller and DRAM module model of ``--memory`` (default
``litedram-sdram``: the ULX3S's MT48LC16M16 SDRAM at 50 MHz,
`hw.litedram_gen.MODULES`), checks its output bit-exactly against the
functional simulator's and numpy's, and reports its cycles beside those of
the RTL tier (the same accelerator on the idealised DRAM of
``sim/rtl/harness.cpp``). The cycles are the accelerator's own counter (start
to done), not the UART transfers around it.

Usage::

    python benchmarks/board_litedram.py [--layer C2] [--config ulx3s] [--clocks-per-bit 4]

Prints the figures and writes ``benchmarks/results/board_litedram.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from vdla.compiler import compile_op
from vdla.compiler.workloads import resnet18_layer
from vdla.hw.config import PRESETS
from vdla.hw.litedram_gen import MODULES
from vdla.runtime.runner import AccelRunner

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", default="C2")
    parser.add_argument("--config", default="ulx3s", choices=sorted(PRESETS))
    parser.add_argument("--memory", default="litedram-sdram", choices=sorted(MODULES))
    parser.add_argument("--clocks-per-bit", type=int, default=4)
    parser.add_argument("--skip-rtl", action="store_true", help="no RTL-tier comparison")
    args = parser.parse_args()

    config = PRESETS[args.config]
    op = resnet18_layer(args.layer).op
    program = compile_op(op, config)
    inputs = op.random_inputs(np.random.default_rng(0))
    expected = op.reference(**inputs)

    start = time.perf_counter()
    board = AccelRunner(config, sim="board-sim", memory_kind=args.memory,
                   clocks_per_bit=args.clocks_per_bit).run(program, inputs)
    board_seconds = time.perf_counter() - start
    fsim = AccelRunner(config, sim="fsim").run(program, inputs)
    np.testing.assert_array_equal(board.outputs["out"], expected)
    np.testing.assert_array_equal(board.outputs["out"], fsim.outputs["out"])
    record = {"layer": args.layer, "config": args.config, "memory": args.memory,
              "dram": MODULES[args.memory].module, "clock_mhz": MODULES[args.memory].clock_hz / 1e6,
              "dram_bytes": program.dram_bytes, "bit_exact": True,
              "board_sim_cycles": board.cycles, "board_sim_seconds": round(board_seconds, 1)}
    if not args.skip_rtl:
        rtl = AccelRunner(config, sim="rtl").run(program, inputs)
        np.testing.assert_array_equal(rtl.outputs["out"], expected)
        record["rtl_cycles"] = rtl.cycles
        record["board_over_rtl"] = round(board.cycles / rtl.cycles, 3)
    record["ms_at_clock"] = round(board.cycles / (record["clock_mhz"] * 1e3), 3)
    for key, value in record.items():
        print(f"{key}: {value}")
    out = ROOT / "benchmarks" / "results" / "board_litedram.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
