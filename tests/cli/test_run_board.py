"""``vdla run --sim board|board-sim`` and ``--clock-mhz``.

The run goes through the simulated board top (UART pins and all); its output
is checked against numpy and its time against cycles / clock.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from vdla.cli.run import command as run_command
from vdla.compiler import Conv2d, compile_op
from vdla.hw.config import PRESETS
from vdla.runtime.program_file import save
from tests.cli.click_runner import invoke


@pytest.fixture
def conv(tmp_path):
    op = Conv2d(batch=1, in_channels=4, out_channels=8, height=5, width=5, kernel=(3, 3),
                padding=(1, 1), bias=True, shift=5, relu=True)
    path = save(compile_op(op, PRESETS["tiny"]), tmp_path / "conv.vdla")
    inputs = op.random_inputs(np.random.default_rng(11))
    args = []
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    return path, args, op.reference(**inputs), tmp_path


@pytest.mark.rtl
def test_run_on_the_simulated_board_reports_time_at_the_given_clock(conv):
    path, args, expected, tmp = conv
    result = invoke(run_command, [path, *args, "--sim", "board-sim", "--clock-mhz", "40",
                                  "--output", tmp / "out.npy", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(np.load(tmp / "out.npy"), expected)
    assert report["sim"] == "board-sim" and report["cycles"] > 0
    assert report["time"] == {"ms": report["cycles"] / 40e3, "clock_mhz": 40.0,
                              "clock": "--clock-mhz"}
    text = invoke(run_command, [path, *args, "--sim", "board-sim", "--clock-mhz", "40"])
    assert f"time: {report['cycles'] / 40e3:.3f} ms at 40 MHz (--clock-mhz)" in text.stdout


@pytest.mark.rtl
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["litedram-sdram", "litedram-ddr3"])
def test_run_on_the_simulated_board_with_its_dram_behind_litedram(conv, kind):
    path, args, expected, tmp = conv
    result = invoke(run_command, [path, *args, "--sim", "board-sim", "--board-memory",
                                  kind, "--output", tmp / "out.npy", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(np.load(tmp / "out.npy"), expected)
    assert report["sim"] == "board-sim" and report["cycles"] > 0


@pytest.mark.parametrize("extra, message", [
    (["--board-memory", "litedram-sdram"], "--board-memory does not apply to --sim fsim "
                                           "(it applies to --sim board-sim)"),
    (["--sim", "board-sim", "--board-memory", "ddr9"], "Invalid value for '--board-memory': "
                                                       "'ddr9' is not one of 'litedram-ddr3', "
                                                       "'litedram-sdram'"),
    (["--sim", "board"], "--sim board needs the board's serial port (--port /dev/ttyUSB1)"),
    (["--sim", "board", "--port", "/nonexistent/tty"], "cannot open serial port /nonexistent/tty"),
    (["--sim", "fsim", "--port", "/dev/ttyUSB1"], "--port does not apply to --sim fsim "
                                                  "(it applies to --sim board)"),
    (["--sim", "board-sim", "--baud", "9600"], "--baud does not apply to --sim board-sim "
                                               "(it applies to --sim board)"),
    (["--clock-mhz", "0"], "--clock-mhz: must be positive, got 0"),
    (["--clock-mhz", "nan"], "--clock-mhz: expected a finite number, got nan"),
    (["--clock-mhz", "-inf"], "--clock-mhz: expected a finite number, got -inf"),
])
def test_run_board_errors(conv, extra, message):
    path, args, _, _ = conv
    result = invoke(run_command, [path, *args, *extra])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_dram_without_litedram_names_the_extra_to_install(conv, monkeypatch):
    """LiteDRAM is installed here: its absence is simulated (an import of it fails)."""
    path, args, _, _ = conv
    for module in ("litedram", "litedram.modules"):
        monkeypatch.setitem(sys.modules, module, None)
    result = invoke(run_command, [path, *args, "--sim", "board-sim", "--board-memory",
                                  "litedram-sdram"])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.strip() == ("Error: the MT48LC16M16 DRAM needs LiteDRAM: "
                                     "pip install 'vdla[dram]'")
