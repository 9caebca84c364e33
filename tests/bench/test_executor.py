"""One executor for trials: local processes and a real local Dask cluster (scheduler and
worker processes on this machine) give the same tuning results; a lost worker costs a retry."""

import concurrent.futures
import os
import sys

import pytest

from vdla.bench.executor import ExecutorError, Pool, make_executor
from vdla.compiler import Conv2d
from vdla.hw.config import PRESETS
from vdla.tune import tune

pytestmark = [pytest.mark.slow, pytest.mark.rtl]

OP = Conv2d(1, 8, 8, 6, 6, kernel=3, padding=1, bias=True, shift=3)


def _trials(pool):
    result = tune(OP, PRESETS["tiny"], tuner="xgb", trials=8, batch=4, seed=5, pool=pool)
    return sorted((json_key(r["schedule"]), r["cost"], r["correct"]) for r in result.records)


def json_key(schedule):
    return tuple(sorted(schedule.items()))


def test_dask_local_cluster_matches_local_processes():
    with Pool(jobs=2) as local:
        expected = _trials(local)
    with Pool(jobs=2, scheduler="local") as cluster:
        assert cluster.remote
        got = _trials(cluster)
    assert got == expected
    assert all(correct for _, _, correct in got)


def _die_once(marker):
    """Kill the worker process the first time (as a crashed or preempted worker would)."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return os.getpid()


@pytest.mark.parametrize("scheduler", [None, "local"])
def test_a_lost_worker_costs_only_a_retry(tmp_path, scheduler):
    markers = [str(tmp_path / f"m{i}") for i in range(3)]
    with Pool(jobs=2, scheduler=scheduler) as pool:
        results = dict(pool.map_unordered(_die_once, markers))
    assert sorted(results) == markers and all(isinstance(pid, int) for pid in results.values())


def test_bad_requests_are_named(monkeypatch):
    with pytest.raises(ExecutorError, match="jobs: expected a positive integer, got 0"):
        make_executor(0)
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ExecutorError, match="scheduler 'local': running on a Dask cluster "
                                            "needs the 'distributed' package"):
        make_executor(1, "local")
    executor = make_executor(1)
    assert isinstance(executor, concurrent.futures.ProcessPoolExecutor)
    executor.shutdown()
