"""`vdla tune` and `vdla compile --tuned` end to end on the RTL (tiny config, a small layer):
kill -9 and resume, applying the best trial, one-line errors."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from vdla.cli.main import cli
from vdla.tune import read_log

LAYER = ["conv2d", "--in-channels", "8", "--out-channels", "8", "--height", "6", "--width", "6",
         "--pad", "1", "--bias", "--config", "tiny"]

pytestmark = pytest.mark.rtl


def _tune(log, trials, *extra):
    return [sys.executable, "-m", "vdla", "tune", *LAYER, "--tuner", "random", "--trials",
            str(trials), "--log", str(log), "--batch-size", "2", "-j", "1", *extra]


def _lines(path):
    return path.read_text().count("\n") if path.exists() else 0


@pytest.mark.slow
def test_kill_9_then_resume_loses_and_repeats_nothing(tmp_path):
    log = tmp_path / "tune.jsonl"
    process = subprocess.Popen(_tune(log, 14), start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while _lines(log) < 4 and time.time() < deadline and process.poll() is None:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)          # the tool and its workers, mid-run
    process.wait()
    before = read_log(log)
    assert 4 <= len(before) < 14
    with open(log, "a") as file:
        file.write('{"version": 1, "target": "acc')  # as if killed mid-write
    result = subprocess.run(_tune(log, 14, "--resume", "--json"), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "skipping a truncated last tuning record" in result.stderr
    summary = json.loads(result.stdout)
    assert summary["trials"] == 14 and summary["measured"] == 14 - len(before)
    after = read_log(log)                     # the torn record was dropped on resume
    assert after[:len(before)] == before                      # nothing lost
    schedules = [json.dumps(r["schedule"], sort_keys=True) for r in after]
    assert len(after) == 14 and len(set(schedules)) == 14     # nothing repeated
    assert all(r["correct"] and r["cost"] > 0 for r in after)


def test_compile_applies_the_best_tuned_schedule(tmp_path):
    log = tmp_path / "tune.jsonl"
    runner = CliRunner()
    result = runner.invoke(cli, ["tune", *LAYER, "--trials", "5", "--tuner", "xgb", "--log",
                                 str(log), "--json"])
    assert result.exit_code == 0, result.output
    records = read_log(log)
    best = min((r for r in records if r["correct"]), key=lambda r: r["cost"])
    assert json.loads(result.output.strip().splitlines()[-1])["best_cost"] == best["cost"]
    result = runner.invoke(cli, ["compile", *LAYER, "--tuned", str(log), "-o",
                                 str(tmp_path / "x.vdla"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["schedule"] == best["schedule"]


@pytest.mark.parametrize("args, message", [
    (["--tuned", "{log}", "--schedule", "s.json"], "--schedule and --tuned both choose"),
    (["--tuned", "{log}", "--no-bias"], "no correct trial of conv2d 1x8x6x6 -> 8"),
])
def test_compile_tuned_errors_are_one_line(tmp_path, args, message):
    log = tmp_path / "tune.jsonl"
    log.write_text("")
    result = CliRunner().invoke(cli, ["compile", *LAYER, "-o", str(tmp_path / "x.vdla"),
                                      *[a.format(log=log) for a in args]])
    assert result.exit_code == 1
    assert message in result.output


def test_tune_refuses_an_unknown_target():
    result = CliRunner().invoke(cli, ["tune", *LAYER, "--target", "gpu", "--trials", "1",
                                      "--log", os.devnull])
    assert result.exit_code == 1
    assert "unknown target 'gpu' (available: accel" in result.output


def _logged(tmp_path, **change):
    """A log of one good trial of LAYER on tiny (the default schedule), changed."""
    from vdla.compiler import Conv2d, default_schedule
    from vdla.hw.config import PRESETS
    from vdla.tune.log import make_record
    from vdla.tune.target import Measurement
    op = Conv2d(1, 8, 8, 6, 6, kernel=3, padding=1, bias=True)
    record = make_record("accel", op, PRESETS["tiny"], default_schedule(op, PRESETS["tiny"]),
                         Measurement(100.0, True))
    log = tmp_path / "tune.jsonl"
    log.write_text(json.dumps({**record, **change}) + "\n")
    return log


@pytest.mark.parametrize("change, message", [
    ({}, None),
    # measured on other Verilog for the same config: not this hardware's cycles
    ({"design": "0123abcd"}, r"no correct trial of conv2d 1x8x6x6 -> 8 .* on config 'tiny' "
                             r"\(hash \w+, design \w+\) in the log"),
    ({"cost": "12"}, r":1: tuning record: cost '12': expected a finite number, 0 or more"),
    ({"cost": float("nan")}, r":1: tuning record: cost nan: expected a finite number"),
    ({"workload": 3}, r":1: tuning record: workload 3: expected a string"),
])
def test_compile_tuned_takes_only_sound_records_of_this_design(tmp_path, change, message):
    log = _logged(tmp_path, **change)
    result = CliRunner().invoke(cli, ["compile", *LAYER, "--tuned", log, "-o",
                                      tmp_path / "x.vdla"])
    if message is None:
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1
    assert re.search(message, result.output), result.output
