"""One tuning run: propose, measure on the executor, log each trial, learn, repeat.

`tune` searches a layer's declared knob space on one config with a tuner
(`tune.tuners`), measuring batches of candidates through `bench.executor.Pool`
(local processes, or a Dask cluster) and appending every finished trial to the
log before anything else happens. The first trial of every run is the
target's default schedule (unless ``TuneSettings.start_from_default`` is
False), so a tuned schedule is never slower than the default one. With
``TuneSettings.resume`` the trials already in the log for this workload and
config count as done: they are neither lost nor measured again, and the tuner
learns from them first. A ``cache`` of earlier measurements (keyed by
`tune.log.measurement_key`) spares repeated runs, e.g. benchmark seeds, from
re-simulating a schedule.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from vdla.bench.executor import Pool
from vdla.compiler.accel.space import ScheduleSpace
from vdla.compiler.errors import ScheduleError
from vdla.compiler.ops import op_from_dict
from vdla.hw.config import HwConfig
from vdla.tune.log import (TuneLog, design_digest, make_record, measurement_key, read_log,
                           record_measurement, workload_key)
from vdla.tune.target import Measurement, Target, TuneError, get_target
from vdla.tune.tuners import Tuner, make_tuner

__all__ = ["tune", "TuneSettings", "TuneResult", "transfer_data"]


@dataclasses.dataclass
class TuneResult:
    """The trials of this workload and config in the log, in trial order, and the best."""

    records: list[dict[str, Any]]
    measured: int                   # trials simulated by this call (not resumed or cached)

    @property
    def best(self) -> dict[str, Any] | None:
        good = [r for r in self.records if r["correct"] and r["cost"] is not None]
        return min(good, key=lambda r: r["cost"], default=None)

    def best_so_far(self) -> list[float | None]:
        """Lowest cost after each trial (None until one succeeds)."""
        curve, best = [], None
        for record in self.records:
            if record["correct"] and record["cost"] is not None:
                best = record["cost"] if best is None else min(best, record["cost"])
            curve.append(best)
        return curve


def _measure(task) -> Measurement:
    target_name, op, config, schedule, options = task
    return get_target(target_name).measure(op, config, schedule, options)


def transfer_data(records: Iterable[dict], target: str, exclude: str
                  ) -> list[tuple[np.ndarray, list[float | None]]]:
    """Features and costs of other workloads' trials, one group per (workload, config),
    only those measured on the design their config has now (`tune.log.design_digest`)."""
    chosen = get_target(target)
    groups: dict[tuple[str, str], list[dict]] = {}
    designs: dict[str, str] = {}
    for record in records:
        if record["target"] != target or record["workload"] + record["config_hash"] == exclude:
            continue
        if record["config_hash"] not in designs:
            designs[record["config_hash"]] = design_digest(
                target, HwConfig.from_dict(record["config"]))
        if record["design"] == designs[record["config_hash"]]:
            groups.setdefault((record["workload"], record["config_hash"]), []).append(record)
    data = []
    for group in groups.values():
        op = op_from_dict(group[0]["op"])
        config = HwConfig.from_dict(group[0]["config"])
        space = chosen.space(op, config)
        rows, costs = [], []
        for record in group:
            x = chosen.features(space, space.decode(record["schedule"]))
            if x is not None:
                rows.append(x)
                costs.append(record["cost"] if record["correct"] else None)
        if rows:
            data.append((np.stack(rows), costs))
    return data


@dataclasses.dataclass(frozen=True)
class TuneSettings:
    """What one tuning run searches, how long, and where it logs.

    Parameters
    ----------
    target, tuner : str
        A registered target (`tune.target`) and a tuner name (`tune.tuners`).
    trials : int
        Trials in all, those resumed from the log included.
    log : path, optional
        JSON-lines log every trial is appended to.
    resume : bool
        Continue the log's trials of this workload and config; without it a
        log that already holds some is refused.
    jobs : int
        Local worker processes, when `tune` is given no pool.
    scheduler : str, optional
        Address of a Dask scheduler to measure on instead, when given no pool.
    batch : int, optional
        Candidates per round (default: twice the workers, at least 4).
    seed : int
        Seed of the tuner's random choices, also logged with each trial.
    start_from_default : bool
        Measure the default schedule first (False: the tuner alone chooses
        every trial, for comparing search strategies).
    """

    target: str = "accel"
    tuner: str = "xgb"
    trials: int = 32
    log: str | Path | None = None
    resume: bool = False
    jobs: int = 1
    scheduler: str | None = None
    batch: int | None = None
    seed: int = 0
    start_from_default: bool = True


def tune(op, config: HwConfig, settings: TuneSettings = TuneSettings(), *,
         pool: Pool | None = None, transfer: Iterable[dict] = (),
         cache: dict[str, Measurement] | None = None,
         progress: Callable[[dict], None] | None = None,
         message: Callable[[str], None] | None = None) -> TuneResult:
    """Tune one layer on one config.

    Parameters
    ----------
    op : Conv2d or Dense
    config : HwConfig
    settings : TuneSettings
        Target, tuner, trials, log and the rest of the run's plain settings.
    pool : Pool, optional
        Where to measure (not closed here); else one of ``settings.jobs``
        local processes or the Dask ``settings.scheduler``.
    transfer : iterable of records
        Other workloads' trials to warm-start the xgb model.
    cache : dict, optional
        Known measurements by `measurement_key`; new ones are added.
    progress : callable, optional
        Called with each trial's record as it is logged.
    message : callable, optional
        Told about slow preparation (a cold rtl model build).

    Raises
    ------
    TuneError
        For bad arguments or a log that cannot be continued.
    """
    if not isinstance(settings.trials, int) or settings.trials < 1:
        raise TuneError(f"trials: expected a positive integer, got {settings.trials!r}")
    chosen = get_target(settings.target)
    space = chosen.space(op, config)
    done, writer = _open_log(op, config, settings)
    search = _seeded_tuner(op, config, settings, chosen, space, done, transfer)
    run = _Run(op, config, settings, chosen, space, search, writer,
               {} if cache is None else cache, progress, records=list(done),
               visited={space.point(space.decode(r["schedule"])) for r in done})
    own_pool = pool is None
    pool = Pool(settings.jobs, settings.scheduler) if own_pool else pool
    try:
        run.search_loop(pool, chosen.prepare(config, shared=not pool.remote, progress=message))
    finally:
        if own_pool:
            pool.close()
    return TuneResult(run.records, run.measured)


def _open_log(op, config: HwConfig, settings: TuneSettings
              ) -> tuple[list[dict[str, Any]], TuneLog | None]:
    """The log's trials of this workload on this hardware, and the writer to append to.

    Raises
    ------
    TuneError
        If the log holds such trials and ``settings.resume`` is not set.
    """
    log = settings.log
    key = workload_key(op)
    previous = read_log(log) if log is not None else []
    design = design_digest(settings.target, config)
    # Trials of another design (Verilog; CPU, compiler, threads) measured other hardware.
    done = [r for r in previous if r["workload"] == key and r["config_hash"] == config.hash
            and r["target"] == settings.target and r["design"] == design]
    if done and not settings.resume:
        raise TuneError(f"log {log} already holds {len(done)} trial(s) of {op.describe()} on "
                        f"{config.name!r}: pass --resume to continue them or use another --log")
    return done, TuneLog(log) if log is not None else None


def _seeded_tuner(op, config: HwConfig, settings: TuneSettings, chosen: Target,
                  space: ScheduleSpace, done: list[dict[str, Any]], transfer: Iterable[dict]
                  ) -> Tuner:
    """The tuner, its model warm-started from other workloads' trials and taught the
    resumed ones."""
    search = make_tuner(settings.tuner, space, chosen, settings.seed,
                        transfer=transfer_data(transfer, settings.target,
                                               workload_key(op) + config.hash))
    search.update([(space.point(space.decode(r["schedule"])), record_measurement(r))
                   for r in done])
    return search


@dataclasses.dataclass
class _Run:
    """The state of one `tune` call's propose-measure-learn loop."""

    op: Any
    config: HwConfig
    settings: TuneSettings
    target: Target
    space: ScheduleSpace
    search: Tuner
    writer: TuneLog | None
    cache: dict[str, Measurement]
    progress: Callable[[dict], None] | None
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    visited: set[tuple] = dataclasses.field(default_factory=set)
    measured: int = 0

    def search_loop(self, pool: Pool, options) -> None:
        """Propose, measure and learn in rounds until ``settings.trials`` are logged
        or the space holds no more legal points."""
        settings = self.settings
        while len(self.records) < settings.trials:
            want = min(settings.batch or max(4, 2 * pool.jobs),
                       settings.trials - len(self.records))
            first = self._first()
            proposals = first + self.search.propose(want - len(first), self.visited | set(first))
            if not proposals:
                break                           # the space holds no more legal points
            self.visited.update(proposals)
            results: dict[tuple, Measurement] = {}
            for point, measurement, simulated in _measure_batch(
                    pool, settings.target, self.op, self.config, self.space, proposals,
                    options, self.cache):
                self.measured += simulated
                results[point] = measurement
                self.records.append(self._log(point, measurement))
            # Learn in proposal order, whatever order the workers finished in.
            self.search.update([(point, results[point]) for point in proposals])

    def _first(self) -> list[tuple]:
        """The default schedule's point, as the run's first proposal."""
        if self.records or not self.settings.start_from_default:
            return []
        point = _default_point(self.target, self.space, self.op, self.config)
        return [] if point is None else [point]

    def _log(self, point, measurement: Measurement) -> dict[str, Any]:
        settings = self.settings
        record = make_record(settings.target, self.op, self.config, self.space.schedule(point),
                             measurement, tuner=settings.tuner, seed=settings.seed,
                             trial=len(self.records))
        if self.writer is not None:
            self.writer.append(record)
        if self.progress is not None:
            self.progress(record)
        return record


def _measure_batch(pool, target, op, config, space, points, options, cache):
    """Yield ``(point, measurement, simulated)``: cached points at once, the others as
    the workers finish them (each then added to the cache)."""
    waiting = {}                        # the task tuples submitted, by identity
    for point in points:
        schedule = space.schedule(point)
        key = measurement_key(target, op, config, schedule)
        if key in cache:
            yield point, cache[key], False
        else:
            task = (target, op, config, schedule, options)
            waiting[id(task)] = (task, key, point)
    for task, measurement in pool.map_unordered(_measure, [t for t, _, _ in waiting.values()]):
        _, key, point = waiting[id(task)]
        cache[key] = measurement
        yield point, measurement, True


def _default_point(target, space, op, config):
    try:
        return space.point(target.default(op, config))
    except ScheduleError:
        return None             # a default outside the declared space: search without it
