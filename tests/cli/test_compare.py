"""``vdla compare``: its options' errors and its output (the measuring itself, on a fake
clock: tests/bench/test_compare.py)."""

from __future__ import annotations

import json
import re

import pytest

from vdla.cli import compare as cli_compare
from vdla.cli.compare import command as compare_command
from tests.bench.fake_implementations import FakeMachine
from tests.bench.test_compare import TWO
from tests.cli.click_runner import invoke

FAKE = ["resnet18", "--targets", "cpu", "--repeats", "3", "--calls", "2", "--warmup", "1"]


@pytest.mark.parametrize("args, message", [
    (["--targets", "accel,tpu"],
     "--targets 'accel,tpu': expected a comma-separated list of accel, cpu, gpu"),
    (["--layers", "C2,C99"], "--layers 'C2,C99': expected a comma-separated list of C2, C3, "),
    (["--only", "ort fp32,ort fp16"], "--only: unknown implementation 'ort fp16' (known: "),
    (["--only", "cpu int8", "--targets", "accel"],
     "--only: implementation 'cpu int8' needs target cpu"),
    (["--only", " , "], "--only: no implementation named")])
def test_cli_rejects_bad_choices(args, message):
    result = invoke(compare_command, ["resnet18", *args])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {message}") and "Traceback" not in result.output


@pytest.fixture
def fake(monkeypatch):
    """The fake implementations, on two small layers in place of resnet18's."""
    monkeypatch.setitem(cli_compare.NETWORKS, "resnet18", TWO)
    return FakeMachine(monkeypatch, block=3)


def test_cli_prints_medians_round_totals_and_ratio_ranges(fake):
    result = invoke(compare_command, FAKE)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].endswith("ms per call, medians of 3 rounds x 2 calls (each implementation "
                             "alone in a block after 1 warm-up calls, blocks in random order, "
                             "seed 0)")
    rows = {line[:22].strip(): line[22:].split() for line in lines[2:13]}
    assert rows["cpu int8"] == ["2.000", "2.000", "6.00", "3.00-9.00"]
    assert rows["ort fp32 nospin"] == ["5.000", "5.000", "15.00", "15.00-15.00"]
    assert rows["numpy fp32"] == ["10.000", "10.000", "30.00", "30.00-30.00"]
    assert "cpu int8 / ort best int8: 4.00 (2.00-6.00 over the rounds)" in lines
    assert "cpu int8 / ort fp32 nospin: 0.40 (0.20-0.60 over the rounds)" in lines


def test_cli_json_and_layers(fake, tmp_path):
    out = tmp_path / "compare.json"
    result = invoke(compare_command, [*FAKE, "--layers", "C91", "--only", "cpu int8,ort fp32",
                                      "--json", "--json-out", out])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report == json.loads(out.read_text())
    assert list(report["layers"]) == ["C91"] and list(report["columns"]) == ["cpu int8",
                                                                             "ort fp32"]
    assert report["columns"]["cpu int8"]["round_totals"] == pytest.approx([1e-3, 2e-3, 3e-3])
    assert report["ratio_ranges"] == pytest.approx({"cpu int8 / ort fp32": [0.5, 1.5]})
    assert set(fake.log) == {"cpu int8", "ort fp32"}


def test_cli_shows_each_layer_and_step_on_stderr(fake):
    result = invoke(compare_command, FAKE)
    assert result.exit_code == 0, result.output
    # tqdm's line, redrawn as each step starts: the layers timed so far and the step.
    assert re.search(r"\rcompare resnet18:\s+0%\|.*\| 0/2 \[.*, numpy reference C90\]", result.stderr)
    assert re.search(r"\rcompare resnet18:\s+0%\|.*\| 0/2 \[.*, C90: round 1/3: cpu int8\]",
                     result.stderr)
    assert re.search(r"\rcompare resnet18:\s+50%\|.*\| 1/2 \[.*, C91: round 3/3: numpy fp32\]",
                     result.stderr)
    assert "compare resnet18" not in result.stdout
