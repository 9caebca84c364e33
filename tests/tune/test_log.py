"""The tuning log: append-only records, a torn last line skipped, resume without loss or
repeats, best-record lookup."""

import dataclasses
import json
import warnings

import pytest

from vdla.compiler import Conv2d, Schedule
from vdla.hw.config import PRESETS
from vdla.tune import TuneError, TuneLog, TuneSettings, best_record, read_log, tune
from vdla.tune.log import make_record, read_jsonl
from vdla.tune.target import Measurement
import tests.tune.fake_target  # noqa: F401  (registers the "fake" target)

OP = Conv2d(1, 16, 24, 10, 10, kernel=3, padding=1, bias=True)
CONFIG = PRESETS["tiny"]
MISSING = object()


def _record(cost, **schedule):
    return make_record("accel", OP, CONFIG, Schedule(**schedule),
                       Measurement(cost, cost is not None, None if cost else "boom"))


def test_records_round_trip_and_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "log.jsonl"
    log = TuneLog(path)
    log.append(_record(100.0, tile_h=2))
    log.append(_record(90.0, tile_h=5))
    with open(path, "a") as file:
        file.write('{"version": 1, "sched')                # killed mid-write
    with pytest.warns(UserWarning, match=r"log.jsonl:3: skipping a truncated last tuning record"):
        records = read_log(path)
    assert [r["cost"] for r in records] == [100.0, 90.0]
    # Appending again drops the unfinished record first: the log is whole again.
    TuneLog(path).append(_record(80.0, tile_h=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r["cost"] for r in read_log(path)] == [100.0, 90.0, 80.0]
    # Damage a crash cannot cause (a bad line before the last) is an error.
    path.write_text(path.read_text().replace('"version": 1', '"version": 1,,', 1))
    with pytest.raises(TuneError, match=r"log.jsonl:1: not a tuning record \(a corrupt line"):
        read_log(path)


def test_best_record_matches_workload_and_hardware(tmp_path):
    records = [_record(100.0, tile_h=2), _record(None, tile_h=3), _record(90.0, tile_h=5)]
    design = records[0]["design"]
    assert best_record(records, OP, CONFIG, "accel", design)["schedule"]["tile_h"] == 5
    assert best_record(records, OP, PRESETS["odd"], "accel", design) is None
    assert best_record(records, Conv2d(1, 16, 24, 10, 10, kernel=3, padding=1), CONFIG,
                       "accel", design) is None
    # A record of another design (the config's Verilog changed) measured other hardware.
    records.append({**_record(10.0, tile_h=1), "design": "another"})
    assert best_record(records, OP, CONFIG, "accel", design)["cost"] == 90.0
    assert best_record(records, OP, CONFIG, "accel", "another")["cost"] == 10.0


@pytest.mark.parametrize("change, message", [
    ({"cost": float("nan")}, r"log.jsonl:2: tuning record: cost nan: expected a finite "
                             r"number, 0 or more"),
    ({"cost": float("inf")}, r"cost inf: expected a finite number"),
    ({"cost": -5.0}, r"cost -5.0: expected a finite number, 0 or more"),
    ({"cost": "12"}, r"log.jsonl:2: tuning record: cost '12': expected a finite number"),
    ({"cost": True}, r"cost True: expected a finite number"),
    ({"workload": MISSING}, r"log.jsonl:2: tuning record: no 'workload' field"),
    ({"correct": "yes"}, r"correct 'yes': expected true or false"),
    ({"cost": None}, r"log.jsonl:2: tuning record: a correct trial without a cost"),
    ({"version": 7}, r"log.jsonl:2: tuning record has log version 7, expected 1"),
])
def test_a_record_no_measurement_gives_is_refused_naming_it(tmp_path, change, message):
    path = tmp_path / "log.jsonl"
    record = {key: value for key, value in {**_record(90.0, tile_h=5), **change}.items()
              if value is not MISSING}
    path.write_text(json.dumps(_record(100.0, tile_h=2)) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(TuneError, match=message):
        read_log(path)


def test_a_trial_logged_twice_counts_once(tmp_path):
    path = tmp_path / "log.jsonl"
    first, second = _record(100.0, tile_h=2), _record(90.0, tile_h=5)
    path.write_text("".join(json.dumps(r) + "\n" for r in (first, second, first, first)))
    with pytest.warns(UserWarning, match=r"log.jsonl: 2 trial\(s\) logged more than once "
                                         r"count once \(the first\)"):
        assert read_log(path) == [first, second]


def test_reads_are_bounded(tmp_path):
    with pytest.raises(TuneError, match=r"tuning record log /dev/zero:1: a line longer than "
                                        r"1048576 bytes, not a tuning record log file"):
        read_log("/dev/zero")
    path = tmp_path / "log.jsonl"
    path.write_text((json.dumps(_record(100.0, tile_h=2)) + "\n") * 40)
    with pytest.raises(TuneError, match=r"tuning record log .*log.jsonl: larger than 4096 "
                                        r"bytes, not a tuning record log file"):
        read_jsonl(path, limit=4096)
    with pytest.raises(TuneError, match=r"cannot read tuning record log .*: it is a directory"):
        read_log(tmp_path)


def test_resume_continues_without_repeating(tmp_path):
    path = tmp_path / "log.jsonl"
    settings = TuneSettings(target="fake", tuner="random", trials=6, log=path, seed=3)
    first = tune(OP, CONFIG, settings, pool=_inline_pool())
    settings = dataclasses.replace(settings, trials=10, seed=0)
    with pytest.raises(TuneError, match="already holds 6 trial\\(s\\).*pass --resume"):
        tune(OP, CONFIG, settings, pool=_inline_pool())
    second = tune(OP, CONFIG, dataclasses.replace(settings, resume=True, seed=4),
                  pool=_inline_pool())
    assert second.measured == 4
    records = read_log(path)
    assert records[:6] == first.records
    schedules = [json.dumps(r["schedule"], sort_keys=True) for r in records]
    assert len(records) == 10 and len(set(schedules)) == 10


def _inline_pool():
    import concurrent.futures
    from vdla.bench.executor import Pool
    return Pool(executor=concurrent.futures.ThreadPoolExecutor(1))


def test_a_record_no_log_could_hold_is_never_made():
    with pytest.raises(TuneError, match=r"a new accel trial of conv2d .*: cost nan: expected a "
                                        r"finite number, 0 or more"):
        _record(float("nan"), tile_h=2)
