"""Design-space exploration: space files, the sweep on the RTL with an injected area model,
resuming, and the Pareto front against a brute-force dominance check."""

import json

import pytest

from vdla.tune import dse
from vdla.bench.executor import Pool
from vdla.bench.plots import pareto
from vdla.bench.layer_run import run_layer
from vdla.compiler import Conv2d
from vdla.compiler.workloads import Workload
from vdla.hw.config import PRESETS

WORKLOADS = [Workload("small", Conv2d(1, 8, 8, 6, 6, kernel=3, padding=1, bias=True), 2)]


def fake_area(config):
    """An area model for tests: MACs and SRAM bytes, a clock that falls with the MAC count."""
    luts = 40 * config.macs_per_cycle + config.acc_buffer_bytes // 64
    return {"luts": luts, "ffs": luts // 2, "brams": 1, "dsps": config.block_out,
            "fmax_mhz": 200.0 / (1 + config.macs_per_cycle / 64)}


def _write(tmp_path, data):
    path = tmp_path / "space.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("data, message", [
    ({"vary": {"gemm": [1]}}, "vary: unknown config field(s) gemm"),
    ({"vary": {"batch": []}}, "vary must map config fields to non-empty lists"),
    ({"schedules": "best"}, "schedules must be 'default' or 'tuned'"),
    ({"base": "huge"}, "base: no preset 'huge'"),
    ({"budget": 3}, "unknown field(s) budget"),
    ({"configs": [{"batch": 3}]}, "configs[0]: batch: must be a power of two"),
    ({"tuner": "bogus"}, "tuner 'bogus': unknown (available: xgb, random, grid)"),
    ({"trials": True}, "trials must be a positive integer, got True"),
    ({"vary": {name: list(range(1, 13)) for name in ("batch", "block_in", "block_out",
               "inp_buffer_bytes", "wgt_buffer_bytes", "acc_buffer_bytes",
               "uop_buffer_bytes", "dram_bus_bits")}},
     "429,981,696 configurations (429,981,696 combinations of vary, 0 listed), more than "
     "the 4,096 a sweep may hold"),
    ({"configs": ["tiny"] * 4100, "vary": {"block_out": [8, 16, 32]}},
     "4,103 configurations (3 combinations of vary, 4,100 listed)"),
])
def test_bad_space_files_are_named(tmp_path, data, message):
    with pytest.raises(dse.DseError, match="space .*" + message.replace("(", r"\(")
                       .replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        dse.load_space(_write(tmp_path, data))


def test_space_sweeps_the_product_and_skips_invalid_configs(tmp_path):
    space = dse.load_space(_write(tmp_path, {"base": "tiny", "configs": ["odd"], "vary": {
        "block_out": [4, 8], "dram_bus_bits": [32, 2048]}}))
    configs, skipped = space.configs()
    assert [c.name for c in configs] == ["odd", "block_out=4,dram_bus_bits=32",
                                         "block_out=8,dram_bus_bits=32"]
    assert configs[2] == PRESETS["tiny"].replace(block_out=8, name=configs[2].name)
    assert len(skipped) == 2 and all("dram_bus_bits: must be 8..1024" in s for s in skipped)


def test_pareto_front_keeps_exactly_the_undominated():
    records = [{"name": str(i), "error": None, "area": {"luts": a}, "time_s": t}
               for i, (a, t) in enumerate([(5, 9), (3, 9), (7, 2), (3, 8), (9, 2), (6, 5)])]
    front = dse.pareto_front(records)

    def dominated(r):
        return any(o["area"]["luts"] <= r["area"]["luts"] and o["time_s"] <= r["time_s"]
                   and (o["area"]["luts"], o["time_s"]) != (r["area"]["luts"], r["time_s"])
                   for o in records)
    assert {r["name"] for r in front} == {r["name"] for r in records if not dominated(r)}
    with pytest.raises(dse.DseError, match="unknown area metric 'gates'"):
        dse.pareto_front(records, "gates")


@pytest.mark.rtl
def test_sweep_measures_on_the_rtl_and_resumes(tmp_path):
    space = dse.load_space(_write(tmp_path, {"configs": ["tiny", "odd"]}))
    log = tmp_path / "dse.jsonl"
    seen = []
    with Pool(jobs=1) as pool:
        records = dse.run_dse(space, WORKLOADS, log=log, pool=pool, area=fake_area,
                              progress=seen.append)
    assert [r["name"] for r in records] == ["tiny", "odd"] and len(seen) == 2
    for record, name in zip(records, ["tiny", "odd"]):
        config = PRESETS[name]
        layer = run_layer(WORKLOADS[0], config, "rtl")
        assert record["error"] is None and layer.correct
        assert record["cycles"] == layer.cycles * WORKLOADS[0].uses
        assert record["time_s"] == pytest.approx(record["cycles"]
                                                 / (fake_area(config)["fmax_mhz"] * 1e6))
    with pytest.raises(dse.DseError, match="already holds 2 configuration\\(s\\).*--resume"):
        dse.run_dse(space, WORKLOADS, log=log, area=fake_area)
    again = dse.run_dse(space, WORKLOADS, log=log, area=fake_area, resume=True,
                        progress=seen.append)
    assert again == records and len(seen) == 2             # nothing evaluated twice
    drawn = pareto(records, dse.pareto_front(records), "luts", tmp_path / "p.png")
    assert len(drawn["points"]) == 2 and (tmp_path / "p.png").stat().st_size > 0


def test_space_reads_are_bounded():
    with pytest.raises(dse.DseError, match=r"space /dev/zero: larger than 1048576 bytes, not a "
                                           r"space file"):
        dse.load_space("/dev/zero")


def _fake_evaluation(failing):
    """`dse.evaluate_config` without the RTL or synthesis: configs named in ``failing``
    fail, the others get a cycle count and an area; each call is counted in a file."""
    def evaluate(config, workloads, space, area=None):
        with open(COUNT_FILE, "a") as file:
            file.write(config.name + "\n")
        record = {"config": config.to_dict(), "config_hash": config.hash,
                  "design": dse.verilog_digest(config), "schedules": space.schedules,
                  "layers": {}, "error": None}
        if config.name in failing:
            return {**record, "error": "DseError: small: boom"}
        area = fake_area(config)
        return {**record, "cycles": 1000 * config.block_out, "area": area,
                "fmax_mhz": area["fmax_mhz"], "clock_mhz": area["fmax_mhz"],
                "time_s": config.block_out / area["fmax_mhz"] * 1e-3}
    return evaluate


COUNT_FILE = "evaluated.txt"


@pytest.mark.slow
def test_a_failed_config_fails_the_sweep_and_is_evaluated_again_on_resume(tmp_path,
                                                                          monkeypatch):
    from vdla.cli.main import cli
    from tests.cli.click_runner import invoke
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path / "cache"))
    space = _write(tmp_path, {"configs": ["tiny", "odd"]})
    monkeypatch.setattr(dse, "evaluate_config", _fake_evaluation({"tiny", "odd"}))
    result = invoke(cli, ["dse", "--space", space, "--layers", "C2"])
    assert result.exit_code == 1
    assert "wrote dse.json\n" in result.output and "dse.png" not in result.output
    # the default log is the sweep's, in the cache folder: nothing else lands in the cwd
    (log,) = (tmp_path / "cache" / "dse").iterdir()
    assert result.output.endswith(f"Error: 2 of 2 configuration(s) failed (tiny, odd): see "
                                  f"{log}; --resume evaluates them again\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "dse.json", COUNT_FILE,
                                                          "space.json"]
    assert not (tmp_path / "dse.png").exists()
    assert json.loads((tmp_path / "dse.json").read_text())["front"] == []
    monkeypatch.setattr(dse, "evaluate_config", _fake_evaluation({"odd"}))
    result = invoke(cli, ["dse", "--space", space, "--layers", "C2", "--resume"])
    assert result.exit_code == 1 and "1 of 2 configuration(s) failed (odd)" in result.output
    assert "wrote dse.json, dse.png" in result.output and (tmp_path / "dse.png").exists()
    monkeypatch.setattr(dse, "evaluate_config", _fake_evaluation(set()))
    result = invoke(cli, ["dse", "--space", space, "--layers", "C2", "--resume"])
    assert result.exit_code == 0, result.output
    # each failure was evaluated again, a success never
    assert (tmp_path / COUNT_FILE).read_text().split() == ["tiny", "odd", "tiny", "odd", "odd"]


@pytest.mark.parametrize("change, message", [
    ({"time_s": float("nan")}, r"dse.jsonl:1: DSE record: time_s nan: expected a finite "
                               r"number, 0 or more"),
    ({"cycles": "many"}, r"dse.jsonl:1: DSE record: cycles 'many': expected an integer"),
    ({"design": None}, r"dse.jsonl:1: DSE record: design None: expected a string"),
])
def test_a_damaged_dse_record_is_refused_naming_it(tmp_path, monkeypatch, change, message):
    monkeypatch.chdir(tmp_path)
    config = PRESETS["tiny"]
    space = dse.load_space(_write(tmp_path, {"configs": ["tiny"]}))
    record = {**_fake_evaluation(set())(config, WORKLOADS, space), "name": "tiny",
              "workloads": ["small"], **change}
    log = tmp_path / "dse.jsonl"
    log.write_text(json.dumps(record) + "\n")
    with pytest.raises(dse.DseError, match=message):
        dse.run_dse(space, WORKLOADS, log=log, resume=True, area=fake_area)


@pytest.mark.parametrize("args, message", [
    (["--space", "missing.json"], "cannot read space missing.json"),
    (["--space", "{space}", "--layers", "C1"], "unknown resnet18 layer(s) C1"),
])
def test_dse_cli_errors_are_one_line(tmp_path, monkeypatch, args, message):
    from click.testing import CliRunner
    from vdla.cli.main import cli
    monkeypatch.chdir(tmp_path)
    space = _write(tmp_path, {"configs": ["tiny"]})
    result = CliRunner().invoke(cli, ["dse", *[a.format(space=space) for a in args]])
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.rtl
def test_tuned_schedules_are_never_slower_than_the_default(tmp_path):
    space = dse.load_space(_write(tmp_path, {"configs": ["tiny"], "schedules": "tuned",
                                             "trials": 4, "tuner": "random"}))
    config = PRESETS["tiny"]
    tuned = dse.evaluate_config(config, WORKLOADS, space, area=fake_area)
    default = run_layer(WORKLOADS[0], config, "rtl")
    assert tuned["error"] is None
    assert tuned["layers"]["small"]["cycles"] <= default.cycles
