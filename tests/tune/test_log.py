"""The tuning log: append-only records, a torn last line skipped, resume without loss or
repeats, best-record lookup."""

import json
import warnings

import pytest

from vdla.compiler import Conv2d, Schedule
from vdla.hw.config import PRESETS
from vdla.tune import TuneError, TuneLog, best_record, read_log, tune
from vdla.tune.log import make_record
from vdla.tune.target import Measurement
import tests.tune.fake_target  # noqa: F401  (registers the "fake" target)

OP = Conv2d(1, 16, 24, 10, 10, kernel=3, padding=1, bias=True)
CONFIG = PRESETS["tiny"]


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
    assert best_record(records, OP, CONFIG)["schedule"]["tile_h"] == 5
    assert best_record(records, OP, PRESETS["odd"]) is None
    assert best_record(records, Conv2d(1, 16, 24, 10, 10, kernel=3, padding=1), CONFIG) is None


def test_resume_continues_without_repeating(tmp_path):
    path = tmp_path / "log.jsonl"
    first = tune(OP, CONFIG, target="fake", tuner="random", trials=6, log=path, seed=3,
                 pool=_inline_pool())
    with pytest.raises(TuneError, match="already holds 6 trial\\(s\\).*pass --resume"):
        tune(OP, CONFIG, target="fake", tuner="random", trials=10, log=path, pool=_inline_pool())
    second = tune(OP, CONFIG, target="fake", tuner="random", trials=10, log=path, resume=True,
                  seed=4, pool=_inline_pool())
    assert second.measured == 4
    records = read_log(path)
    assert records[:6] == first.records
    schedules = [json.dumps(r["schedule"], sort_keys=True) for r in records]
    assert len(records) == 10 and len(set(schedules)) == 10


def _inline_pool():
    import concurrent.futures
    from vdla.bench.executor import Pool
    return Pool(executor=concurrent.futures.ThreadPoolExecutor(1))
