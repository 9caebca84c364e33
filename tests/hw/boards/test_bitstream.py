"""`hw.boards.bitstream`: a board's bitstream of the board top, through the YoWASP tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdla.hw.boards.table import BOARDS
from vdla.hw.boards.bitstream import build_bitstream
from vdla.hw.config import PRESETS
from vdla.hw.synth import SynthError
from tests.hw.unelaborated import built
from tests.rtl.standin import StandIn

pytestmark = pytest.mark.slow


def test_icebreaker_bitstream_of_the_board_top(tmp_path):
    config = PRESETS["tiny"]
    # The stand-in core keeps this test to seconds; the board top around it is the real one.
    report = build_bitstream("icebreaker", tmp_path / "top.bin", config, core=StandIn(config))
    data = Path(report.output).read_bytes()
    assert report.bytes == len(data) > 100_000  # an UP5K image is ~104 kB
    assert data[:4] == b"\xff\x00\x00\xff"  # iCE40 bitstream preamble
    # The PLL makes the board's clock from its 12 MHz oscillator, and timing was met.
    clock = BOARDS["icebreaker"].clock_mhz
    assert report.clock_mhz == clock and min(report.fmax_by_clock.values()) >= clock




@pytest.mark.parametrize("board, output_mhz, message", [
    ("icebreaker", 1000, "no ice40 PLL makes 1000 MHz from 12 MHz"),
    ("ulx3s-85f", 2000, "no ecp5 PLL makes 2000 MHz from 25 MHz"),
])
def test_impossible_pll_frequencies(board, output_mhz, message):
    from vdla.hw.boards.bitstream import pll_verilog
    input_mhz = BOARDS[board].platform_instance().default_clk_frequency / 1e6
    with pytest.raises(SynthError, match=message):
        pll_verilog(BOARDS[board], input_mhz, output_mhz)


@pytest.mark.parametrize("board", list(BOARDS))
def test_pll_of_each_board(board):
    from vdla.hw.boards.bitstream import pll_verilog
    chosen = BOARDS[board]
    input_mhz = chosen.platform_instance().default_clk_frequency / 1e6
    text = pll_verilog(chosen, input_mhz, chosen.clock_mhz)
    assert "module vdla_pll" in text and "clkin" in text and "clkout" in text
    assert ("EHXPLLL" if chosen.target == "ecp5" else "SB_PLL40_PAD") in text


def test_unknown_board():
    with pytest.raises(SynthError, match=r"unknown board 'arty' \(available: ulx3s-85f, "
                                         r"ecpix5-85f, ecpix5-85f-256, icebreaker\)"):
        build_bitstream("arty", Path("x.bit"))


@pytest.mark.parametrize("name", list(BOARDS))
def test_board_presets_are_the_boards_hardware(name):
    board = BOARDS[name]
    assert board.config.name == board.preset
    # The UART divisor at the board's oscillator: within 2 % of the baud rate.
    clock = board.platform_instance().default_clk_frequency
    assert abs(clock / board.clocks_per_bit(clock) / board.baud - 1) < 0.02


@pytest.mark.parametrize("name", list(BOARDS))
def test_board_pins_cover_the_board_tops_ports(name):
    """`Board.pins` (the ECP5 place-and-route report's LPF): the clock and every port of
    `BoardTop`, each on its own pin of the board's platform."""
    board = BOARDS[name]
    pins = board.pins()
    assert set(pins) == {"clk", "uart_rx", "uart_tx", "running"}   # BoardTop's ports
    assert len(set(pins.values())) == len(pins) and all(pins.values())
    platform = board.platform_instance()
    assert pins["clk"] == platform.lookup(platform.default_clk).ios[0].names[0]


def test_board_reset_is_released_through_a_synchroniser():
    """The PLL's ``locked`` is not of the PLL's output clock: it resets the design
    through a `ResetSynchronizer` (two flip-flops with an asynchronous reset), not
    straight into the flip-flops' synchronous reset."""
    from amaranth.back import rtlil
    from vdla.hw.boards.bitstream import board_design
    board, config = BOARDS["icebreaker"], PRESETS["tiny"]
    text = rtlil.convert(board_design(board, config, core=StandIn(config)),
                         platform=board.platform_instance(), ports=[])
    synchroniser = text.split("module \\top.reset_sync\n", 1)[1].split("\nend\n", 1)[0]
    assert synchroniser.count("cell $adff ") == 2
    assert "cell \\top.reset_sync \\reset_sync" in text


def _build_plan(board, config, core):
    """The files of ``board``'s bitstream build, without running a tool."""
    import tempfile
    from vdla.hw.boards.bitstream import board_design
    with tempfile.TemporaryDirectory() as build_dir:
        return board.platform_instance().build(board_design(board, config, core), name="top",
                                               build_dir=build_dir, do_build=False,
                                               do_program=False).files


def test_ecpix5_bitstream_reaches_the_ddr3_through_litedrams_phy():
    """The ECPIX-5's bitstream: the board top's memory is LiteDRAM's controller on
    the ECP5 DDR3 PHY, on amaranth-boards' ``ddr3`` pins, clocked as LiteX clocks
    it (PLL at twice the design clock -> ECLKSYNCB -> CLKDIVF), and INFO tells the
    host to bring the DRAM up."""
    import re
    from vdla.hw.boards.host_link import info_bytes
    from vdla.hw.boards.protocol import MEMORY_PHY
    from vdla.hw.boards.litedram_gen import LITEDRAM_PHY_TOP_NAME, MODULES
    board = BOARDS["ecpix5-85f"]
    config = board.config
    assert board.dram == "litedram-ddr3" and MODULES[board.dram].clock_hz == board.clock_mhz * 1e6
    files = _build_plan(board, config, StandIn(config))
    assert f"module {LITEDRAM_PHY_TOP_NAME}(" in files["litedram_phy.v"]
    # The PHY's tristates are the pads' own (TRELLIS_IO), as nextpnr packs them.
    assert files["litedram_phy.v"].count("TRELLIS_IO #(") == 16 + 2
    text = files["top.il"]
    phy = text[text.index(f"cell \\{LITEDRAM_PHY_TOP_NAME} "):]
    phy = phy[:phy.index("\n  end\n")]
    pins = dict(re.findall(r"connect \\ddram_(\w+) \\ddr3_0__(\w+?)__", phy))
    assert pins == {"a": "a", "ba": "ba", "ras_n": "ras", "cas_n": "cas", "we_n": "we",
                    "cke": "clk_en", "odt": "odt", "clk_p": "clk", "dm": "dm", "dq": "dq",
                    "dqs_p": "dqs"}
    assert "cell \\ECLKSYNCB " in text and "cell \\CLKDIVF " in text
    assert "parameter \\DIV \"2.0\"" in text
    # Twice the design clock for the DDR gearing, about 25 MHz for the PHY's start-up.
    assert f'(* FREQUENCY_PIN_CLKOP="{2 * board.clock_mhz:g}" *)' in files["vdla_pll.v"]
    assert re.search(r'\(\* FREQUENCY_PIN_CLKOS="25(\.\d+)?" \*\)', files["vdla_pll.v"])
    lpf = files["top.lpf"]
    assert 'LOCATE COMP "ddr3_0__dq__io[15]" SITE "W2";' in lpf
    assert re.search(r'IOBUF PORT "ddr3_0__clk__p" IO_TYPE=SSTL15D_I', lpf)
    assert "ddr3_0__clk__n" not in lpf   # the ECP5 drives the pair from its p pin
    # INFO: the DDR3 (the second kind of the table) behind its real PHY.
    memory = info_bytes(config, MODULES[board.dram].size_bytes, board.dram, dram_phy=True)[-1]
    assert memory == (2 | MEMORY_PHY)


def test_a_dram_board_runs_at_its_drams_clock():
    with pytest.raises(SynthError, match=r"the ecpix5-85f's DRAM runs at 80 MHz \(its LiteDRAM "
                                         r"timings and PHY settings are for that clock\), not 95"):
        build_bitstream("ecpix5-85f", Path("x.bit"), clock_mhz=95)


def test_ulx3s_bitstream_reaches_the_sdram_through_litedrams_generic_phy():
    """The ULX3S's bitstream: LiteDRAM's controller with the generic SDR PHY on
    amaranth-boards' ``sdram`` pins, and the SDRAM's clock from a DDR output
    register on a PLL output 90 degrees after the design's, as litex-boards'
    ULX3S CRG makes it."""
    import re
    from vdla.hw.boards.litedram_gen import LITEDRAM_PHY_TOP_NAME, MODULES
    board = BOARDS["ulx3s-85f"]
    config = board.config
    assert board.dram == "litedram-sdram" and MODULES[board.dram].phy == "GENSDRPHY"
    files = _build_plan(board, config, StandIn(config))
    text = files["top.il"]
    phy = text[text.index(f"cell \\{LITEDRAM_PHY_TOP_NAME} "):]
    phy = phy[:phy.index("\n  end\n")]
    assert dict(re.findall(r"connect \\ddram_(\w+) \\sdram_0__(\w+?)__", phy)) == {
        "a": "a", "ba": "ba", "cs_n": "cs", "cke": "clk_en", "ras_n": "ras", "cas_n": "cas",
        "we_n": "we", "dq": "dq", "dm": "dqm"}
    assert "sys2x_clk" not in phy and "eclk" not in phy
    # The SDRAM's clock pin: high then low from a DDR register, on the shifted clock.
    assert "cell \\ODDRX1F " in text
    assert "output clkout1, // 50 MHz, 90 deg" in files["vdla_pll.v"]
    assert 'LOCATE COMP "sdram_0__clk__io" SITE "F19";' in files["top.lpf"]


@pytest.mark.parametrize("name, router", [("ecpix5-85f-256", "router1"), ("ecpix5-85f", "router2")])
def test_a_boards_router_reaches_nextpnr(name, router, monkeypatch):
    """`Board.router` (the 256-MAC board top routes with router1, where router2 diverged):
    its bitstream's nextpnr options and its place and route name it, and both place with
    the static placer."""
    from vdla.hw.synth.flow import _board_part, _placement
    board = BOARDS[name]
    seen = {}
    platform = board.platform_instance()

    def build(design, *args, nextpnr_opts, **kwargs):
        seen["options"] = nextpnr_opts
        design._MustUse__silence = True     # stopped before elaboration on purpose: no warning
        raise RuntimeError("stop before any tool")

    monkeypatch.setattr(platform, "build", build)
    monkeypatch.setattr(type(board), "platform_instance", lambda self: platform)
    with pytest.raises(SynthError, match="stop before any tool"):
        build_bitstream(board, Path("x.bit"), core=built(StandIn, board.config))
    assert seen["options"] == ["--placer", "static", "--router", router]
    placement = _placement(board.config, "ecp5", _board_part(board.config, "ecp5"), None)
    assert placement["router"] == board.router and placement["clock_mhz"] == board.clock_mhz
