"""The synthesis flow (`hw.synth`) and board bitstreams (`hw.boards.bitstream`) on small designs.

Designs with a known make-up (n signed 8x8 multipliers, a memory of known
size, a register bank of known width) are synthesised and the report is
checked against what they must map to; place and route must give an Fmax and
fail to fit where the part is too small. The accelerator itself takes minutes
to synthesise, so the full-config reports come from `benchmarks/synth.py`.
Cycles become time at a recorded Fmax.
"""

from __future__ import annotations

import pytest
from amaranth import Module, Signal
from amaranth.back import rtlil
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.synth import PARTS, SynthError, synthesize_rtlil

pytestmark = pytest.mark.slow


class Multipliers(wiring.Component):
    """``count`` registered signed 8x8 products into a memory of ``depth`` 16-bit words."""

    def __init__(self, count: int, depth: int):
        self.count, self.depth = count, depth
        super().__init__({"a": In(8 * count), "b": In(8 * count), "addr": In(16),
                          "out": Out(16)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=16, depth=self.depth, init=[])
        read, write = mem.read_port(), mem.write_port()
        total = Signal(16)
        products = []
        for i in range(self.count):
            product = Signal(16, name=f"product_{i}")
            m.d.sync += product.eq(self.a.word_select(i, 8).as_signed()
                                   * self.b.word_select(i, 8).as_signed())
            products.append(product)
        m.d.sync += total.eq(sum(products))
        m.d.comb += [write.addr.eq(self.addr), write.data.eq(total), write.en.eq(1),
                     read.addr.eq(self.addr + 1)]
        m.d.sync += self.out.eq(read.data)
        return m


class Registers(wiring.Component):
    """``width`` flip-flops in a shift chain (one LUT-free FF each)."""

    def __init__(self, width: int):
        self.width = width
        super().__init__({"i": In(1), "o": Out(1)})

    def elaborate(self, platform):
        m = Module()
        chain = Signal(self.width)
        m.d.sync += chain.eq(chain << 1 | self.i)
        m.d.comb += self.o.eq(chain[-1])
        return m


def _rtlil(design) -> str:
    return rtlil.convert(design, name="top", emit_src=False)


@pytest.mark.parametrize("target, count, brams", [("ecp5", 3, 1), ("ice40", 2, 2)])
def test_estimate_counts_multipliers_and_block_ram(target, count, brams, tmp_path, monkeypatch):
    import vdla.hw.synth as synth
    monkeypatch.setenv("YOWASP_CACHE_DIR", synth.yowasp_env()["YOWASP_CACHE_DIR"])
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path))  # a cold report cache
    # 512 x 16 bits: one ECP5 DP16KD (18 kbit), two iCE40 SB_RAM40_4K (4 kbit).
    report = synthesize_rtlil(_rtlil(Multipliers(count, 512)), "top", target)
    assert report.dsps == count
    assert report.brams == brams
    assert report.lutrams == 0 and report.fits and report.fmax_mhz is None
    assert report.stage == "estimate" and report.ffs >= 16 and report.luts > 0
    again = synthesize_rtlil(_rtlil(Multipliers(count, 512)), "top", target)
    assert not report.cached and again.cached
    assert again.to_dict() | {"cached": False} == report.to_dict()


class SelectCopies(wiring.Component):
    """A registered select over 4 lanes of 32-bit multiplexers, from ``count`` copies."""

    def __init__(self, count: int):
        self.count = count
        super().__init__({"a": In(8), "b": In(8), "x": In(128), "y": In(128), "o": Out(128)})

    def elaborate(self, platform):
        from amaranth import Cat, Mux
        from vdla.hw.replica import copies
        m = Module()
        selects = copies("select", self.count)
        m.d.sync += [select.eq(self.a == self.b) for select in selects]
        m.d.sync += self.o.eq(Cat(*(Mux(selects[lane % self.count], self.x.word_select(lane, 32),
                                        self.y.word_select(lane, 32)) for lane in range(4))))
        return m


@pytest.mark.parametrize("target", ["ecp5", "ice40"])
def test_register_copies_survive_synthesis(target):
    """`hw.replica`'s copies stay apart (Yosys merges identical registers otherwise)."""
    one, four = (synthesize_rtlil(_rtlil(SelectCopies(count)), "top", target) for count in (1, 4))
    assert (one.ffs, four.ffs) == (128 + 1, 128 + 4)



def test_gemm_operand_copies_survive_synthesis():
    """``gemm_operand_copies``: the GEMM unit's registered inp operand, once per copy in the
    netlist (each copy a REPLICA register), and nothing else added."""
    from vdla.hw.config import PRESETS
    from vdla.hw.unit_pipeline import unit_variant
    base = PRESETS["tiny"].replace(gemm_operand_stage=1)
    reports = []
    for count in (1, 2):
        config = base.replace(gemm_operand_copies=count, name=f"copies-{count}")
        unit = unit_variant(config, "gemm")(config)
        reports.append(synthesize_rtlil(_rtlil(unit), "top", "ecp5"))
    inp_bits = base.element_bytes("inp") * 8
    assert reports[1].ffs - reports[0].ffs == inp_bits
    assert reports[1].dsps == reports[0].dsps == base.macs_per_cycle

def test_estimate_says_when_it_does_not_fit():
    device = PARTS["iCE40HX1K"]
    report = synthesize_rtlil(_rtlil(Registers(device.ffs + 100)), "top", "ice40", "iCE40HX1K")
    assert report.ffs == device.ffs + 100
    assert not report.fits
    assert "DOES NOT FIT" in report.summary()


@pytest.mark.parametrize("target", ["ecp5", "ice40"])
def test_place_and_route_reports_fmax(target):
    report = synthesize_rtlil(_rtlil(Registers(64)), "top", target, place=True, clock_mhz=50)
    assert report.fits and report.stage == "place_and_route" and report.clock_mhz == 50
    assert report.seed == 1 and "meets 50 MHz, seed 1)" in report.summary()
    # Another seed is another placement: another report, which says so.
    other = synthesize_rtlil(_rtlil(Registers(64)), "top", target, place=True, clock_mhz=50,
                             seed=2)
    assert other.seed == 2 and "seed 2" in other.summary()
    assert report.fmax_by_clock and report.fmax_mhz == min(report.fmax_by_clock.values())
    # A shift register is among the fastest logic there is.
    assert report.meets_clock
    assert report.utilization
    path = report.critical_paths[0]
    assert 0 < path["delay_ns"] == pytest.approx(path["logic_ns"] + path["routing_ns"], abs=0.02)
    assert path["from"] and path["to"] and path["through"]
    assert report.critical_path_text().startswith(f"critical path {path['delay_ns']:.1f} ns")


def test_critical_paths_name_the_scopes_a_path_crosses():
    pnr = {"critical_paths": [{"from": "clk", "to": "clk", "path": [
        {"type": "clk-to-q", "delay": 0.5, "from": {"cell": "alu.s5_a_FF"},
         "to": {"cell": "alu.s5_a_FF"}},
        {"type": "routing", "delay": 1.25, "from": {"cell": "alu.s5_a_FF"},
         "to": {"cell": "alu.core.mul_DSP"}, "net": "a"},
        {"type": "logic", "delay": 4.0, "from": {"cell": "alu.core.mul_DSP"},
         "to": {"cell": "alu.core.mul_DSP"}},
        {"type": "routing", "delay": 2.0, "from": {"cell": "alu.core.mul_DSP"},
         "to": {"cell": "acc_FF"}, "net": "p"},
        {"type": "setup", "delay": 0.25, "from": {"cell": "acc_FF"}, "to": {"cell": "acc_FF"}},
    ]}]}
    from vdla.hw.synth import critical_paths
    assert critical_paths(pnr) == [{
        "clock": "clk", "to_clock": "clk", "delay_ns": 8.0, "logic_ns": 4.75, "routing_ns": 3.25,
        "from": "alu.s5_a_FF", "to": "acc_FF", "through": ["alu", "alu.core", "top"]}]
    assert critical_paths({}) == [] and critical_paths({"critical_paths": [{"path": []}]}) == []
    # The one-line summary names the slowest path within a clock, not one from a pin.
    from vdla.hw.synth import SynthReport
    from_pin = {**critical_paths(pnr)[0], "clock": "<async>", "delay_ns": 11.5}
    report = SynthReport(luts=1, ffs=1, brams=0, dsps=0, fmax_mhz=125.0, device="LFE5U-85F",
                         fits=True, critical_paths=[from_pin, *critical_paths(pnr)])
    assert report.critical_path_text().startswith("critical path 8.0 ns")


def test_place_and_route_of_a_design_too_big_for_the_part(tmp_path, monkeypatch):
    """Flip-flops are not estimated before synthesis (`hw.synth.fit`); Yosys's counts
    over the part stop the flow before nextpnr, and the report says by how much."""
    import vdla.hw.synth as synth
    monkeypatch.setenv("YOWASP_CACHE_DIR", synth.yowasp_env()["YOWASP_CACHE_DIR"])
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path))  # a report of this run, not a cached one
    device = PARTS["iCE40HX1K"]
    report = synthesize_rtlil(_rtlil(Registers(device.ffs + 100)), "top", "ice40",
                              "iCE40HX1K", place=True)
    assert not report.fits and report.fmax_mhz is None and report.stage == "estimate"
    assert report.over == ["flip-flops: 1380 of 1280 (100 over)"] and not report.utilization
    assert report.summary().endswith("DOES NOT FIT (flip-flops: 1380 of 1280 (100 over))")


def test_products_built_from_luts_equal_the_rtl():
    """``HwConfig.lut_products``: those GEMM products take no DSP, and the netlist
    (Yosys's ``booth`` multipliers) computes what the RTL does, gate by gate."""
    from vdla.hw.config import PRESETS
    from vdla.hw.gemm import GemmCore
    from vdla.hw.synth import block_netlist
    from vdla.sim.gate import gemm_core_check
    config = PRESETS["tiny"].replace(lut_products=10, name="tiny-lut")
    # 16 products, 10 of them LUTs: 6 MULT18X18D.
    assert block_netlist(GemmCore(config), "gemm_gate", "ecp5").count("MULT18X18D ") == 6
    result = gemm_core_check(config, "ecp5", cycles=100_000)
    assert result.cycles == 100_000
    assert result.equal, result.first_mismatch


@pytest.mark.parametrize("target, device, message", [
    ("vhdl", None, r"unknown target 'vhdl' \(available: ecp5, ice40\)"),
    ("ecp5", "iCE40UP5K", r"unknown ecp5 device 'iCE40UP5K' \(available: LFE5U-25F"),
])
def test_bad_target_or_device(target, device, message):
    with pytest.raises(SynthError, match=message):
        synthesize_rtlil(_rtlil(Registers(4)), "top", target, device)


def test_cycles_become_time_at_the_recorded_fmax(tmp_path, monkeypatch):
    from vdla.hw.config import PRESETS
    from vdla.hw.synth import SynthReport, clock_for, known_fmax, record_fmax
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path))
    tiny, odd = PRESETS["tiny"], PRESETS["odd"]
    assert known_fmax(tiny) is None and clock_for(tiny) is None
    assert clock_for(tiny, 125) == (125.0, "--clock-mhz")
    record_fmax(tiny, SynthReport(luts=1, ffs=1, brams=0, dsps=0, fmax_mhz=87.5,
                                  device="LFE5U-85F", fits=True, stage="place_and_route"))
    assert clock_for(tiny) == (87.5, "Fmax of config tiny placed on ecp5 LFE5U-85F (core), "
                                     "vdla hw synth")
    assert clock_for(tiny, 50)[0] == 50.0  # the option wins
    assert clock_for(odd) is None  # another design


def test_config_reports_are_remembered_and_record_fmax(tmp_path, monkeypatch):
    """`estimate` / `place_and_route` of a config: the second ask converts nothing."""
    import vdla.hw.synth as synth
    from vdla.hw.config import PRESETS
    from vdla.hw.generate import TOP_NAME
    monkeypatch.setenv("YOWASP_CACHE_DIR", synth.yowasp_env()["YOWASP_CACHE_DIR"])
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path))
    conversions = []

    def small_core(config):  # a stand-in for the accelerator's RTLIL, sized by the config
        conversions.append(config.name)
        return rtlil.convert(Registers(8 * config.block_in), name=TOP_NAME, emit_src=False)

    monkeypatch.setattr(synth.flow, "_core_rtlil", small_core)
    tiny = PRESETS["tiny"]
    first = synth.estimate(tiny, "ecp5")
    assert first.ffs == 8 * tiny.block_in and not first.cached
    assert synth.estimate(tiny, "ecp5").cached and conversions == ["tiny"]
    placed = synth.place_and_route(tiny, "ecp5", clock_mhz=80)
    assert placed.fits and placed.fmax_mhz and conversions == ["tiny", "tiny"]
    assert synth.clock_for(tiny) == (placed.fmax_mhz, "Fmax of config tiny placed on ecp5 "
                                                      "LFE5U-85F (core), vdla hw synth")


def test_a_board_preset_is_placed_as_its_board_top(tmp_path, monkeypatch):
    """`place_and_route` of a board preset places its board's board top (as its
    bitstream builds it), of any other config on ECP5 the core out of context."""
    import vdla.hw.synth as synth
    from vdla.hw.boards.top import BOARD_TOP_NAME
    from vdla.hw.boards.table import BOARDS, Board
    from vdla.hw.config import PRESETS
    from vdla.hw.generate import TOP_NAME
    monkeypatch.setenv("YOWASP_CACHE_DIR", synth.yowasp_env()["YOWASP_CACHE_DIR"])
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path))
    built = []

    def small_board(board, config=None):  # stand-ins sized apart, to tell them in the report
        built.append((board.name, (config or board.config).name))
        return rtlil.convert(Registers(24), name=BOARD_TOP_NAME, emit_src=False)

    monkeypatch.setattr(Board, "rtlil", small_board)
    monkeypatch.setattr(synth.flow, "_core_rtlil", lambda config: rtlil.convert(
        Registers(12), name=TOP_NAME, emit_src=False))
    ulx3s = synth.place_and_route(PRESETS["ulx3s"], "ecp5", clock_mhz=80)
    assert ulx3s.top == "board" and ulx3s.ffs == 24 and built == [("ulx3s-85f", "ulx3s")]
    assert BOARDS["ulx3s-85f"].device == ulx3s.device
    # Without a clock goal, the board's clock: the one its bitstream must meet.
    at_board_clock = synth.place_and_route(PRESETS["ulx3s"], "ecp5")
    assert at_board_clock.clock_mhz == BOARDS["ulx3s-85f"].clock_mhz
    tiny = synth.place_and_route(PRESETS["tiny"], "ecp5", clock_mhz=80)
    assert tiny.top == "core" and tiny.ffs == 12 and len(built) == 2
    # ``ecpix5`` is ``ulx3s``'s hardware: placed on its own board's part and pins by
    # default, at its own board's clock, and its Fmax is remembered apart.
    ecpix5 = synth.place_and_route(PRESETS["ecpix5"], "ecp5")
    assert built[-1] == ("ecpix5-85f", "ecpix5") and ecpix5.top == "board"
    assert (ecpix5.device, ecpix5.clock_mhz) == ("LFE5UM5G-85F-8BG554", 80.0)
    assert synth.known_fmax(PRESETS["ecpix5"])["device"] == ecpix5.device
    assert synth.known_fmax(PRESETS["ulx3s"])["device"] == "LFE5U-85F"
