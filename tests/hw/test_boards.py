"""`hw.boards`: a board's bitstream of the board top, through the YoWASP tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdla.hw.boards import BOARDS, build_bitstream
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
    assert report.clock_mhz == 12 and report.fmax_by_clock




def test_unknown_board():
    with pytest.raises(SynthError, match=r"unknown board 'arty' \(available: ulx3s-85f, icebreaker\)"):
        build_bitstream("arty", Path("x.bit"))


@pytest.mark.parametrize("name", list(BOARDS))
def test_board_presets_are_the_boards_hardware(name):
    board = BOARDS[name]
    assert board.config.name == board.preset
    # The UART divisor at the board's oscillator: within 2 % of the baud rate.
    clock = board.platform_instance().default_clk_frequency
    assert abs(clock / board.clocks_per_bit(clock) / board.baud - 1) < 0.02
