"""Benchmark whole networks: every layer compiled, run and checked, on one executor.

`run_bench` takes a list of `compiler.workloads.Workload` (ResNet-18's C2–C11
by default, `select_workloads`) and runs each through
`bench.layer_run.run_layer` (compile with the default schedule, run with
seeded random inputs, check against numpy), gathering the layers'
`bench.records.LayerResult` into a `bench.records.BenchResult`; the network
total weighs each layer by how often ResNet-18 runs it. `run_benches` runs
several latency-hiding variants (the ablation) at once.

Layers are independent simulations, so they run through one
`concurrent.futures`-shaped executor (`bench.executor`; docs/architecture.md,
"Benchmarks"): a `ProcessPoolExecutor` with ``jobs`` workers by default, or
any executor a caller passes, e.g. a Dask cluster's from
``make_executor(scheduler=...)``. The JSON report is `bench.report`'s, the
cycle-level regression check against committed baselines `bench.baseline`'s.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Callable, Sequence

from vdla.bench.executor import make_executor
from vdla.bench.layer_run import run_layer
from vdla.bench.records import BenchResult, LayerResult
from vdla.compiler.workloads import RESNET18, Workload
from vdla.errors import VdlaError
from vdla.hw.config import HwConfig

__all__ = ["BenchError", "BENCHMARKS", "select_workloads", "prepare_backend", "run_bench",
           "run_benches"]

# Networks `vdla bench` knows, by name.
BENCHMARKS: dict[str, tuple[Workload, ...]] = {"resnet18": RESNET18}


class BenchError(VdlaError, ValueError):
    """Bad benchmark input: unknown layers, a missing or mismatched baseline, ..."""


def select_workloads(names: str | Sequence[str] | None,
                     benchmark: str = "resnet18") -> list[Workload]:
    """The workloads of ``benchmark`` called ``names`` (all of them for None).

    ``names`` is a list or a comma-separated string (``"C2,C5"``), case-insensitive.

    Raises
    ------
    BenchError
        For an unknown benchmark or layer name, or an empty selection.
    """
    if benchmark not in BENCHMARKS:
        raise BenchError(f"unknown benchmark {benchmark!r} (known: {', '.join(BENCHMARKS)})")
    workloads = BENCHMARKS[benchmark]
    if names is None:
        return list(workloads)
    if isinstance(names, str):
        names = names.split(",")
    wanted = [name.strip().upper() for name in names]
    if not wanted or any(not name for name in wanted):
        raise BenchError(f"layers: expected a comma-separated list such as C2,C5, got "
                         f"{','.join(names)!r}")
    known = {workload.name: workload for workload in workloads}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise BenchError(f"unknown {benchmark} layer(s) {', '.join(unknown)} "
                         f"(known: {', '.join(known)})")
    # The network's order, each layer once.
    return [workload for workload in workloads if workload.name in wanted]


def prepare_backend(config: HwConfig, sim: str, progress: Callable[[str], None] | None = None,
                    *, build: bool = True) -> dict:
    """Backend options every worker shares: the rtl model is built once, here.

    ``build=False`` only checks the simulator's name.

    Raises
    ------
    BenchError
        For an unknown simulator name.
    """
    from vdla.sim.backends import backend_names
    names = backend_names()
    if sim not in names:
        raise BenchError(f"unknown simulator {sim!r} (available: {', '.join(names)})")
    if sim != "rtl" or not build:
        return {}
    from vdla.sim.rtl.build import build_model
    return {"build": build_model(config, progress=progress)}


def run_benches(workloads: Sequence[Workload], config: HwConfig, sim: str = "rtl", *,
                variants: Sequence[bool] = (True,), seed: int = 0, jobs: int = 1,
                executor: concurrent.futures.Executor | None = None,
                share_model: bool | None = None, benchmark: str = "resnet18",
                progress: Callable[[LayerResult], None] | None = None,
                message: Callable[[str], None] | None = None) -> list[BenchResult]:
    """Run ``workloads`` once per latency-hiding variant, all layers on one executor.

    Parameters
    ----------
    workloads : sequence of Workload
    config : HwConfig
    sim : str
    variants : sequence of bool
        ``(True,)`` for a normal run, ``(True, False)`` for the ablation.
    seed : int
    jobs : int
        Worker processes when no ``executor`` is given.
    executor : concurrent.futures.Executor, optional
        Where to run layers (not shut down here); a fresh
        `ProcessPoolExecutor` of ``jobs`` workers otherwise.
    share_model : bool, optional
        Build the rtl model here and hand it to the workers (they must see
        this file system). Default: True for local workers (no ``executor``),
        False otherwise (each worker builds or finds its own).
    benchmark : str
        The network's name, for the report.
    progress : callable, optional
        Called with each `LayerResult` as it completes.
    message : callable, optional
        Told about slow preparation (a cold rtl model build).

    Returns
    -------
    list of BenchResult
        One per variant, in the order of ``variants``.
    """
    workloads = list(workloads)
    if not workloads:
        raise BenchError("no layers to run")
    began = time.perf_counter()
    own = executor is None
    share_model = own if share_model is None else share_model
    options = prepare_backend(config, sim, message if share_model else None,
                              build=share_model)
    if own:
        executor = make_executor(jobs)
    tasks = [(variant, index, workload) for variant in variants
             for index, workload in enumerate(workloads)]
    # Longest first: a better packing of uneven layers onto the workers.
    order = sorted(tasks, key=lambda task: -task[2].op.macs)
    results: dict[tuple[bool, int], LayerResult] = {}
    try:
        futures = {executor.submit(run_layer, workload, config, sim, latency_hiding=variant,
                                   seed=seed, backend_options=options): (variant, index)
                   for variant, index, workload in order}
        for future in concurrent.futures.as_completed(futures):
            variant, index = futures[future]
            try:
                layer = future.result()
            except concurrent.futures.process.BrokenProcessPool as error:
                raise BenchError(f"a worker process died while running layer "
                                 f"{workloads[index].name} ({error})") from None
            results[(variant, index)] = layer
            if progress is not None:
                progress(layer)
    except BaseException:
        if own:  # Ctrl-C or a dead worker: do not wait for the other layers
            executor.shutdown(wait=False, cancel_futures=True)
        raise
    if own:
        executor.shutdown(wait=True)
    seconds = time.perf_counter() - began
    complete = {workload.name for workload in workloads} == \
        {workload.name for workload in BENCHMARKS.get(benchmark, ())}
    return [BenchResult(benchmark, config, sim, variant, seed,
                        [results[(variant, index)] for index in range(len(workloads))],
                        complete, seconds) for variant in variants]


def run_bench(workloads: Sequence[Workload], config: HwConfig, sim: str = "rtl", *,
              latency_hiding: bool = True, **options) -> BenchResult:
    """Run ``workloads`` once; the options are those of `run_benches`."""
    return run_benches(workloads, config, sim, variants=(latency_hiding,), **options)[0]
