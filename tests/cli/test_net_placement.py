"""``vdla compile MODEL.onnx`` when the accelerator refuses a layer: the cpu fallback and its
line in the summary, ``--no-cpu-fallback``, a split dense layer, and the reasons ``vdla
inspect`` prints (`cli.net`, `cli.inspect`)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.cli.click_runner import invoke
from tests.graph.test_placement import BATCH, REFUSED, TOO_LARGE, _model
from vdla.cli.main import cli
from vdla.compiler.accel import driver
from vdla.graph.ops import OPS
from vdla.graph.placement import ACCEL_REASON


@pytest.fixture
def model(tmp_path):
    (tmp_path / "m.onnx").write_bytes(_model())
    np.save(tmp_path / "cal.npy", np.random.default_rng(3).standard_normal((16, 12, 6, 6))
            .astype(np.float32))
    return tmp_path


def _compile(folder, *options):
    return invoke(cli, ["compile", folder / "m.onnx", "--calibration", folder / "cal.npy",
                        "--batch", BATCH, "-o", folder / "net.vdla", *options])


def test_a_refused_layer_falls_back_to_the_cpu_with_one_line_and_its_reason(model):
    result = _compile(model)
    assert result.exit_code == 0 and result.stderr == "", result.output
    changes = [line for line in result.stdout.splitlines() if line.startswith("conv:")]
    assert len(changes) == 1 and re.fullmatch(
        f"conv: on the cpu: the accelerator refuses it: {REFUSED}.*", changes[0])
    summary = json.loads(_compile(model, "--json").stdout)
    assert summary["placement"]["cpu"] == 1 and list(summary["changes"]) == ["conv"]

    result = invoke(cli, ["inspect", model / "net.vdla"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    reasons = lines[lines.index("why each node runs where it does:") + 1:]
    assert re.fullmatch(f"  cpu    conv \\(qconv\\): the accelerator refuses it: {REFUSED}.*",
                        reasons[[line.split()[1] for line in reasons].index("conv")])
    assert f"  accel  fc (qdense): {ACCEL_REASON}" in reasons
    assert f"  host   flatten (flatten): {OPS['flatten'].why}" in reasons
    report = json.loads(invoke(cli, ["inspect", model / "net.vdla", "--json"]).stdout)
    assert {row["name"]: row["reason"] for row in report["nodes"]}["fc"] == ACCEL_REASON


def test_no_cpu_fallback_refuses_in_one_line(model):
    result = _compile(model, "--no-cpu-fallback")
    assert result.exit_code == 1 and result.stdout == ""
    assert re.fullmatch(f"Error: node 'conv' \\(qconv\\): {REFUSED}.* \\(place it on the cpu "
                        "with --on-cpu conv\\)\n", result.stderr)
    # The same layer placed by hand compiles.
    assert _compile(model, "--no-cpu-fallback", "--on-cpu", "conv").exit_code == 0


def test_a_split_dense_layer_is_reported_and_inspected(model, monkeypatch):
    monkeypatch.setattr(driver, "MAX_LAYER_BYTES", 8000)
    result = _compile(model, "--on-cpu", "conv", "--no-cpu-fallback")
    assert result.exit_code == 0, result.output
    limit = TOO_LARGE.format(limit=8000)
    assert any(re.fullmatch(r"fc: split into 3 accelerator layers \(fc/part0, fc/part1, "
                            rf"fc/part2\) joined by 'fc/concat' on the host: {limit}", line)
               for line in result.stdout.splitlines())
    result = invoke(cli, ["inspect", model / "net.vdla"])
    lines = result.stdout.splitlines()
    assert any(re.fullmatch(rf"  accel  fc/part2 \(qdense\): part 3 of 3 of dense layer 'fc', "
                            rf"split along its output features: {limit}", line)
               for line in lines)
    assert f"  host   fc/concat (concat): {OPS['concat'].why}" in lines
