"""Gate-level checks (`sim.gate`): Yosys's mapped netlists against the RTL.

The Yosys bug of docs/yosys-ice40-dsp-bug.md is the reference failure: its
reproducer, synthesised without the flow's fix, must be caught; with the fix
(`hw.synth.script_after_read`), it and the ``icebreaker`` GEMM core must equal
their RTL. The whole core's netlist runs random programs against fsim, on iCE40 and on
ECP5 (block RAM on vdla's DP16KD model, tests/sim/test_ecp5_dp16kd.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.config import PRESETS
from vdla.hw.gemm import PRODUCT
from vdla.hw.synth import block_netlist, block_verilog
from vdla.sim.gate import GateError, cell_models, check_block, gemm_core_check

pytestmark = pytest.mark.rtl


class Mini(wiring.Component):
    """docs/yosys-ice40-dsp-bug.md's reproducer: ``y <= p0 + p1`` of two registered products,
    their wires marked like `hw.gemm.GemmCore`'s when ``marked``."""

    def __init__(self, marked: bool):
        self.marked = marked
        super().__init__({"a0": In(8), "b0": In(8), "a1": In(8), "b1": In(8), "y": Out(17)})

    def elaborate(self, platform):
        m = Module()
        attrs = {PRODUCT: 1} if self.marked else {}
        p0 = Signal(signed(16), reset_less=True, attrs=attrs)
        p1 = Signal(signed(16), reset_less=True, attrs=attrs)
        y = Signal(signed(17), reset_less=True)   # as ``reg y`` in the Verilog: no reset
        m.d.sync += [p0.eq(self.a0.as_signed() * self.b0.as_signed()),
                     p1.eq(self.a1.as_signed() * self.b1.as_signed()), y.eq(p0 + p1)]
        m.d.comb += self.y.eq(y)
        return m


@pytest.mark.parametrize("marked", [False, True])
def test_the_yosys_ice40_dsp_reproducer(marked):
    """Unmarked, Yosys 0.70 drops a product and the check sees it; marked, the flow keeps
    the product wires and the netlist equals the RTL."""
    gate = block_netlist(Mini(marked), "mini_gate", "ice40")
    result = check_block(block_verilog(Mini(marked), "mini_rtl"), "mini_rtl", gate, "mini_gate",
                         "ice40", cycles=20_000)
    assert gate.count("SB_MAC16 #") == (2 if marked else 1)
    if marked:
        assert result.equal, result.first_mismatch
    else:
        # Nearly every cycle differs: one product is gone.
        assert result.mismatches > 19_000 and result.first_mismatch.startswith("first mismatch at")


@pytest.mark.parametrize("preset, target", [("icebreaker", "ice40"), ("tiny", "ecp5")])
def test_gemm_core_netlist_equals_rtl(preset, target):
    result = gemm_core_check(PRESETS[preset], target, cycles=100_000)
    assert result.cycles == 100_000
    assert result.equal, result.first_mismatch


def test_a_cell_without_model_and_other_ports_are_refused():
    netlist = "module top(a, y);\n  input a;\n  output y;\n  SB_NOPE cell (.I(a), .O(y));\nendmodule\n"
    with pytest.raises(GateError, match="^the ice40 netlist uses cell SB_NOPE, which has no "
                                        "simulation model in Yosys's cell library$"):
        cell_models("ice40", netlist)
    gold = "module gold(a, y);\n  input [1:0] a;\n  output y;\n  assign y = a[0];\nendmodule\n"
    gate = "module gate(a, y);\n  input a;\n  output y;\n  assign y = a;\nendmodule\n"
    with pytest.raises(GateError, match="^the netlist's module gate has other ports than the "
                                        "RTL's gold$"):
        check_block(gold, "gold", gate, "gate", "ice40")


def test_a_cell_whose_model_has_no_behaviour_is_refused():
    """Yosys's model of the iCE40 warm-boot primitive is a port list: simulated, a netlist
    would read zeros from it."""
    netlist = ("module top(a, y);\n  input a;\n  output y;\n  SB_WARMBOOT boot (.BOOT(a), .S1(y));\n"
               "endmodule\n")
    with pytest.raises(GateError, match="^the ice40 netlist uses cell SB_WARMBOOT, whose model "
                                        "in Yosys's cell library has no behaviour \\(ports and "
                                        "parameters only\\)$"):
        cell_models("ice40", netlist)


def test_ecp5_multipliers_with_registers_are_refused():
    netlist = ("module top(a, y);\n  input a;\n  output y;\n  MULT18X18D #(\n"
               "    .REG_OUTPUT_CLK(\"CLK0\")\n  ) m (.A0(a), .P0(y));\nendmodule\n")
    with pytest.raises(GateError, match="^a MULT18X18D with REG_OUTPUT_CLK=\"CLK0\" is in the "
                                        "netlist: vdla's model of it is the combinational "
                                        "multiplier Yosys maps \\$mul to$"):
        cell_models("ecp5", netlist)


@pytest.mark.slow
@pytest.mark.parametrize("preset, target", [("icebreaker", "ice40"), ("tiny", "ecp5")])
def test_the_core_netlist_runs_random_programs_like_fsim(preset, target):
    """The whole core's netlist (block RAMs -- on ECP5 vdla's DP16KD --, DSPs, carry chains)
    under the RTL tier's harness; benchmarks/netlist.py runs 100 programs and a conv layer
    on every preset, and builds the models this test finds in the cache."""
    from vdla.sim.backends import get_backend
    from vdla.sim.gate import gate_model
    from vdla.testing.programs import generate
    config = PRESETS[preset]
    build = gate_model(config, target)
    fsim = get_backend("fsim", config)
    for seed, backpressure in ((0, 0), (1, 30), (2, 0), (3, 30)):
        program = generate(config, seed)
        expected, _ = program.run(fsim)
        actual, result = program.run(get_backend("rtl", config, build=build,
                                                 backpressure=backpressure, check=False))
        assert result.cycles > 0
        assert np.array_equal(expected, actual), program.describe_difference(expected, actual)
