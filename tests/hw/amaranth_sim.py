"""Running an Amaranth block under the Amaranth simulator, for the block tests.

`run` clocks ``dut`` at 1 MHz, runs the testbenches (and background
processes such as a DRAM model) to completion or to ``deadline``
microseconds. `TINY`, `TINY_WIDE_BUS` and `TINY_PIPELINED` are the configs the
block tests share.
"""

from __future__ import annotations

from amaranth.sim import Simulator

from vdla.hw.config import PRESETS

__all__ = ["run", "TINY", "TINY_WIDE_BUS", "TINY_PIPELINED"]

TINY = PRESETS["tiny"]
# Tiny with a 64-bit bus: inp / uop / out elements (4 bytes) are narrower than a beat.
TINY_WIDE_BUS = TINY.replace(dram_bus_bits=64, name="tiny64")
# `tiny` with the switches that cut paths for a fast FPGA clock (`ulx3s` sets them): a
# two-cycle ALU, the GEMM's operand and adder-tree stages, registered selects and
# control, the registered load walk and load data path, registered heads of the fetch
# buffer and command queues.
TINY_PIPELINED = TINY.replace(two_cycle_alu=1, gemm_operand_stage=1, registered_load_walk=1,
                              registered_load_data=1, sequencer_gap=1, registered_dispatch=1,
                              registered_control=1, gemm_tree_stage=1, name="tiny-pipelined")


def run(dut, *testbenches, processes=(), deadline=None):
    sim = Simulator(dut)
    sim.add_clock(1e-6, if_exists=True)
    for testbench in testbenches:
        sim.add_testbench(testbench)
    for process in processes:
        sim.add_testbench(process, background=True)
    if deadline is None:
        sim.run()
    else:
        sim.run_until(deadline * 1e-6)
