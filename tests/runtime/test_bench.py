"""``vdla bench`` and `bench.suite` (with `bench.layer_run`, `bench.report`,
`bench.baseline`): layer runs, the JSON report, baselines, plots.

Fast tests run on fsim at ``tiny`` or on a stand-in layer runner with chosen
cycle counts (to test the baseline check and the ablation exactly). The
``rtl`` tests compare real cycle counts with the committed baselines.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.cli.bench import command as bench_command
from vdla.compiler.ops import Conv2d
from vdla.hw.config import PRESETS
from vdla.bench import suite as bench
from vdla.bench.baseline import baseline_path, check_baseline, load_baseline, write_baseline
from vdla.bench.layer_run import ideal_cycles
from vdla.bench.records import BenchResult, LayerResult
from vdla.bench.suite import BenchError
from vdla.hw.isa import MODULES
from vdla.bench.plots import PlotError, roofline, timeline

TINY, DEFAULT = PRESETS["tiny"], PRESETS["default"]
REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def invoke(args):
    return CliRunner().invoke(bench_command, [str(arg) for arg in args])


def conv_macs(cin, cout, size, kernel, stride):
    """MACs of a ResNet conv with 'same' padding, counted independently of `Conv2d.macs`."""
    out = (size + 2 * (kernel // 2) - kernel) // stride + 1
    return cout * out * out * cin * kernel * kernel


@pytest.fixture
def in_process(monkeypatch):
    """Run layers on threads so that monkeypatches reach them."""
    monkeypatch.setattr(bench, "make_executor",
                        lambda jobs=1, scheduler=None: concurrent.futures.ThreadPoolExecutor(jobs))


@pytest.fixture
def fake_cycles(monkeypatch, in_process):
    """Replace simulation by chosen cycle counts: ``fake_cycles[(name, hiding)] = cycles``."""
    table: dict[tuple[str, bool], int] = {}

    def run_layer(workload, config, sim="rtl", *, latency_hiding=True, seed=0,
                  backend_options=None):
        cycles = table[(workload.name, latency_hiding)]
        op = workload.op
        return LayerResult(name=workload.name, op=op.describe(), uses=workload.uses,
                           macs=op.macs, ideal_cycles=ideal_cycles(op, config),
                           cycles=cycles,
                           gemm_utilization=op.macs / (cycles * config.macs_per_cycle),
                           correct=True, mismatches=0, dram_bytes_read=4096,
                           dram_bytes_written=1024,
                           modules={m: {"busy": cycles // 2, "wait_token": cycles // 4,
                                        "wait_mem": cycles // 8} for m in MODULES},
                           instructions=10, schedule={"tile_h": 1},
                           latency_hiding=latency_hiding)

    monkeypatch.setattr(bench, "run_layer", run_layer)
    monkeypatch.setattr(bench, "prepare_backend", lambda *args, **kwargs: {})
    return table


# --------------------------------------------------------------------------- selection
def test_select_workloads_keeps_network_order_and_ignores_case():
    names = [w.name for w in bench.select_workloads("c5, C2 ,C11")]
    assert names == ["C2", "C5", "C11"]
    assert [w.name for w in bench.select_workloads(None)] == [f"C{i}" for i in range(2, 12)]


@pytest.mark.parametrize("names, message", [
    ("C1", "unknown resnet18 layer(s) C1"), ("C2,,C3", "comma-separated"),
    ("C2,X9,C99", "X9, C99")])
def test_select_workloads_rejects_bad_names(names, message):
    with pytest.raises(BenchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bench.select_workloads(names)


def test_ideal_cycles_of_resnet18_at_default_is_vtas_figure():
    total = sum(ideal_cycles(w.op, DEFAULT) * w.uses for w in bench.select_workloads(None))
    assert total == 6_623_232
    # Independent of Conv2d.macs: C2 is 64->64 channels, 56x56, 3x3, stride 1.
    assert ideal_cycles(bench.select_workloads("C2")[0].op, DEFAULT) == \
        math.ceil(conv_macs(64, 64, 56, 3, 1) / 256)


# --------------------------------------------------------------------------- fsim runs
@pytest.mark.slow
def test_bench_on_fsim_reports_correctness_and_json_schema(tmp_path):
    out = tmp_path / "report.json"
    result = invoke(["resnet18", "--sim", "fsim", "--config", "tiny", "--layers", "C10,C7",
                     "--jobs", "2", "--json", out])
    assert result.exit_code == 0, result.output
    assert "all 2 layer(s) match numpy" in result.stdout
    report = json.loads(out.read_text())
    assert report["config"] == TINY.to_dict()
    assert report["sim"] == "fsim" and report["latency_hiding"] is True
    assert [layer["name"] for layer in report["layers"]] == ["C7", "C10"]
    expected_macs = {"C7": conv_macs(128, 256, 28, 1, 2), "C10": conv_macs(256, 512, 14, 1, 2)}
    for layer in report["layers"]:
        assert layer["correct"] is True and layer["mismatches"] == 0
        assert layer["macs"] == expected_macs[layer["name"]]
        assert layer["ideal_cycles"] == math.ceil(expected_macs[layer["name"]] / 16)
        # Untimed: only correctness.
        assert layer["cycles"] is None and layer["gemm_utilization"] is None
        assert layer["instructions"] == sum(layer["instructions_per_module"].values()) > 0
        assert layer["schedule"]["latency_hiding"] is True
    assert report["resnet18_total_cycles"] is None
    assert report["complete"] is False and report["all_correct"] is True


def test_a_wrong_layer_is_reported_then_fails(tmp_path, monkeypatch, in_process):
    def broken_reference(self, data, weight, bias=None):
        return np.ones(self.output_shape, dtype=np.int8) * 7
    monkeypatch.setattr(Conv2d, "reference", broken_reference)
    out = tmp_path / "report.json"
    result = invoke(["resnet18", "--sim", "fsim", "--config", "tiny", "--layers", "C10",
                     "--json", out])
    assert result.exit_code == 1
    assert "FAIL C10 (latency hiding on):" in result.stdout
    assert "output element(s) differ from numpy" in result.stdout
    layer = json.loads(out.read_text())["layers"][0]  # the report is still written
    assert layer["correct"] is False and layer["mismatches"] > 0


def test_a_layer_that_raises_is_an_error_not_a_crash(monkeypatch, in_process):
    def broken_compile(*args, **kwargs):
        raise ValueError("no schedule fits\nsecond line")
    monkeypatch.setattr("vdla.compiler.compile_op", broken_compile)
    result = bench.run_bench(bench.select_workloads("C10"), TINY, "fsim",
                             executor=concurrent.futures.ThreadPoolExecutor(1))
    (layer,) = result.layers
    assert layer.error == "compiling: ValueError: no schedule fits"
    assert not layer.correct and not result.all_correct


def test_run_bench_uses_the_callers_executor_and_leaves_it_open():
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        seen = []
        result = bench.run_bench(bench.select_workloads("C10"), TINY, "fsim", executor=pool,
                                 progress=seen.append)
        assert [layer.name for layer in seen] == ["C10"]
        assert result.layers[0].correct
        assert pool.submit(lambda: 3).result() == 3


# --------------------------------------------------------------------------- bad input
def test_a_scheduler_without_dask_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    result = invoke(["resnet18", "--sim", "fsim", "--scheduler", "tcp://127.0.0.1:8786"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: scheduler 'tcp://127.0.0.1:8786': running on a Dask cluster needs the "
        "'distributed' package (pip install distributed)")


@pytest.mark.parametrize("args, message", [
    (["resnet50"], "unknown benchmark 'resnet50'"),
    (["resnet18", "--layers", "C1"], "unknown resnet18 layer(s) C1"),
    (["resnet18", "--config", "nope"], "config nope: no such preset"),
    (["resnet18", "--sim", "nope"], "--sim 'nope': unknown simulator"),
    (["resnet18", "--sim", "fsim", "--roofline", "r.png"], "--roofline needs cycles"),
    (["resnet18", "--sim", "fsim", "--check-baseline"], "--check-baseline needs cycles"),
    (["resnet18", "--ablation", "--no-latency-hiding"], "--ablation already runs"),
    (["resnet18", "--check-baseline", "--update-baseline"], "exclude each other"),
    (["resnet18", "--update-baseline", "--no-latency-hiding"], "baselines record the default"),
    (["resnet18", "--check-baseline", "/nonexistent/base.json"], "no baseline /nonexistent"),
    (["resnet18", "--scheduler", "tcp://127.0.0.1:1", "--jobs", "2"], "--jobs sets local"),
])
def test_bad_input_is_one_line(args, message):
    result = invoke(args)
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert message in lines[0]


# --------------------------------------------------------------------------- baselines
def _result(cycles: dict[str, int | None], config=DEFAULT) -> BenchResult:
    layers = []
    for workload in bench.select_workloads(list(cycles)):
        layers.append(LayerResult(name=workload.name, op="", uses=workload.uses,
                                  macs=workload.op.macs,
                                  ideal_cycles=ideal_cycles(workload.op, config),
                                  cycles=cycles[workload.name],
                                  correct=cycles[workload.name] is not None,
                                  error=None if cycles[workload.name] else "simulating: boom"))
    return BenchResult("resnet18", config, "rtl", True, 0, layers, complete=False)


def _baseline(cycles: dict[str, int], config=DEFAULT) -> dict:
    return {"benchmark": "resnet18", "config_hash": config.hash,
            "layers": {name: {"cycles": value} for name, value in cycles.items()}}


def test_growth_over_one_percent_fails_naming_the_layer():
    check = check_baseline(_result({"C2": 102_000, "C5": 50_000}),
                                 _baseline({"C2": 100_000, "C5": 50_000}), "base.json")
    assert not check.ok
    assert [(e.name, e.status) for e in check.entries] == [("C2", "regression"),
                                                            ("C5", "unchanged")]
    text = "\n".join(check.lines())
    assert "REGRESSION C2: 100,000 -> 102,000 cycles (+2.00%" in text
    assert "FAIL" in text and "C5" not in text.split("baseline")[0]


@pytest.mark.parametrize("new, status", [(100_500, "slower"), (101_000, "slower"),
                                         (100_000, "unchanged"), (90_000, "improvement")])
def test_growth_within_one_percent_or_shrink_passes(new, status):
    check = check_baseline(_result({"C2": new}), _baseline({"C2": 100_000}))
    assert check.ok
    assert check.entries[0].status == status
    text = "\n".join(check.lines())
    assert ("--update-baseline" in text) == (status == "improvement")
    if status == "improvement":
        assert "improvement C2: 100,000 -> 90,000 cycles (-10.00%)" in text


def test_just_over_one_percent_fails():
    check = check_baseline(_result({"C2": 101_001}), _baseline({"C2": 100_000}))
    assert not check.ok


def test_a_layer_without_cycles_fails_and_new_layers_pass():
    check = check_baseline(_result({"C2": None, "C5": 10}), _baseline({"C2": 100}))
    assert not check.ok
    assert {e.name: e.status for e in check.entries} == {"C2": "missing", "C5": "new"}
    # A baseline sharing no layer with the run compares nothing: that is no pass.
    with pytest.raises(BenchError, match=r"records none of this run's layers \(C5\): "
                                         "nothing to compare"):
        check_baseline(_result({"C5": 10}), _baseline({"C2": 100}))


def test_a_failed_layer_the_baseline_lacks_is_reported_missing():
    check = check_baseline(_result({"C2": None, "C5": 10}), _baseline({"C5": 10}))
    assert not check.ok
    assert check.entries[0].status == "missing"
    assert "MISSING C2: not in the baseline, no cycles this run" in "\n".join(check.lines())


def test_a_baseline_of_other_hardware_is_refused():
    with pytest.raises(BenchError, match="recorded on other hardware"):
        check_baseline(_result({"C2": 100}), _baseline({"C2": 100}, TINY))


def test_a_baseline_is_not_recorded_from_wrong_or_untimed_results(tmp_path):
    with pytest.raises(BenchError, match="incorrect layer"):
        write_baseline(_result({"C2": None, "C5": 10}), tmp_path / "b.json")
    untimed = _result({"C2": 1})
    untimed.layers[0].cycles = None
    with pytest.raises(BenchError, match="needs cycles"):
        write_baseline(untimed, tmp_path / "b.json")
    assert not (tmp_path / "b.json").exists()


def test_update_then_check_through_the_cli(tmp_path, fake_cycles):
    base = tmp_path / "base.json"
    fake_cycles.update({("C2", True): 100_000, ("C10", True): 20_000})
    result = invoke(["resnet18", "--layers", "C2,C10", "--update-baseline", base])
    assert result.exit_code == 0, result.output
    recorded = json.loads(base.read_text())
    assert {name: entry["cycles"] for name, entry in recorded["layers"].items()} == \
        {"C2": 100_000, "C10": 20_000}
    assert recorded["config_hash"] == DEFAULT.hash
    assert recorded["layers"]["C2"]["schedule"] == {"tile_h": 1}

    # A subset update changes only its layers.
    fake_cycles[("C10", True)] = 19_000
    assert invoke(["resnet18", "--layers", "C10", "--update-baseline", base]).exit_code == 0
    recorded = json.loads(base.read_text())
    assert {name: entry["cycles"] for name, entry in recorded["layers"].items()} == \
        {"C2": 100_000, "C10": 19_000}

    fake_cycles[("C2", True)] = 100_900  # +0.9 %: passes
    result = invoke(["resnet18", "--layers", "C2,C10", "--check-baseline", base])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stdout

    fake_cycles[("C10", True)] = 19_500  # +2.6 %: fails after the whole report
    out = tmp_path / "r.json"
    result = invoke(["resnet18", "--layers", "C2,C10", "--check-baseline", base, "--json", out])
    assert result.exit_code == 1
    assert "REGRESSION C10: 19,000 -> 19,500 cycles" in result.stdout
    assert "C2" in result.stdout and "total" in result.stdout  # the table came first
    report = json.loads(out.read_text())
    assert report["baseline"]["ok"] is False
    assert {e["name"]: e["status"] for e in report["baseline"]["layers"]} == \
        {"C2": "slower", "C10": "regression"}


def test_default_baseline_path_is_per_config():
    assert baseline_path(TINY) == REPO / "bench" / "baselines" / "tiny.json"


@pytest.mark.parametrize("name", ["tiny", "default", "ecpix5-256"])
def test_committed_baselines_cover_c2_to_c11(name):
    data = load_baseline(REPO / "bench" / "baselines" / f"{name}.json")
    assert data["config_hash"] == PRESETS[name].hash
    assert list(data["layers"]) == [f"C{i}" for i in range(2, 12)]
    uses = {w.name: w.uses for w in bench.select_workloads(None)}
    assert data["resnet18_total_cycles"] == sum(entry["cycles"] * uses[layer]
                                                for layer, entry in data["layers"].items())
    for layer, entry in data["layers"].items():
        assert entry["cycles"] >= entry["ideal_cycles"], layer  # nothing beats the GEMM core


# --------------------------------------------------------------------------- totals, ablation
def test_totals_and_ablation_from_chosen_cycles(tmp_path, fake_cycles):
    with_hiding = {"C2": 500_000, "C4": 60_000, "C11": 470_000}
    without = {"C2": 600_000, "C4": 90_000, "C11": 940_000}
    for name in with_hiding:
        fake_cycles[(name, True)] = with_hiding[name]
        fake_cycles[(name, False)] = without[name]
    out = tmp_path / "r.json"
    result = invoke(["resnet18", "--layers", "C2,C4,C11", "--ablation", "--json", out])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    uses = {"C2": 4, "C4": 1, "C11": 3}
    total = sum(with_hiding[n] * uses[n] for n in uses)
    assert report["resnet18_total_cycles"] == total
    utilization = {n: layer["macs"] / (with_hiding[n] * 256)
                   for n, layer in ((layer["name"], layer) for layer in report["layers"])}
    assert report["geomean_gemm_utilization"] == pytest.approx(
        math.prod(utilization.values()) ** (1 / 3))
    ablation = report["ablation"]
    assert [row["speedup"] for row in ablation["layers"]] == pytest.approx([1.2, 1.5, 2.0])
    assert ablation["resnet18_total_cycles_without_latency_hiding"] == \
        sum(without[n] * uses[n] for n in uses)
    assert ablation["speedup"] == pytest.approx(sum(without[n] * uses[n] for n in uses) / total)
    assert "1.50x" in result.stdout and "2.00x" in result.stdout
    assert "not the whole network" in result.stdout and "VTA" not in result.stdout


def test_whole_network_total_is_compared_with_vta(fake_cycles):
    for workload in bench.select_workloads(None):
        fake_cycles[(workload.name, True)] = 2 * ideal_cycles(workload.op, DEFAULT)
    result = invoke(["resnet18", "--json", "-"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # --json -: the JSON alone on stdout
    assert report["resnet18_total_cycles"] == 2 * 6_623_232
    assert report["resnet18_gemm_utilization"] == pytest.approx(0.5)
    assert report["complete"] is True and report["vta_total_cycles"] == 7_730_000
    text = invoke(["resnet18"]).stdout
    assert "VTA: 7.73 M cycles; this design: 13.25 M" in text


# --------------------------------------------------------------------------- plots
SYNTHETIC_LAYERS = [
    {"name": "A", "macs": 1_000_000, "cycles": 10_000, "dram_bytes_read": 40_000,
     "dram_bytes_written": 10_000},
    {"name": "B", "macs": 2_000_000, "cycles": 9_000, "dram_bytes_read": 4_000,
     "dram_bytes_written": 1_000},
    {"name": "untimed", "macs": 5, "cycles": None, "dram_bytes_read": None,
     "dram_bytes_written": None},
]


def _is_png(path: Path) -> bool:
    data = path.read_bytes()
    return len(data) > 1000 and data.startswith(PNG_MAGIC)


def test_roofline_places_layers_by_intensity_and_throughput(tmp_path):
    path = tmp_path / "sub" / "roofline.png"
    points = roofline(SYNTHETIC_LAYERS, DEFAULT, path,
                      compare=[dict(SYNTHETIC_LAYERS[0], cycles=20_000)])
    assert points == {"A": pytest.approx((2e6 / 50_000, 2e6 / 10_000)),
                      "B": pytest.approx((4e6 / 5_000, 4e6 / 9_000))}
    assert _is_png(path)


def test_roofline_gives_throughput_in_gops_at_a_known_clock(tmp_path, monkeypatch):
    import vdla.bench.plots as plots
    saved = []
    monkeypatch.setattr(plots, "_save", lambda figure, path: saved.append(figure))
    roofline(SYNTHETIC_LAYERS, DEFAULT, tmp_path / "r.png", clock=(125.0, "--clock-mhz"))
    (primary,) = saved[0].axes
    (secondary,) = primary.child_axes
    assert secondary.get_ylabel() == "GOPS at 125 MHz (--clock-mhz)"
    # ops/cycle x 125 MHz: 512 ops/cycle (default's 256 MACs) is 64 GOPS
    saved[0].canvas.draw()
    assert secondary.get_ylim() == pytest.approx(tuple(y * 0.125 for y in primary.get_ylim()))
    roofline(SYNTHETIC_LAYERS, DEFAULT, tmp_path / "r.png")
    assert not saved[1].axes[0].child_axes


def test_roofline_needs_timed_layers(tmp_path):
    with pytest.raises(PlotError, match="timed simulator"):
        roofline(SYNTHETIC_LAYERS[2:], DEFAULT, tmp_path / "r.png")


def test_timeline_draws_states_and_idle_gaps(tmp_path):
    activity = {"load": [(0, 100, "busy"), (100, 150, "wait_mem"), (300, 400, "busy")],
                "compute": [(50, 300, "busy"), (300, 350, "wait_token")],
                "store": [(200, 260, "busy")]}
    path = tmp_path / "timeline.png"
    drawn = timeline(activity, path)
    assert drawn == {
        "load": {"busy": 200, "wait_token": 0, "wait_mem": 50, "idle": 150},
        "compute": {"busy": 250, "wait_token": 50, "wait_mem": 0, "idle": 100},
        "store": {"busy": 60, "wait_token": 0, "wait_mem": 0, "idle": 340},
    }
    assert _is_png(path)
    assert timeline({"store": [(0, 10, "busy")]}, path, cycles=40)["load"]["idle"] == 40


@pytest.mark.parametrize("activity, message", [
    ({"fetch": []}, "unknown module"),
    ({"load": [(0, 10, "sleeping")]}, "unknown state 'sleeping'"),
    ({"load": [(10, 10, "busy")]}, "0 <= start < end"),
    ({"load": [(0, 10)]}, "expected \\(start_cycle, end_cycle, state\\)"),
    ({"load": []}, "no activity"),
])
def test_timeline_rejects_malformed_activity(tmp_path, activity, message):
    with pytest.raises(PlotError, match=message):
        timeline(activity, tmp_path / "t.png")


# --------------------------------------------------------------------------- rtl
def _committed(name: str) -> dict:
    return json.loads((REPO / "bench" / "baselines" / f"{name}.json").read_text())


@pytest.mark.rtl
def test_tiny_c2_to_c11_on_rtl_match_the_baseline_exactly(tmp_path):
    out, png = tmp_path / "tiny.json", tmp_path / "roofline.png"
    result = invoke(["resnet18", "--config", "tiny", "--jobs", "2", "--check-baseline",
                     "--json", out, "--roofline", png])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    baseline = _committed("tiny")
    assert {layer["name"]: layer["cycles"] for layer in report["layers"]} == \
        {name: entry["cycles"] for name, entry in baseline["layers"].items()}
    assert report["resnet18_total_cycles"] == baseline["resnet18_total_cycles"]
    for layer in report["layers"]:
        assert layer["correct"], layer["name"]
        assert layer["gemm_utilization"] == pytest.approx(
            layer["macs"] / (layer["cycles"] * TINY.macs_per_cycle))
        assert layer["dram_bytes_read"] > 0 and layer["dram_bytes_written"] > 0
        compute = layer["modules"]["compute"]
        assert 0 < compute["busy"] <= layer["cycles"]
    assert report["baseline"]["ok"] is True
    assert _is_png(png)


@pytest.mark.rtl
def test_ecpix5_256_c2_to_c11_on_rtl_match_the_baseline_exactly(tmp_path):
    """The 1x32x8 preset's two acc banks: each thread's epilogues beside the other's
    GEMMs (a bias copy per thread), 95 % of the GEMM core's cycles over the network."""
    out = tmp_path / "e256.json"
    result = invoke(["resnet18", "--config", "ecpix5-256", "--jobs", "2", "--check-baseline",
                     "--json", out])
    assert result.exit_code == 0, result.output
    report, baseline = json.loads(out.read_text()), _committed("ecpix5-256")
    assert {layer["name"]: layer["cycles"] for layer in report["layers"]} == \
        {name: entry["cycles"] for name, entry in baseline["layers"].items()}
    assert all(layer["correct"] for layer in report["layers"])
    assert report["resnet18_gemm_utilization"] > 0.95


@pytest.mark.rtl
def test_default_c10_on_rtl_matches_the_baseline_exactly(tmp_path):
    out = tmp_path / "c10.json"
    result = invoke(["resnet18", "--layers", "C10", "--check-baseline", "--json", out])
    assert result.exit_code == 0, result.output
    (layer,) = json.loads(out.read_text())["layers"]
    assert layer["cycles"] == _committed("default")["layers"]["C10"]["cycles"]
    assert layer["correct"] and layer["ideal_cycles"] == conv_macs(256, 512, 14, 1, 2) // 256


# --------------------------------------------------------------------------- benchmarks/README.md
def test_resnet18_section_replaces_only_its_own(tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("resnet18_benchmark",
                                                  REPO / "benchmarks" / "resnet18.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    readme = tmp_path / "README.md"
    module.update_readme("## ResNet-18\n\nfirst\n", readme)  # created when missing
    assert readme.read_text().startswith("# Benchmarks")
    readme.write_text(readme.read_text() + "\n## Compile time\n\nkept\n")
    module.update_readme("## ResNet-18\n\nsecond\n", readme)
    text = readme.read_text()
    assert "second" in text and "first" not in text
    assert text.index("## ResNet-18") < text.index("## Compile time") and "kept" in text
    assert text.count("## ResNet-18") == 1
