"""A ResNet-18 layer on the simulated board top with its DRAM behind LiteDRAM.

Runs ``--layer`` (default C2) of ResNet-18 on ``--sim board-sim`` with the
board's memory replaced by the LiteDRAM controller and DRAM module model of
``--memory`` (`hw.boards.litedram_gen.MODULES`: ``litedram-sdram``, the default, the
ULX3S's MT48LC16M16 SDRAM at 50 MHz; ``litedram-ddr3``, the ECPIX-5's
MT41K256M16 DDR3 behind the ECP5 DDR3 PHY's settings at 80 MHz), compiled for
``--config`` (default: the preset of that DRAM's board, ``ulx3s`` or
``ecpix5``), checks its output bit-exactly against the functional
simulator's and numpy's, and reports its cycles beside those of the RTL tier
(the same accelerator on the idealised DRAM of ``sim/rtl/harness.cpp``). The
cycles are the accelerator's own counter (start to done), not the UART
transfers around it.

Usage::

    python benchmarks/board_litedram.py [--memory litedram-ddr3] [--layer C2] [--config ecpix5]

Prints the figures and writes them into ``benchmarks/results/board_litedram.json``
under the memory kind's name, followed by the config's where that is not the
board's preset and the layer's where that is not C2 (the other records are kept).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from vdla.compiler import compile_op
from vdla.compiler.workloads import resnet18_layer
from vdla.hw.boards.table import BOARDS
from vdla.hw.config import PRESETS
from vdla.hw.boards.litedram_gen import MODULES
from vdla.runtime.runner import AccelRunner

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", default="C2")
    parser.add_argument("--config", default=None, choices=sorted(PRESETS),
                        help="default: the preset of the DRAM's board")
    parser.add_argument("--memory", default="litedram-sdram", choices=sorted(MODULES))
    parser.add_argument("--clocks-per-bit", type=int, default=4)
    parser.add_argument("--skip-rtl", action="store_true", help="no RTL-tier comparison")
    args = parser.parse_args()

    dram = MODULES[args.memory]
    args.config = args.config or BOARDS[dram.board].preset
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
              "dram": dram.module, "dram_type": dram.memtype, "rate": dram.rate,
              "phy": dram.phy or "model", "clock_mhz": dram.clock_hz / 1e6,
              "dram_bytes": program.dram_bytes, "bit_exact": True,
              "board_sim_cycles": board.cycles, "board_sim_seconds": round(board_seconds, 1)}
    if not args.skip_rtl:
        rtl = AccelRunner(config, sim="rtl").run(program, inputs)
        np.testing.assert_array_equal(rtl.outputs["out"], expected)
        record["rtl_cycles"] = rtl.cycles
        record["board_over_rtl"] = round(board.cycles / rtl.cycles, 3)
    record["ms_at_clock"] = round(board.cycles / (record["clock_mhz"] * 1e3), 3)
    record["date"] = time.strftime("%Y-%m-%d", time.gmtime())
    # A record per memory kind for C2 on its board's preset; the config and the layer
    # join the key where they are others.
    key = args.memory
    if args.config != BOARDS[dram.board].preset:
        key += f" {args.config}"
    if args.layer != "C2":
        key += f" {args.layer}"
    save_record("board_litedram.json", key, record)


def save_record(filename: str, key: str, record: dict) -> None:
    """Print ``record`` and store it under ``key`` in ``benchmarks/results/FILENAME``,
    keeping the file's other keys (one record per memory kind)."""
    for name, value in record.items():
        print(f"{name}: {value}")
    out = ROOT / "benchmarks" / "results" / filename
    records = json.loads(out.read_text()) if out.exists() else {}
    records[key] = record
    out.write_text(json.dumps(records, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
