"""`bench.compare`: every column checked, missing peers reported, the tables."""

from __future__ import annotations

import json
import sys

import pytest

from vdla.bench import compare
from vdla.compiler.ops import Conv2d
from vdla.compiler.workloads import RESNET18, Workload
from vdla.hw.config import PRESETS

SMALL = (Workload("C90", Conv2d(1, 20, 24, 8, 8, kernel=3, padding=1, bias=True, shift=8,
                                relu=True), 2),)


def test_cpu_and_numpy_columns_are_measured_and_checked():
    report = compare.run_comparison(PRESETS["tiny"], ("cpu",), workloads=SMALL, repeats=1)
    columns = report["columns"]
    assert columns["cpu int8"]["checked"]["C90"] == "bit-exact"
    assert columns["cpu fp32"]["checked"]["C90"] == "rtol 1e-5"
    assert columns["numpy fp32"]["total_seconds"] == pytest.approx(
        2 * columns["numpy fp32"]["seconds"]["C90"])
    assert "accel" not in columns
    text = "\n".join(compare.format_table(report))
    assert "C90 x2" in text and "total" in text
    markdown = compare.markdown_table(report)
    assert markdown[2].startswith("| C90 | 2 | ") and markdown[-1].startswith("| **total**")
    assert report["machine"]["cores"] >= 1


def test_missing_onnxruntime_is_not_measured(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    report = compare.run_comparison(PRESETS["tiny"], ("cpu",), workloads=SMALL, repeats=1)
    for name in ("ort fp32", "ort qlinear u8", "ort convinteger"):
        missing = report["columns"][name]["missing"]
        # onnx (the model builder) is looked up first: whichever is absent is named
        assert missing.startswith("not measured: onnx") and "is not installed" in missing
        assert report["columns"][name]["total_seconds"] is None
    assert "cpu int8 / ort fp32" not in report["ratios"]
    assert "not measured" in "\n".join(compare.format_table(report))


def test_onnxruntime_peers_agree_with_numpy():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    report = compare.run_comparison(PRESETS["tiny"], ("cpu",), workloads=SMALL, repeats=1)
    checked = {name: report["columns"][name]["checked"]["C90"] for name in compare.INT8_ORT}
    assert checked["ort convinteger"] == "bit-exact int32"
    assert report["ratios"]["cpu int8 / ort best int8"] > 0


def test_accelerator_column_uses_baseline_cycles_at_the_clock():
    layer = (RESNET18[2],)  # C4: 1x1, quick on fsim
    report = compare.run_comparison(PRESETS["tiny"], ("accel",), clock_mhz=50, workloads=layer,
                                    repeats=1)
    baseline = json.loads(compare_baseline_text())
    cycles = baseline["layers"]["C4"]["cycles"]
    assert report["columns"]["accel"]["seconds"]["C4"] == pytest.approx(cycles / 50e6)
    assert report["columns"]["accel"]["checked"]["C4"] == "bit-exact on fsim"


def test_the_accelerator_clock_is_the_option_else_the_recorded_fmax_else_nominal(
        tmp_path, monkeypatch):
    from vdla.hw.synth import SynthReport, record_fmax
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path))
    tiny = PRESETS["tiny"]
    mhz, source = compare.accel_clock(tiny)
    assert mhz == compare.DEFAULT_CLOCK_MHZ and source.startswith("nominal 100 MHz")
    record_fmax(tiny, SynthReport(luts=1, ffs=1, brams=0, dsps=0, fmax_mhz=87.5,
                                  device="LFE5U-85F", fits=True, stage="place_and_route"))
    assert compare.accel_clock(tiny)[0] == 87.5
    assert compare.accel_clock(tiny, 40) == (40.0, "--clock-mhz")
    layer = (RESNET18[2],)
    report = compare.run_comparison(tiny, ("accel",), workloads=layer, repeats=1)
    assert report["clock_mhz"] == 87.5 and "Fmax of config tiny" in report["clock_source"]
    cycles = json.loads(compare_baseline_text())["layers"]["C4"]["cycles"]
    assert report["columns"]["accel"]["seconds"]["C4"] == pytest.approx(cycles / 87.5e6)
    assert "accel clock: 87.5 MHz, Fmax of config tiny" in "\n".join(compare.format_table(report))


def test_layers_without_baseline_cycles_leave_the_accelerator_unmeasured():
    report = compare.run_comparison(PRESETS["tiny"], ("accel",), workloads=SMALL, repeats=1)
    assert report["columns"]["accel"]["missing"] == "tiny.json has no cycles for C90"


def compare_baseline_text() -> str:
    from vdla.bench.suite import baseline_path
    return baseline_path(PRESETS["tiny"]).read_text()
