"""The ``cpu`` tuning target: its space and features, real measurements checked against
numpy, a short tuning run with its log and resume, and `vdla compile --tuned` on it."""

import concurrent.futures
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.bench.executor import Pool
from vdla.cli.main import cli
from vdla.compiler import Conv2d, Dense
from vdla.compiler.cpu import CpuProblem, CpuSchedule, cpu_knob_space, estimate_cpu_cost
from vdla.hw.config import load_config
from vdla.tune import TuneSettings, get_target, read_log, tune
from vdla.tune.cpu_target import FEATURE_NAMES, THREADS, TIMED_RUNS, WARMUP_RUNS
from vdla.tune.log import measurement_key

CONFIG = load_config("default")
TARGET = get_target("cpu")
OPS = {"conv": Conv2d(1, 12, 20, 9, 7, kernel=3, stride=2, padding=1, bias=True, shift=10,
                      relu=True),
       "dense": Dense(3, 40, 24, bias=True, shift=9)}


def _thread_pool():
    return Pool(executor=concurrent.futures.ThreadPoolExecutor(1))


@pytest.mark.parametrize("op", [*OPS.values(), Dense(1, 3, 5), Conv2d(2, 70, 130, 5, 30)],
                         ids=["conv", "dense", "tiny", "wide"])
def test_space_round_trips_and_its_legal_points_are_the_knob_space(op):
    space = TARGET.space(op, CONFIG)
    problem = CpuProblem.from_op(op)
    registers = 32 if 16 in space.options("lanes") else 16
    legal = []
    for point in space.points():
        schedule = space.schedule(point)
        assert space.point(schedule) == point
        assert space.decode(json.loads(json.dumps(schedule.to_dict()))) == schedule
        # Independently: accumulators, one vector per weight and two spare fit the
        # registers, and no output-channel vector beyond the first is all padding.
        fits = schedule.oc_vectors * (schedule.ow_tile + 1) + 2 <= registers
        useful = (schedule.oc_vectors - 1) * schedule.lanes < problem.out_channels \
            or schedule.oc_vectors == 1
        assert (TARGET.features(space, schedule) is not None) == (fits and useful)
        if fits and useful:
            legal.append(schedule)
    assert legal == list(cpu_knob_space(op))
    assert TARGET.default(op, CONFIG) in legal


def test_features_name_the_knobs_and_the_estimate():
    op = OPS["conv"]
    space = TARGET.space(op, CONFIG)
    schedule = CpuSchedule(lanes=8, oc_vectors=2, ow_tile=3, ic_block=12, unroll=2,
                           parallel="channels")
    named = dict(zip(FEATURE_NAMES, TARGET.features(space, schedule)))
    assert len(named) == len(TARGET.features(space, schedule))
    assert named["oc_vectors"] == 2 and named["ow_tile"] == 3 and named["log2_lanes"] == 3
    assert named["parallel_channels"] == 1 and named["parallel_rows"] == 0
    assert named["oc_padding"] == pytest.approx(32 / 20)       # 2 blocks of 16 for 20 channels
    assert named["row_tail_fraction"] == pytest.approx(1 / 4)  # 4 output columns, tiles of 3
    estimate = estimate_cpu_cost(CpuProblem.from_op(op), schedule, "int8", THREADS)
    assert FEATURE_NAMES[TARGET.prior_feature] == "log2_estimate"
    assert named["log2_estimate"] == pytest.approx(math.log2(estimate))


@pytest.mark.parametrize("schedule", [
    CpuSchedule(lanes=16, oc_vectors=4, ow_tile=4),       # 4 x 4 accumulators + 4 + 2 > 16
    CpuSchedule(lanes=8, oc_vectors=4, ow_tile=1),        # 3 x 8 lanes already hold 20 channels
    CpuSchedule(lanes=8, oc_vectors=1, ow_tile=1, ic_block=64),  # 12 channels: not offered
    CpuSchedule(lanes=8, oc_vectors=1, ow_tile=5),        # wider than the 4 output columns
], ids=["registers", "padding-vector", "ic-block", "ow-tile"])
def test_illegal_schedules_have_no_features(schedule, monkeypatch):
    from vdla.compiler.cpu import schedule as cpu_schedule
    monkeypatch.setattr(cpu_schedule, "_registers", lambda features: 16)   # an AVX2 file
    assert TARGET.features(TARGET.space(OPS["conv"], CONFIG), schedule) is None


def test_measure_times_a_bit_exact_kernel_and_catches_a_wrong_one(monkeypatch):
    op = OPS["conv"]
    options = TARGET.prepare(CONFIG, shared=True)
    schedule = CpuSchedule(lanes=8, oc_vectors=1, ow_tile=2, ic_block=12)
    measured = TARGET.measure(op, CONFIG, schedule, options)
    assert measured.ok and measured.cost > 0, measured.error
    assert measured.details["threads"] == THREADS == 1
    assert measured.details["runs"] == TIMED_RUNS and measured.details["warmup"] == WARMUP_RUNS
    from vdla.tune import cpu_target
    inputs, reference = cpu_target._checked_inputs(op)
    wrong = reference.copy()
    wrong.flat[3] ^= 1
    monkeypatch.setattr(cpu_target, "_checked_inputs", lambda op: (inputs, wrong))
    failed = TARGET.measure(op, CONFIG, schedule, options)
    assert not failed.ok and failed.error == "1 output(s) differ from numpy"


def test_measurement_keys_name_the_cpu_compiler_and_threads():
    design = TARGET.design(CONFIG)
    from vdla.compiler.cpu.build import compiler_flags
    assert " ".join(compiler_flags()) in design and "threads 1" in design
    assert f"median of {TIMED_RUNS} calls" in design
    key = measurement_key("cpu", OPS["dense"], CONFIG, TARGET.default(OPS["dense"], CONFIG))
    assert design in json.loads(key)


@pytest.mark.parametrize("name, tuner", [("conv", "xgb"), ("dense", "random")])
@pytest.mark.slow
def test_tuning_logs_every_trial_resumes_and_is_never_slower_than_the_default(
        tmp_path, name, tuner):
    op, log = OPS[name], tmp_path / "tune.jsonl"
    first = tune(op, CONFIG, TuneSettings(target="cpu", tuner=tuner, trials=4, batch=2, log=log),
                 pool=_thread_pool())
    default = TARGET.default(op, CONFIG)
    # The default is measured in the first batch (logged in the order trials finish).
    assert first.measured == 4
    assert default.to_dict() in [r["schedule"] for r in first.records[:2]]
    second = tune(op, CONFIG, TuneSettings(target="cpu", tuner=tuner, trials=6, batch=2,
                                           log=log, resume=True, seed=1),
                  pool=_thread_pool())
    records = read_log(log)
    assert second.measured == 2 and records[:4] == first.records and len(records) == 6
    assert len({json.dumps(r["schedule"], sort_keys=True) for r in records}) == 6
    assert all(r["target"] == "cpu" and r["design"] == TARGET.design(CONFIG) and r["correct"]
               and r["cost"] > 0 and r["details"]["threads"] == 1 for r in records)
    space = TARGET.space(op, CONFIG)
    assert all(TARGET.features(space, space.decode(r["schedule"])) is not None
               for r in records)
    # The default is one of the trials, so the best is min(default, best found).
    default_cost = next(r["cost"] for r in records if r["schedule"] == default.to_dict())
    assert second.best["cost"] == min(r["cost"] for r in records) <= default_cost


DENSE = ["dense", "--batch", "3", "--in-features", "40", "--out-features", "24", "--bias",
         "--shift", "9"]


@pytest.mark.slow
def test_compile_applies_the_best_cpu_record_and_refuses_others(tmp_path):
    log, runner = tmp_path / "tune.jsonl", CliRunner()
    result = runner.invoke(cli, ["tune", *DENSE, "--target", "cpu", "--trials", "3",
                                 "--tuner", "random", "--log", str(log), "--json"])
    assert result.exit_code == 0, result.output
    best = min(read_log(log), key=lambda r: r["cost"])
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["unit"] == "us" and summary["best_cost"] == best["cost"]
    default = TARGET.default(Dense(3, 40, 24, bias=True, shift=9), CONFIG).to_dict()
    assert summary["default_cost"] == next(r["cost"] for r in read_log(log)
                                           if r["schedule"] == default)
    compile_ = ["compile", *DENSE, "--tuned", str(log), "-o", str(tmp_path / "x.vdla")]
    result = runner.invoke(cli, [*compile_, "--target", "cpu", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["schedule"] == best["schedule"]

    result = runner.invoke(cli, compile_)                   # an accel compile, a cpu log
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: --tuned {log}: its trials of dense 3x40 -> 24 +bias >>9 were measured on "
        "the cpu target, not accel (pass --target cpu)"]
    result = runner.invoke(cli, [*compile_, "--target", "cpu", "--precision", "fp32"])
    assert result.exit_code == 1 and "cpu tuning logs time int8 kernels" in result.output
    # A log measured on another CPU or compiler does not apply here.
    log.write_text(log.read_text().replace(json.dumps(TARGET.design(CONFIG)), '"another cpu"'))
    result = runner.invoke(cli, [*compile_, "--target", "cpu"])
    assert result.exit_code == 1
    assert "no correct trial of dense 3x40 -> 24 +bias >>9 measured on the cpu here" \
        in result.output


def test_measured_output_matches_numpy_for_the_tuned_program(tmp_path):
    """The schedule a log picks runs bit-exactly through the runtime too."""
    from vdla.compiler.cpu.program import compile_cpu
    from vdla.compiler.cpu.runner import CpuRunner
    op = OPS["dense"]
    result = tune(op, CONFIG, TuneSettings(target="cpu", tuner="random", trials=2, seed=5),
                  pool=_thread_pool())
    schedule = CpuSchedule.from_dict(result.best["schedule"])
    inputs = op.random_inputs(np.random.default_rng(7))
    program = compile_cpu(op, "int8", schedule)
    out = CpuRunner().run(program, inputs).outputs["out"]
    np.testing.assert_array_equal(out, op.reference(**inputs))
