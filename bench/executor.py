"""Where independent simulations run: local processes or a Dask cluster, one interface.

Benchmark layers, tuning trials and design-space points are independent
simulations. `make_executor` gives a `concurrent.futures`-shaped executor for
them: a `ProcessPoolExecutor` by default, a running Dask scheduler's cluster
for ``scheduler="tcp://host:8786"``, or a cluster of local scheduler and worker
processes spun up here for ``scheduler="local"`` (both need the optional
``distributed`` package). `Pool` adds what long searches need on top: results
in completion order and a retry for a task whose worker was lost (a crashed or
killed process costs that task one more run, never the search). Local workers
die with the process that started them, even when it is killed outright.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import sys
from typing import Any, Callable, Iterable, Iterator

from vdla.errors import VdlaError

__all__ = ["ExecutorError", "make_executor", "Pool", "LOCAL_CLUSTER"]

# ``--scheduler local``: spin up a Dask cluster of local processes.
LOCAL_CLUSTER = "local"
# <linux/prctl.h>: deliver a signal to this process when its parent dies.
_PR_SET_PDEATHSIG = 1


class ExecutorError(VdlaError, ValueError):
    """A bad executor request (no workers, a missing optional package, a lost task)."""


def _needs_distributed(scheduler: str):
    try:
        import distributed
    except ImportError:
        raise ExecutorError(f"scheduler {scheduler!r}: running on a Dask cluster needs the "
                            "'distributed' package (pip install distributed)") from None
    return distributed


class _DaskExecutor(concurrent.futures.Executor):
    """A Dask client's executor that also closes the client (and a cluster it started)."""

    def __init__(self, client, cluster=None):
        self.client, self.cluster = client, cluster
        self._executor = client.get_executor(pure=False)

    def submit(self, fn, /, *args, **kwargs):
        return self._executor.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False):
        self._executor.shutdown(wait=wait)
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def make_executor(jobs: int = 1, scheduler: str | None = None) -> concurrent.futures.Executor:
    """The executor simulations run on.

    Parameters
    ----------
    jobs : int
        Local worker processes (a `ProcessPoolExecutor`, or the workers of a
        ``"local"`` Dask cluster).
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:8786``): use its
        cluster instead; ``"local"``: start a Dask cluster of ``jobs`` worker
        processes on this machine. Both need the ``distributed`` package.

    Raises
    ------
    ExecutorError
        For ``jobs < 1`` or a scheduler without ``distributed`` installed.
    """
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ExecutorError(f"jobs: expected a positive integer, got {jobs!r}")
    if scheduler is not None:
        distributed = _needs_distributed(scheduler)
        if scheduler == LOCAL_CLUSTER:
            # One thread per worker process: simulations hold the GIL.
            cluster = distributed.LocalCluster(n_workers=jobs, threads_per_worker=1,
                                               processes=True, dashboard_address=None)
            return _DaskExecutor(distributed.Client(cluster), cluster)
        try:
            client = distributed.Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as error:
            raise ExecutorError(f"scheduler {scheduler!r}: cannot connect ({error})") from None
        return _DaskExecutor(client)
    # The platform's start method (fork on Linux before Python 3.14): scripts
    # calling this from their top level need the usual ``__main__`` guard elsewhere.
    return concurrent.futures.ProcessPoolExecutor(max_workers=jobs, initializer=_die_with_parent,
                                                  initargs=(os.getpid(),))


def _die_with_parent(parent: int) -> None:
    """Worker initializer: the worker ends when the process that started it dies.

    A ``kill -9`` of ``vdla tune -j 2`` gives the pool no chance to shut down,
    and its workers would wait on their pipe for ever (parent 1). On Linux the
    kernel sends them SIGKILL instead (``prctl(PR_SET_PDEATHSIG)``); a parent
    that died before that call took effect is seen here.
    """
    if sys.platform.startswith("linux"):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _lost_worker(error: BaseException) -> bool:
    """Whether a task failed because its worker died (worth a retry), not because of itself."""
    if isinstance(error, concurrent.futures.process.BrokenProcessPool):
        return True
    try:
        from distributed import KilledWorker
        from distributed.comm.core import CommClosedError
    except ImportError:
        return False
    return isinstance(error, (KilledWorker, CommClosedError))


class Pool:
    """Run tasks on `make_executor`'s executor; a lost worker costs its tasks a retry.

    Parameters
    ----------
    jobs, scheduler
        As for `make_executor`.
    retries : int
        Extra runs a task gets when its worker dies under it.
    executor : concurrent.futures.Executor, optional
        Use this one (not shut down here) instead of making one.
    """

    def __init__(self, jobs: int = 1, scheduler: str | None = None, retries: int = 2,
                 executor: concurrent.futures.Executor | None = None):
        self.jobs, self.scheduler, self.retries = jobs, scheduler, retries
        self._own = executor is None
        self._executor = executor if executor is not None else make_executor(jobs, scheduler)

    @property
    def remote(self) -> bool:
        """True when workers may not share this file system (a Dask cluster)."""
        return self.scheduler is not None

    def map_unordered(self, fn: Callable, items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        """Yield ``(item, fn(item))`` as each finishes.

        Raises
        ------
        ExecutorError
            When a task's worker died more than ``retries`` times.
        """
        attempts: dict[int, int] = {}
        pending = {}
        items = list(items)
        for index, item in enumerate(items):
            # A worker may die while later tasks are still being submitted.
            pending[self._submit(fn, item)] = index
        while pending:
            done, _ = concurrent.futures.wait(pending, return_when="FIRST_COMPLETED")
            for future in done:
                index = pending.pop(future)
                try:
                    result = future.result()
                except Exception as error:
                    if not _lost_worker(error):
                        raise
                    attempts[index] = attempts.get(index, 0) + 1
                    if attempts[index] > self.retries:
                        raise ExecutorError(f"a worker died {attempts[index]} times running "
                                            f"task {index} ({type(error).__name__})") from None
                    pending[self._submit(fn, items[index])] = index
                    continue
                yield items[index], result

    def _submit(self, fn, item):
        try:
            return self._executor.submit(fn, item)
        except concurrent.futures.process.BrokenProcessPool:
            if not self._own:
                raise
        # A dead process breaks a ProcessPoolExecutor for good: start a fresh one.
        # (Its other pending tasks fail with BrokenProcessPool and come back here.)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = make_executor(self.jobs)
        return self._executor.submit(fn, item)

    def close(self) -> None:
        if self._own:
            self._executor.shutdown(wait=True)

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None and self._own:
            self._executor.shutdown(wait=False, cancel_futures=True)
            return
        self.close()
