"""The fit estimate before synthesis (`hw.synth.fit`): block RAMs and DSPs counted from
the RTLIL by Yosys's own mapping rules, and a design over its part refused at once.

The counts of the small designs here are what Yosys maps them to
(tests/hw/test_synth.py synthesises the same shapes); those of ``default`` are
what Yosys 0.70's ``synth_ecp5`` maps it to (237 DP16KD, 304 MULT18X18D), and
benchmarks/fit.py compares every shipped preset with Yosys's report. No tool
runs here.
"""

from __future__ import annotations

import pytest
from amaranth import Module, Signal
from amaranth.back import rtlil
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.config import PRESETS
from vdla.hw.synth import (PARTS, DoesNotFit, check_config_fits, estimate_rtlil, fit_estimate,
                           synthesize_rtlil)


class Design(wiring.Component):
    """``count`` signed 8x8 products (and one by a constant) into memories of
    (depth, width[, ram_style])."""

    def __init__(self, count: int, memories):
        self.count, self.memories = count, memories
        super().__init__({"a": In(8 * count), "b": In(8 * count), "addr": In(16),
                          "out": Out(16)})

    def elaborate(self, platform):
        m = Module()
        total = Signal(20)
        products = [self.a.word_select(i, 8).as_signed() * self.b.word_select(i, 8).as_signed()
                    for i in range(self.count)]
        m.d.sync += total.eq(sum(products) + self.a[:8] * 77)
        outs = []
        for index, (depth, width, *style) in enumerate(self.memories):
            attrs = {"ram_style": style[0]} if style else {}
            mem = memory.Memory(shape=width, depth=depth, init=[], attrs=attrs)
            m.submodules[f"mem{index}"] = mem
            read, write = mem.read_port(), mem.write_port()
            m.d.comb += [write.addr.eq(self.addr), write.data.eq(total.replicate(width)),
                         write.en.eq(1), read.addr.eq(self.addr + 1)]
            outs.append(read.data[:16])
        m.d.sync += self.out.eq(sum(outs))
        return m


def _rtlil(design) -> str:
    return rtlil.convert(design, name="top", emit_src=False)


@pytest.mark.parametrize("target, brams", [("ecp5", 1), ("ice40", 2)])
def test_multipliers_and_a_block_ram(target, brams):
    # 512 x 16 bits: one ECP5 DP16KD (18 kbit), two iCE40 SB_RAM40_4K (4 kbit); a
    # product by a constant is LUTs.
    estimate = estimate_rtlil(_rtlil(Design(3, [(512, 16)])), target)
    assert (estimate.brams, estimate.dsps) == (brams, 3)


@pytest.mark.slow
def test_each_memory_goes_where_yosys_finds_it_cheapest():
    estimate = estimate_rtlil(_rtlil(Design(1, [(1024, 2048), (2048, 128), (16, 128),
                                                (512, 128, "logic"), (4, 8)])), "ecp5")
    # 1K x 18 (or 512 x 36) blocks: 114 for 2048 bits; 2K x 9: 15 for 128 bits; a
    # 16-deep memory is LUT RAM (32 cells of 16 x 4), as is a 4 x 8 one (2 cells).
    assert estimate.brams == 114 + 15
    assert estimate.lutrams == 32 + 2
    kinds = {depth: (kind, cells) for _, depth, _, kind, cells in estimate.memories}
    assert kinds[512] == ("logic", 0)   # its ram_style


@pytest.mark.slow
def test_the_shipped_presets_as_yosys_maps_them():
    estimate, part, what = fit_estimate(PRESETS["default"], "ecp5")
    assert (estimate.brams, estimate.dsps, estimate.lutrams) == (237, 304, 171)
    assert part.name == "LFE5U-85F" and what == "config default (core)"
    # The 256-MAC preset (1x32x8) on its board: 118 block RAMs of buffers + 64 of
    # on-chip memory; 24 ALU multipliers (8 lanes) + 132 GEMM products in DSPs, 124
    # products in LUTs.
    fits = check_config_fits(PRESETS["ecpix5-256"], "ecp5")
    assert (fits.brams, fits.dsps) == (182, 156)


def test_a_design_that_cannot_fit_is_refused_before_any_tool_runs():
    with pytest.raises(DoesNotFit, match=r"^config default \(core\) cannot fit the LFE5U-85F: "
                                         r"block RAMs: 237 of 208 \(29 over\); DSPs: 304 of "
                                         r"156 \(148 over\) \(estimated before synthesis\)$"):
        check_config_fits(PRESETS["default"], "ecp5")
    # 5120 x 16 bits: 20 of the iCE40HX1K's 16 block RAMs; synthesis alone still reports.
    design = _rtlil(Design(1, [(5120, 16)]))
    with pytest.raises(DoesNotFit, match=r"^design top cannot fit the iCE40HX1K: block RAMs: "
                                         r"20 of 16 \(4 over\) \(estimated before synthesis\)$"):
        synthesize_rtlil(design, "top", "ice40", "iCE40HX1K", place=True)
    assert PARTS["iCE40HX1K"].brams == 16



def test_lut_products_are_some_of_the_gemm_products():
    from vdla.hw.config import ConfigError, HwConfig
    with pytest.raises(ConfigError, match=r"^lut_products: must be 0\.\.256 \(the GEMM core's "
                                          r"products\), got 300$"):
        HwConfig(lut_products=300)
    with pytest.raises(ConfigError, match=r"^lut_products: must be 0\.\.256"):
        HwConfig(lut_products=-1)
    # Only the netlist differs: not a field of the hash at 0 (recorded configs keep theirs).
    assert PRESETS["default"].replace(lut_products=0).hash == PRESETS["default"].hash
    assert PRESETS["default"].replace(lut_products=8).hash != PRESETS["default"].hash
