"""A board's bitstream, built as ``vdla hw bitstream`` builds it, with its figures.

Builds ``--board``'s bitstream (default ``ecpix5-85f``: the ECPIX-5's board top
with its DDR3 through LiteDRAM's controller and ECP5 PHY) at its clock, once
per ``--seeds`` (nextpnr's placement seed), and records for each: whether it
met the clock (nextpnr refuses a design that does not, and the record then
says so), the routed Fmax of each clock, nextpnr's device utilisation, the
bitstream's size and the build's wall time.

Usage::

    python benchmarks/bitstream.py [--board ecpix5-85f] [--seeds default,1,2]

Prints the figures and writes them into ``benchmarks/results/bitstream.json``
under ``<board> seed <n>`` (other records are kept). ``default`` is nextpnr's
own seed, the one ``vdla hw bitstream`` uses without ``--seed``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from vdla.hw.boards.table import BOARDS
from vdla.hw.boards.bitstream import build_bitstream
from vdla.hw.synth import SynthError

from board_litedram import save_record  # benchmarks/, the script's own folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="ecpix5-85f", choices=sorted(BOARDS))
    parser.add_argument("--seeds", default="default",
                        help="comma-separated nextpnr seeds ('default': nextpnr's own)")
    args = parser.parse_args()
    board = BOARDS[args.board]
    for text in args.seeds.split(","):
        seed = None if text == "default" else int(text)
        record = {"board": board.name, "config": board.preset, "device": board.device,
                  "memory": board.dram or f"{board.memory_kind} ({board.memory_bytes} B on chip)",
                  "clock_mhz": board.clock_mhz, "seed": seed}
        began = time.monotonic()
        with tempfile.TemporaryDirectory() as folder:
            try:
                report = build_bitstream(board, Path(folder) / "top.bit", seed=seed)
            except SynthError as error:   # e.g. the clock missed: a figure, not a crash
                record.update(met=False, error=str(error).splitlines()[0],
                              seconds=round(time.monotonic() - began, 1))
            else:
                record.update(met=True, bytes=report.bytes, fmax_by_clock=report.fmax_by_clock,
                              utilization=report.utilization, seconds=report.seconds)
        record["date"] = time.strftime("%Y-%m-%d", time.gmtime())
        save_record("bitstream.json", f"{board.name} seed {text}", record)


if __name__ == "__main__":
    main()
