"""`bench.compare`: every column checked, missing peers reported, blocks in random order, the
figures from them (on a fake clock), the tables."""

from __future__ import annotations

import json
import sys

import pytest

from vdla.bench import compare
from vdla.compiler.ops import Conv2d
from vdla.compiler.workloads import RESNET18, Workload
from vdla.hw.config import PRESETS
from tests.bench.fake_implementations import FakeMachine

SMALL = (Workload("C90", Conv2d(1, 20, 24, 8, 8, kernel=3, padding=1, bias=True, shift=8,
                                relu=True), 2),)
TWO = SMALL + (Workload("C91", Conv2d(1, 24, 40, 8, 8, kernel=1, stride=2, bias=True, shift=6,
                                      relu=True), 1),)
QUICK = {"repeats": 1, "calls": 1, "warmup": 0}


def test_cpu_and_numpy_columns_are_measured_and_checked():
    report = compare.run_comparison(PRESETS["tiny"], ("cpu",), workloads=SMALL, **QUICK)
    columns = report["columns"]
    assert columns["cpu int8"]["checked"]["C90"] == "bit-exact"
    assert columns["cpu fp32"]["checked"]["C90"] == "rtol 1e-5"
    assert columns["numpy fp32"]["total_seconds"] == pytest.approx(
        2 * columns["numpy fp32"]["seconds"]["C90"])
    assert "accel" not in columns
    text = "\n".join(compare.format_table(report))
    assert "C90 x2" in text and "total" in text
    markdown = compare.markdown_table(report)
    assert markdown[2].startswith("| C90 | 2 | ") and markdown[-2].startswith("| **total**")
    assert report["machine"]["cores"] >= 1


def test_missing_onnxruntime_is_not_measured(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    report = compare.run_comparison(PRESETS["tiny"], ("cpu",), workloads=SMALL, **QUICK)
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
    report = compare.run_comparison(PRESETS["tiny"], ("cpu",), workloads=SMALL, **QUICK)
    checked = {name: report["columns"][name]["checked"]["C90"]
               for name in compare.TIMED if name.startswith("ort")}
    assert checked["ort convinteger"] == checked["ort convinteger nospin"] == "bit-exact int32"
    assert checked["ort fp32"] == checked["ort fp32 nospin"] == "rtol 1e-5"
    assert report["ratios"]["cpu int8 / ort best int8 nospin"] > 0
    assert "intra-op spinning off" in report["columns"]["ort fp32 nospin"]["note"]
    assert "spinning on (onnxruntime's default)" in report["columns"]["ort fp32"]["note"]


def test_accelerator_column_uses_baseline_cycles_at_the_clock():
    layer = (RESNET18[2],)  # C4: 1x1, quick on fsim
    report = compare.run_comparison(PRESETS["tiny"], ("accel",), clock_mhz=50, workloads=layer,
                                    **QUICK)
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
    report = compare.run_comparison(tiny, ("accel",), workloads=layer, **QUICK)
    assert report["clock_mhz"] == 87.5 and "Fmax of config tiny" in report["clock_source"]
    cycles = json.loads(compare_baseline_text())["layers"]["C4"]["cycles"]
    assert report["columns"]["accel"]["seconds"]["C4"] == pytest.approx(cycles / 87.5e6)
    assert "accel clock: 87.5 MHz, Fmax of config tiny" in "\n".join(compare.format_table(report))


def test_layers_without_baseline_cycles_leave_the_accelerator_unmeasured():
    report = compare.run_comparison(PRESETS["tiny"], ("accel",), workloads=SMALL, **QUICK)
    assert report["columns"]["accel"]["missing"] == "tiny.json has no cycles for C90"


def fake_run(monkeypatch, seed=0, rounds=3, warmup=1, calls=2, only=None):
    machine = FakeMachine(monkeypatch, warmup + calls)
    report = compare.run_comparison(PRESETS["tiny"], ("cpu",), workloads=TWO, seed=seed,
                                    repeats=rounds, calls=calls, warmup=warmup, only=only)
    return machine.log, report


def test_each_implementation_runs_in_blocks_of_its_own_in_a_seeded_random_order(monkeypatch):
    log, _ = fake_run(monkeypatch, rounds=4)
    block, names = 3, list(compare.TIMED)
    per_layer = len(names) + len(names) * 4 * block
    assert len(log) == 2 * per_layer
    orders = []
    for part in (log[:per_layer], log[per_layer:]):
        assert part[:len(names)] == names  # each output checked once, before any block
        blocks = [part[start:start + block] for start in range(len(names), per_layer, block)]
        assert all(len(set(calls)) == 1 for calls in blocks)
        firsts = [calls[0] for calls in blocks]
        # numpy's blocks come last; the others' rounds are each a permutation of them
        assert firsts[-4:] == ["numpy fp32"] * 4
        rounds = [firsts[r * 10:(r + 1) * 10] for r in range(4)]
        assert all(sorted(order) == sorted(names[:-1]) for order in rounds)
        orders += map(tuple, rounds)
    assert len(set(orders)) == len(orders)
    assert fake_run(monkeypatch, rounds=4)[0] == log
    assert fake_run(monkeypatch, seed=1, rounds=4)[0] != log


def test_medians_spreads_round_totals_and_ratios(monkeypatch):
    _, report = fake_run(monkeypatch)
    cpu, ort = report["columns"]["cpu int8"], report["columns"]["ort qlinear u8"]
    # cpu int8 takes 1, 2, 3 ms in rounds 1, 2, 3 (2 timed calls each): median 2,
    # p10 at rank 0.5 of [1 1 2 2 3 3] -> 1, p90 at rank 4.5 -> 3; C90 x2 + C91 x1.
    assert cpu["seconds"] == pytest.approx({"C90": 2e-3, "C91": 2e-3})
    assert cpu["p10_seconds"]["C91"] == pytest.approx(1e-3)
    assert cpu["p90_seconds"]["C91"] == pytest.approx(3e-3)
    assert cpu["block_medians"]["C90"] == pytest.approx([1e-3, 2e-3, 3e-3])
    assert cpu["total_seconds"] == pytest.approx(6e-3)
    assert cpu["round_totals"] == pytest.approx([3e-3, 6e-3, 9e-3])
    assert ort["total_seconds"] == pytest.approx(1.5e-3)
    assert ort["p90_seconds"]["C90"] == pytest.approx(0.5e-3)
    assert report["ratios"] == pytest.approx({
        "cpu int8 / ort best int8": 6 / 1.5, "cpu int8 / ort fp32": 6 / 6,
        "cpu fp32 / ort fp32": 12 / 6, "cpu int8 / ort best int8 nospin": 6 / 3,
        "cpu int8 / ort fp32 nospin": 6 / 15, "cpu fp32 / ort fp32 nospin": 12 / 15})
    assert report["ratio_ranges"]["cpu int8 / ort best int8"] == pytest.approx([2.0, 6.0])
    assert report["ratio_ranges"]["cpu fp32 / ort fp32 nospin"] == pytest.approx([0.8, 0.8])
    assert (report["repeats"], report["calls"], report["warmup"], report["seed"]) == (3, 2, 1, 0)
    lines = compare.format_table(report)
    assert "medians of 3 rounds x 2 calls" in lines[0]
    assert lines[1].split() == ["implementation", "C90", "x2", "C91", "x1", "total",
                                "rounds'", "totals"]
    assert lines[2].split() == ["cpu", "int8", "2.000", "2.000", "6.00", "3.00-9.00"]
    assert "cpu int8 / ort best int8: 4.00 (2.00-6.00 over the rounds)" in lines
    markdown = compare.markdown_table(report)
    assert markdown[-1].startswith("| rounds' totals, lowest–highest | | 3.00–9.00 | ")


def test_the_plot_draws_the_percentiles_as_whiskers(monkeypatch, tmp_path):
    from matplotlib import pyplot
    _, report = fake_run(monkeypatch)
    drawn, bar = [], pyplot.Axes.bar

    def recorded_bar(self, *args, **kwargs):
        drawn.append(kwargs)
        return bar(self, *args, **kwargs)
    monkeypatch.setattr(pyplot.Axes, "bar", recorded_bar)
    compare.plot_comparison(report, tmp_path / "compare.png")
    assert (tmp_path / "compare.png").stat().st_size > 0 and len(drawn) == len(compare.TIMED)
    low, high = drawn[0]["yerr"]  # cpu int8: median 2 ms, p10 1 ms, p90 3 ms on both layers
    assert list(low) == pytest.approx([1.0, 1.0]) and list(high) == pytest.approx([1.0, 1.0])


def test_only_the_named_implementations_are_timed(monkeypatch):
    log, report = fake_run(monkeypatch, only=["ort fp32 nospin", "cpu fp32"])
    assert set(log) == {"ort fp32 nospin", "cpu fp32"}
    assert list(report["columns"]) == ["cpu fp32", "ort fp32 nospin"]
    assert report["ratios"] == pytest.approx({"cpu fp32 / ort fp32 nospin": 12 / 15})


@pytest.mark.parametrize("targets, only, message", [
    (("cpu",), ["ort fp16"], r"^unknown implementation 'ort fp16' \(known: cpu int8, cpu fp32, "),
    (("accel",), ["cpu int8"], r"^implementation 'cpu int8' needs target cpu$"),
    (("cpu",), [], r"^no implementation named$")])
def test_unknown_implementations_are_refused(targets, only, message):
    with pytest.raises(ValueError, match=message):
        compare.timed_names(targets, only)


def compare_baseline_text() -> str:
    from vdla.bench.baseline import baseline_path
    return baseline_path(PRESETS["tiny"]).read_text()
