"""``vdla demo``: one ResNet-18 layer compiled, run, checked against numpy and reported."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.cli.demo import command as demo_command
from vdla.cli.main import cli
from vdla.compiler.ops import Conv2d
from vdla.hw.isa import MODULES

REPO = Path(__file__).resolve().parents[2]


def invoke(args):
    return CliRunner().invoke(demo_command, [str(arg) for arg in args])


def test_demo_is_a_vdla_subcommand():
    result = CliRunner().invoke(cli, ["demo", "--help"])
    assert result.exit_code == 0 and "ResNet-18 layer" in result.output


def test_demo_on_fsim_passes_and_reports_the_layer():
    result = invoke(["--layer", "c10", "--sim", "fsim", "--config", "tiny"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "ResNet-18 C10: conv2d 1x256x14x14 -> 512 k1x1 s2x2" in out
    assert "config:       tiny (1x4x4 GEMM" in out
    # 512 x 7 x 7 outputs x 256 inputs on 16 MACs/cycle.
    assert f"ideal {512 * 7 * 7 * 256 // 16:,}" in out
    assert "fsim is untimed" in out
    match = re.search(r"instructions: ([\d,]+) \(load ([\d,]+), compute ([\d,]+), "
                      r"store ([\d,]+)\)", out)
    total, *parts = (int(group.replace(",", "")) for group in match.groups())
    assert total == sum(parts) > 0
    assert "check:        PASS" in out


def test_demo_fails_on_a_wrong_result(monkeypatch):
    def broken_reference(self, data, weight, bias=None):
        return np.full(self.output_shape, 3, dtype=np.int8)
    monkeypatch.setattr(Conv2d, "reference", broken_reference)
    result = invoke(["--layer", "C10", "--sim", "fsim", "--config", "tiny"])
    assert result.exit_code == 1
    assert "check:        FAIL" in result.stdout and "differ from numpy" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--layer", "C1"], "unknown resnet18 layer(s) C1"),
    (["--layer", "C2,C3"], "unknown resnet18 layer(s) C2,C3"),
    (["--config", "huge"], "config huge: no such preset"),
    (["--sim", "spice"], "--sim 'spice': unknown simulator"),
])
def test_demo_bad_input_is_one_line(args, message):
    result = invoke(args)
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], \
        result.stderr


@pytest.mark.rtl
def test_demo_on_rtl_reports_the_baselines_cycles():
    result = invoke(["--layer", "C10", "--config", "default"])
    assert result.exit_code == 0, result.output
    baseline = json.loads((REPO / "bench/baselines/default.json").read_text())
    cycles = baseline["layers"]["C10"]["cycles"]
    out = result.stdout
    assert f"cycles:       {cycles:,} (ideal {512 * 7 * 7 * 256 // 256:,}" in out
    utilization = 512 * 7 * 7 * 256 / (cycles * 256)
    assert f"GEMM utilization: {100 * utilization:.1f}%" in out
    for module in MODULES:
        assert re.search(rf"^  {module}\s+\d+\.\d%", out, re.MULTILINE), module
    assert re.search(r"DRAM traffic: [\d,]+ B \([\d.]+ MiB\) read", out)
    assert "check:        PASS" in out
