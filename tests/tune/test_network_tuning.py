"""Network tuning (`vdla.tune.network`): tasks, Ansor's task scheduler, resume, --tuned."""

from __future__ import annotations

import concurrent.futures
import json
import re

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import tests.tune.fake_target  # noqa: F401  (registers the "fake" target)
from tests.tune.fake_target import fake_cost
from vdla.bench.executor import Pool
from vdla.cli.main import cli
from vdla.compiler import Conv2d, Dense, default_schedule
from vdla.compiler.accel.space import schedule_space
from vdla.hw.config import PRESETS
from vdla.tune import TuneError, TuneSettings, read_log
from vdla.tune.log import TuneLog, make_record, workload_key
from vdla.tune.network import (NetworkTask, choose_task, gradients, tasks_from_model,
                               tune_network)
from vdla.tune.target import Measurement, get_target
from vdla.tune.tuners import make_tuner

CONFIG = PRESETS["tiny"]
CONV = Conv2d(1, 8, 8, 6, 6, kernel=3, padding=1, bias=True, shift=6)
SMALL = Conv2d(1, 8, 4, 4, 4, kernel=1, bias=True, shift=4)
DENSE = Dense(1, 32, 8, bias=True, shift=5)


def _pool():
    return Pool(executor=concurrent.futures.ThreadPoolExecutor(1))


# --- the allocation rule ---------------------------------------------------------------

def test_gradients_follow_ansors_formula():
    history = [[100.0, 90.0, 80.0, 70.0], [50.0]]
    # Different kinds: no similar-task bound. Task 0: backward (70 - 100) / 3 = -10,
    # forward 70 - 70/4 - 70 = -17.5 -> 0.2 * -10 + 0.8 * -17.5 = -16. Task 1 (one round):
    # backward 0, forward (50 - 50/1) - 50 = -50, weight 2 -> 2 * 0.8 * -50 = -80.
    assert gradients(history, [1, 2], [1000, 1000], ["a", "b"]) == pytest.approx([-16, -80])
    # Alike: the best throughput is task 1's 4000 / 50 = 80 MACs a cycle, so task 0 could
    # reach 2 * 1000 / 80 = 25: forward 25 - 70 = -45 -> 0.2 * -10 + 0.8 * -45 = -38.
    assert gradients(history, [1, 2], [1000, 4000], ["a", "a"]) == pytest.approx([-38, -80])


def test_choose_task_takes_the_steepest_live_task():
    history = [[100.0, 90.0, 80.0, 70.0], [50.0], [1e6]]
    rng = np.random.default_rng(0)
    kinds = ["a", "b", "c"]
    # Task 2 would gain most, but it is dead (its space is spent).
    assert choose_task(history, [1, 2, 1], [1, 1, 1], kinds, [True, True, False], rng,
                       epsilon=0.0) == 1
    assert choose_task(history, [1, 0.01, 1], [1, 1, 1], kinds, [True, True, False], rng,
                       epsilon=0.0) == 0
    # Exploring (epsilon 1) picks any live task, never a dead one.
    picks = {choose_task(history, [1, 2, 1], [1, 1, 1], kinds, [True, False, True], rng,
                         epsilon=1.0) for _ in range(40)}
    assert picks == {0, 2}
    with pytest.raises(TuneError, match="^no task left to tune$"):
        choose_task(history, [1, 1, 1], [1, 1, 1], kinds, [False] * 3, rng)


def _synthetic(strategy: str, rounds: int) -> tuple[list[int], float]:
    """Rounds per task and end-to-end cost after ``rounds`` rounds on synthetic curves:
    task 0 (weight 3) falls from 1000 towards 400, tasks 1 and 2 (weight 1) are flat."""
    curves = [lambda n: 400 + 600 * 0.7 ** n, lambda n: 300.0, lambda n: 200.0]
    weights, counts = [3, 1, 1], [1, 1, 1]                 # after one warm-up round each
    history = [[curve(1)] for curve in curves]
    rng = np.random.default_rng(0)
    for turn in range(rounds - 3):
        if strategy == "uniform":
            task = turn % 3
        else:
            task = choose_task(history, weights, [1, 1, 1], ["a", "b", "c"], [True] * 3, rng,
                               epsilon=0.0)
        counts[task] += 1
        history[task].append(curves[task](counts[task]))
    return counts, sum(w * h[-1] for w, h in zip(weights, history))


def test_the_scheduler_spends_rounds_where_the_end_to_end_cost_falls():
    counts, cost = _synthetic("gradient", 15)
    uniform_counts, uniform_cost = _synthetic("uniform", 15)
    assert uniform_counts == [5, 5, 5]
    # The flat tasks get rounds only while the optimistic guess (g - g / t) still
    # promises them more than task 0's falling curve.
    assert counts[0] >= 10 and max(counts[1:]) <= 3 and sum(counts) == 15
    # Independently: 3 * (400 + 600 * 0.7**n) + 500 for the rounds task 0 got.
    assert cost == pytest.approx(3 * (400 + 600 * 0.7 ** counts[0]) + 500)
    assert uniform_cost == pytest.approx(3 * (400 + 600 * 0.7 ** 5) + 500)
    # The scheduler reaches uniform's end-to-end cost in at most half the rounds.
    reached = next(r for r in range(4, 16) if _synthetic("gradient", r)[1] <= uniform_cost)
    assert reached <= 15 // 2


# --- tuning a network on the fake target -----------------------------------------------

TASKS = [NetworkTask(CONV, 2, ("a", "b")), NetworkTask(SMALL, 1, ("c",)),
         NetworkTask(DENSE, 1, ("d",))]


def _settings(log, trials, tuner="random", **extra):
    return TuneSettings(target="fake", tuner=tuner, trials=trials, log=log, batch=3, **extra)


@pytest.mark.parametrize("strategy", ["gradient", "uniform"])
def test_tune_network_logs_every_trial_with_its_task(tmp_path, strategy):
    log = tmp_path / "net.jsonl"
    result = tune_network(TASKS, CONFIG, _settings(log, 14), strategy=strategy, pool=_pool())
    records = read_log(log)
    assert len(records) == len(result.trials) == 14 and result.measured == 14
    assert [r for _, r in result.trials] == records
    for index, task in enumerate(TASKS):
        mine = [r for i, r in result.trials if i == index]
        assert all(r["workload"] == workload_key(task.op) for r in mine)
        # Each task's first round measures its default schedule.
        assert default_schedule(task.op, CONFIG).to_dict() in [r["schedule"] for r in mine[:3]]
    assert sum(result.allocation()) == 14 and min(result.allocation()) >= 3
    # The end-to-end cost: each task's best fake cost times its weight.
    best = [min(fake_cost(schedule_space(t.op, CONFIG),
                          schedule_space(t.op, CONFIG).decode(r["schedule"]))
                for i, r in result.trials if i == index) for index, t in enumerate(TASKS)]
    assert result.end_to_end() == pytest.approx(2 * best[0] + best[1] + best[2])
    curve = [c for c in result.curve() if c is not None]
    assert curve == sorted(curve, reverse=True)


def test_every_round_learns_from_the_other_tasks_trials(tmp_path, monkeypatch):
    import vdla.tune.network as network
    seen = []

    def spy(op, config, settings, **options):
        transfer = list(options["transfer"])
        seen.append((workload_key(op), sorted({r["workload"] for r in transfer}), len(transfer)))
        return real(op, config, settings, **options)

    real = network.tune
    monkeypatch.setattr(network, "tune", spy)
    result = tune_network(TASKS[1:], CONFIG, _settings(tmp_path / "x.jsonl", 6, "xgb"),
                          strategy="uniform", pool=_pool())
    small, dense = workload_key(SMALL), workload_key(DENSE)
    # The second task's model is trained on the first task's three trials (and its own).
    assert seen == [(small, [], 0), (dense, [small], 3)]
    assert result.allocation() == [3, 3]


def test_uniform_gives_rounds_in_turn(tmp_path):
    result = tune_network(TASKS, CONFIG, _settings(tmp_path / "u.jsonl", 18),
                          strategy="uniform", pool=_pool())
    assert result.rounds == [0, 1, 2, 0, 1, 2]
    assert result.allocation() == [6, 6, 6]


def test_resume_continues_and_repeats_nothing(tmp_path):
    log = tmp_path / "net.jsonl"
    first = tune_network(TASKS, CONFIG, _settings(log, 9), pool=_pool())
    before = read_log(log)
    with pytest.raises(TuneError, match=rf"^log {re.escape(str(log))} already holds 9 trial\(s\) "
                                        r"of this network's layers on 'tiny': pass --resume"):
        tune_network(TASKS, CONFIG, _settings(log, 15), pool=_pool())
    again = tune_network(TASKS, CONFIG, _settings(log, 15, resume=True), pool=_pool())
    after = read_log(log)
    assert after[:9] == before and len(after) == 15
    assert again.measured == 6 and first.measured == 9
    for task in TASKS:
        schedules = [json.dumps(r["schedule"], sort_keys=True) for r in after
                     if r["workload"] == workload_key(task.op)]
        assert len(schedules) == len(set(schedules))


def test_tune_network_refuses_bad_requests(tmp_path):
    with pytest.raises(TuneError, match="^unknown strategy 'ansor' "
                                        r"\(available: gradient, uniform\)$"):
        tune_network(TASKS, CONFIG, _settings(tmp_path / "x.jsonl", 4), strategy="ansor")
    with pytest.raises(TuneError, match="^the network has no accelerator layer to tune$"):
        tune_network([], CONFIG, _settings(tmp_path / "x.jsonl", 4))
    with pytest.raises(TuneError, match=r"^network tuning needs a log"):
        tune_network(TASKS, CONFIG, _settings(None, 4))


# --- tasks of a model, and vdla compile --tuned -------------------------------------------

def _twin_model(path):
    """Two identical convs of one input, concatenated, then a third conv: two tasks."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.normal(size=8).astype(np.float32), "b")
    third = numpy_helper.from_array(rng.normal(size=(4, 16, 1, 1)).astype(np.float32), "w3")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["p"], name="left", pads=[1] * 4),
             helper.make_node("Conv", ["x", "w", "b"], ["q"], name="right", pads=[1] * 4),
             helper.make_node("Concat", ["p", "q"], ["c"], name="cat", axis=1),
             helper.make_node("Conv", ["c", "w3"], ["y"], name="last")]
    graph = helper.make_graph(nodes, "twins",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [weight, bias, third])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    calibration = rng.normal(size=(4, 3, 6, 6)).astype(np.float32)
    np.save(path.with_suffix(".npy"), calibration)
    return {"x": calibration}


def test_identical_layers_are_one_task_weighted_by_occurrences(tmp_path):
    model = tmp_path / "twins.onnx"
    calibration = _twin_model(model)
    tasks = tasks_from_model(model, CONFIG, calibration)
    assert [(t.weight, t.layers) for t in tasks] == [(2, ("left", "right")), (1, ("last",))]
    assert tasks[0].op.out_channels == 8 and tasks[1].op.in_channels == 16


def _compile(model, log, output, *extra):
    return CliRunner().invoke(cli, ["compile", str(model), "--calibration",
                                    str(model.with_suffix(".npy")), "--config", "tiny",
                                    "-o", str(output), "--json", *extra]
                              + (["--tuned", str(log)] if log else []))


def test_compile_tuned_applies_each_layers_best_and_stays_bit_exact(tmp_path):
    from vdla.graph.network_file import load
    model = tmp_path / "twins.onnx"
    calibration = _twin_model(model)
    tasks = tasks_from_model(model, CONFIG, calibration)
    op = tasks[0].op
    space = schedule_space(op, CONFIG)
    default = default_schedule(op, CONFIG)
    # Two legal schedules other than the default, the cheaper one logged as best, and a
    # cheaper still on another config (which must not apply).
    others = [space.schedule(point) for point in make_tuner(
        "random", space, get_target("accel")).random_points(2, {space.point(default)})]
    log = tmp_path / "tune.jsonl"
    writer = TuneLog(log)
    writer.append(make_record("accel", op, CONFIG, others[0], Measurement(500.0, True)))
    writer.append(make_record("accel", op, CONFIG, others[1], Measurement(900.0, True)))
    writer.append(make_record("accel", op, PRESETS["default"], default_schedule(
        op, PRESETS["default"]), Measurement(1.0, True)))
    plain = _compile(model, None, tmp_path / "plain.vdla")
    tuned = _compile(model, log, tmp_path / "tuned.vdla")
    assert plain.exit_code == 0 and tuned.exit_code == 0, tuned.output
    assert json.loads(tuned.output)["tuned"] == {"log": str(log), "layers": 2,
                                                 "accel_layers": 3}
    before, after = load(tmp_path / "plain.vdla"), load(tmp_path / "tuned.vdla")
    for name in ("left", "right"):
        assert after.programs[name].metadata["schedule"] == others[0].to_dict()
        assert before.programs[name].metadata["schedule"] == default.to_dict()
    assert after.programs["last"].metadata["schedule"] == \
        before.programs["last"].metadata["schedule"]
    images = np.random.default_rng(1).normal(size=(1, 3, 6, 6)).astype(np.float32)
    out_before = before.run({"x": images}, sim="fsim").outputs
    out_after = after.run({"x": images}, sim="fsim").outputs
    assert out_before and out_before.keys() == out_after.keys()
    for name, value in out_before.items():
        np.testing.assert_array_equal(out_after[name], value)


@pytest.mark.parametrize("extra, message", [
    (["--target", "cpu"], r"^Error: --tuned with --target cpu: a network file keeps no cpu "
                          r"schedules; --tuned applies accelerator tuning logs"),
])
def test_compile_tuned_errors_are_one_line(tmp_path, extra, message):
    model = tmp_path / "twins.onnx"
    _twin_model(model)
    log = tmp_path / "tune.jsonl"
    log.write_text("")
    result = _compile(model, log, tmp_path / "x.vdla", *extra)
    assert result.exit_code == 1 and re.match(message, result.output), result.output
    assert len(result.output.strip().splitlines()) == 1
    result = _compile(model, tmp_path / "none.jsonl", tmp_path / "x.vdla")
    assert result.exit_code == 1
    assert re.match(r"^Error: --tuned \S+none\.jsonl: no such file$", result.output.strip())


def test_vdla_tune_model_cli_errors_are_one_line(tmp_path):
    model = tmp_path / "twins.onnx"
    _twin_model(model)
    runner = CliRunner()
    result = runner.invoke(cli, ["tune", str(model), "--calibration",
                                 str(model.with_suffix(".npy")), "--config", "tiny",
                                 "--target", "cpu", "--log", str(tmp_path / "t.jsonl")])
    assert result.exit_code == 1
    assert re.match(r"^Error: --target cpu: network tuning tunes the accelerator's layers",
                    result.output)
    result = runner.invoke(cli, ["tune", str(model), "--calibration",
                                 str(model.with_suffix(".npy")), "--config", "tiny",
                                 "--target", "fake", "--trials", "3", "--batch-size", "3",
                                 "--log", str(tmp_path / "t.jsonl")])
    assert result.exit_code == 1
    assert re.match(r"^Error: --trials 3: 1 of the 2 layers got no trial \(each needs a round "
                    r"of up to 3 first\): pass more --trials$", result.output.strip().splitlines()
                    [-1]), result.output
