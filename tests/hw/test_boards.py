"""`hw.boards`: a board's bitstream of the board top, through the YoWASP tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdla.hw.board_table import BOARDS
from vdla.hw.boards import build_bitstream
from vdla.hw.config import PRESETS
from vdla.hw.synth import SynthError
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
    from vdla.hw.boards import pll_verilog
    input_mhz = BOARDS[board].platform_instance().default_clk_frequency / 1e6
    with pytest.raises(SynthError, match=message):
        pll_verilog(BOARDS[board], input_mhz, output_mhz)


@pytest.mark.parametrize("board", list(BOARDS))
def test_pll_of_each_board(board):
    from vdla.hw.boards import pll_verilog
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
    from vdla.hw.boards import board_design
    board, config = BOARDS["icebreaker"], PRESETS["tiny"]
    text = rtlil.convert(board_design(board, config, core=StandIn(config)),
                         platform=board.platform_instance(), ports=[])
    synchroniser = text.split("module \\top.reset_sync\n", 1)[1].split("\nend\n", 1)[0]
    assert synchroniser.count("cell $adff ") == 2
    assert "cell \\top.reset_sync \\reset_sync" in text
