"""``vdla hw synth``, ``bitstream`` and ``board-header``: one-line errors for bad options,
the protocol header.

The flows themselves are tested in `tests.hw.test_synth` and `tests.hw.boards.test_bitstream`.
"""

from __future__ import annotations

import re

import pytest

from vdla.cli.hw import command as hw_command
from vdla.hw.config import PRESETS
from tests.cli.click_runner import invoke


@pytest.mark.parametrize("args, message", [
    (["synth", "--target", "ice40", "--device", "LFE5U-85F"],
     "--device 'LFE5U-85F': not an ice40 part vdla knows (available: iCE40UP5K, iCE40HX8K, "
     "iCE40HX1K)"),
    (["synth", "--target", "gowin"], "Invalid value for '--target'"),
    (["synth", "--clock-mhz", "-5"], "--clock-mhz: must be positive, got -5"),
    (["synth", "--clock-mhz", "nan"], "--clock-mhz: expected a finite number, got nan"),
    (["synth", "--clock-mhz", "inf"], "--clock-mhz: expected a finite number, got inf"),
    (["synth", "--clock-mhz", "fast"], "--clock-mhz: expected a number, got 'fast'"),
    (["bitstream", "--board", "icebreaker", "--clock-mhz", "0", "-o", "x.bin"],
     "--clock-mhz: must be positive, got 0"),
    (["bitstream", "--board", "arty", "-o", "x.bit"],
     "--board 'arty': unknown board (available: ulx3s-85f, ecpix5-85f, ecpix5-85f-256, "
     "icebreaker)"),
])
def test_bad_options_are_one_line(args, message):
    result = invoke(hw_command, args)
    assert result.exit_code != 0
    assert message in result.output


def test_board_header_states_the_protocol(tmp_path):
    from vdla.hw.boards import protocol
    result = invoke(hw_command, ["board-header", "-o", tmp_path / "board.h"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "board.h").read_text()
    assert text == protocol.c_header()
    result = invoke(hw_command, ["board-header", "--config", "icebreaker"])
    assert result.exit_code == 0, result.output
    assert result.output == protocol.c_header(PRESETS["icebreaker"]) != text
    assert f"#define VDLA_BOARD_STATUS_OK 0x{protocol.Status.OK:02x}" in text


def _stop_synthesis(monkeypatch):
    """Synthesis that fails at once: what ran before it is what the test looks at."""
    from vdla.hw import synth
    from vdla.hw.boards import bitstream

    def stop(*args, **kwargs):
        raise synth.SynthError("synthesis reached")
    monkeypatch.setattr(synth, "estimate", stop)
    monkeypatch.setattr(bitstream, "build_bitstream", stop)


@pytest.mark.parametrize("args", [["synth", "--estimate", "--config", "icebreaker",
                                   "--target", "ice40"],
                                  ["bitstream", "--board", "icebreaker", "-o", "x.bin"]])
def test_skipping_the_netlist_check_says_what_is_skipped(args, monkeypatch):
    _stop_synthesis(monkeypatch)
    result = invoke(hw_command, [*args, "--no-netlist-check"])
    assert "netlist check skipped (--no-netlist-check): the GEMM core's netlist is not " \
           "simulated against its RTL" in result.stderr
    assert "synthesis reached" in result.output


@pytest.mark.parametrize("args", [["synth", "--estimate", "--config", "icebreaker",
                                   "--target", "ice40"],
                                  ["bitstream", "--board", "icebreaker", "-o", "x.bin"]])
def test_a_netlist_that_differs_stops_before_synthesis(args, monkeypatch):
    from vdla.sim import gate
    _stop_synthesis(monkeypatch)
    checked = []

    def differs(config, target, device=None, **options):
        checked.append((config.name, target, device))
        return gate.BlockCheck(options["cycles"], 7, "first mismatch at cycle 9: ...", 0.1)
    monkeypatch.setattr(gate, "gemm_core_check", differs)
    result = invoke(hw_command, args)
    assert result.exit_code == 1
    assert checked == [("icebreaker", "ice40",
                        "iCE40UP5K" if args[0] == "bitstream" else None)]
    assert ("Error: the ice40 netlist of config icebreaker's GEMM core differs from its RTL in 7 "
            "of 200000 cycles (first mismatch at cycle 9: ...); nothing was written") in result.stderr
    assert "synthesis reached" not in result.output


def test_vdla_hw_synth_refuses_a_config_that_cannot_fit_at_once():
    """Before the netlist check, Yosys and nextpnr (`hw.synth.fit`)."""
    result = invoke(hw_command, ["synth", "--config", "default", "--target", "ecp5"])
    assert result.exit_code == 1
    assert result.output == ("Error: config default (core) cannot fit the LFE5U-85F: block RAMs: "
                             "237 of 208 (29 over); DSPs: 304 of 156 (148 over) (estimated "
                             "before synthesis)\n")


def test_an_estimate_of_a_config_that_cannot_fit_is_refused_at_once(monkeypatch):
    """The README's ``vdla hw synth --target ice40 --estimate``: the default core on the UP5K."""
    _stop_synthesis(monkeypatch)
    result = invoke(hw_command, ["synth", "--target", "ice40", "--estimate"])
    assert result.exit_code == 1
    assert re.fullmatch(r"Error: config default \(core\) cannot fit the iCE40UP5K: block RAMs: 1066 of 30 "
                        r"\(1036 over\); DSPs: 304 of 8 \(296 over\); LUTs: about \d+ of 5280 "
                        r"\(\d+ over\) \(estimated before synthesis\)\n", result.output), result.output


def test_an_estimate_that_yosys_puts_over_the_part_is_refused(monkeypatch):
    from vdla.hw import synth
    over = synth.SynthReport(luts=6000, ffs=100, brams=2, dsps=8, fmax_mhz=None, device="iCE40UP5K",
                             fits=False, target="ice40", over=["LUTs: 6000 of 5280 (720 over)"])
    monkeypatch.setattr(synth, "estimate", lambda *args, **kwargs: over)
    result = invoke(hw_command, ["synth", "--config", "icebreaker", "--target", "ice40", "--estimate",
                                 "--no-netlist-check"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == ("Error: config icebreaker does not fit the iCE40UP5K "
                                              "after synthesis: LUTs: 6000 of 5280 (720 over)")
    assert "config icebreaker:" not in result.stdout
