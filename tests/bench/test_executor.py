"""One executor for trials: local processes and a real local Dask cluster (scheduler and
worker processes on this machine) give the same tuning results; a lost worker costs a retry."""

import concurrent.futures
import os
import sys

import pytest

from vdla.bench.executor import ExecutorError, Pool, make_executor
from vdla.compiler import Conv2d
from vdla.hw.config import PRESETS
from vdla.tune import TuneSettings, tune

pytestmark = [pytest.mark.slow, pytest.mark.rtl]

OP = Conv2d(1, 8, 8, 6, 6, kernel=3, padding=1, bias=True, shift=3)


def _trials(pool):
    result = tune(OP, PRESETS["tiny"], TuneSettings(tuner="xgb", trials=8, batch=4, seed=5),
                  pool=pool)
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


def test_a_pool_broken_before_a_task_is_submitted_is_replaced(tmp_path):
    # A worker that dies while map_unordered is still submitting breaks the pool under it.
    with Pool(jobs=2) as pool:
        killer = pool._executor.submit(_die_once, str(tmp_path / "first"))
        with pytest.raises(concurrent.futures.process.BrokenProcessPool):
            killer.result()
        results = dict(pool.map_unordered(_die_once, [str(tmp_path / "first")]))
    assert list(results) == [str(tmp_path / "first")]


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


def _children(pid):
    """Processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as file:
                    fields = file.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid):
    """Running (a zombie nobody reaped has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_tune_takes_its_workers_with_it(tmp_path):
    """``kill -9`` of ``vdla tune -j 2``: no worker outlives it (they used to wait on
    their pipe for ever, parent 1)."""
    import signal
    import subprocess
    import time
    process = subprocess.Popen(
        [sys.executable, "-m", "vdla", "tune", "dense", "--in-features", "64",
         "--out-features", "64", "--target", "cpu", "--tuner", "random", "--trials", "500",
         "-j", "2", "--log", tmp_path / "t.jsonl"], cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    try:
        deadline = time.monotonic() + 120
        while len(workers) < 2 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.2)
            workers = [pid for pid in _children(process.pid) if _alive(pid)]
        assert len(workers) >= 2, "the tuner never started its two workers"
        process.kill()
        process.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in workers if _alive(pid)]
    finally:
        process.kill()
        process.wait(timeout=30)
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
