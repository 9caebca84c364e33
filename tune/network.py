"""Network tuning: tune a network's distinct layers together under a trial budget.

`extract_tasks` takes a compiled `graph.network.Network` (from an ONNX model
through `compile_network`, or a network file) to its distinct accelerator
layers: identical compiler ops are one task, weighted by how often the network
runs them. `tune_network` spends a budget of trials on those tasks a round (one
batch of `tune.session.tune`) at a time. The ``gradient`` strategy is Ansor's
task scheduler (Zheng et al., OSDI 2020, section 6): the objective is the
estimated end-to-end time ``f = sum_i w_i g_i``, ``g_i`` the best cost of task
``i`` so far, and each round goes to the task whose next round is expected to
lower ``f`` most (`gradients`): a backward difference of its best-cost curve
over a sliding window of rounds, mixed (``alpha``) with an optimistic forward
guess, the smaller of ``g_i - g_i / t_i`` (the curve keeps falling as ``1/t``)
and ``beta`` times the cost task ``i`` would have at the best throughput
(MACs per cost unit) a similar task (same operator kind) reached. A share
``epsilon`` of rounds goes to a random task, and every task gets one round
before any gets a second. The ``uniform`` strategy gives every task rounds in
turn, the baseline.

The tasks share one learned cost model: each round's `XGBTuner` is trained on
the trials of every task of the network (one ranking group per task, so only
orderings within a task are learned), whose features are relative to the
layer (`tune.features`), and the trials of the task itself. Every trial goes
to the layer tuning log (`tune.log`, one record per trial naming its task's
workload), so a run resumes from its log and ``vdla compile MODEL.onnx --tuned
LOG`` (`tuned_schedules`) takes each layer's best schedule from it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from vdla.bench.executor import Pool
from vdla.hw.config import HwConfig
from vdla.tune.log import best_record, design_digest, read_log, workload_key
from vdla.tune.session import TuneSettings, tune
from vdla.tune.target import Measurement, TuneError, get_target

__all__ = ["NetworkTask", "extract_tasks", "tasks_from_model", "tasks_from_file",
           "STRATEGIES", "gradients", "choose_task", "NetworkTuneResult", "tune_network",
           "tuned_schedules"]

STRATEGIES = ("gradient", "uniform")


@dataclasses.dataclass(frozen=True)
class NetworkTask:
    """One distinct accelerator layer of a network.

    ``weight`` is how many of the network's layers are this op; ``layers`` names them.
    """

    op: Any
    weight: int
    layers: tuple[str, ...]

    @property
    def key(self) -> str:
        return workload_key(self.op)

    @property
    def kind(self) -> str:
        """Which tasks are alike for the forward guess (Ansor's task tags)."""
        groups = getattr(self.op, "groups", 1)
        return type(self.op).__name__ + ("/grouped" if groups > 1 else "")


def extract_tasks(network) -> list[NetworkTask]:
    """The distinct accelerator layers of a compiled network, in network order."""
    from vdla.graph.placement import layer_op
    ops: dict[str, Any] = {}
    layers: dict[str, list[str]] = {}
    for node in network.graph.nodes:
        if network.placement.get(node.name) != "accel":
            continue
        op = layer_op(network.graph, node)
        key = workload_key(op)
        ops.setdefault(key, op)
        layers.setdefault(key, []).append(node.name)
    return [NetworkTask(ops[key], len(names), tuple(names)) for key, names in layers.items()]


def tasks_from_model(path: str | Path, config: HwConfig,
                     calibration: dict[str, np.ndarray] | None = None,
                     batch: int | None = None, **compile_options) -> list[NetworkTask]:
    """Import, quantise and compile an ONNX model as ``vdla compile`` does, and extract its
    tasks (``compile_options`` as for `graph.network.compile_network`)."""
    from vdla.frontend.onnx import load
    from vdla.graph.network import compile_network
    graph = load(path, batch=batch)
    return extract_tasks(compile_network(graph, config, calibration, **compile_options))


def tasks_from_file(path: str | Path, config: HwConfig | None = None) -> list[NetworkTask]:
    """The tasks of a network file (`graph.network_file`)."""
    from vdla.graph.network_file import load
    return extract_tasks(load(path, config))


def gradients(history: Sequence[Sequence[float]], weights: Sequence[float],
              macs: Sequence[float], kinds: Sequence[str], *, alpha: float = 0.2,
              beta: float = 2.0, window: int = 3) -> list[float]:
    """Ansor's estimate of d(end-to-end cost)/d(rounds) for each task (more negative:
    a round there helps more).

    Parameters
    ----------
    history : per task, its best cost after each of its rounds (non-empty)
    weights : per task, its occurrences in the network (``df/dg_i``)
    macs : per task, its work, for the throughput of similar tasks
    kinds : per task, its tag: tasks of one tag are similar
    alpha, beta, window
        Weight of the backward difference, the optimism of the similar-task
        bound, and the rounds the backward difference spans.
    """
    best = [curve[-1] for curve in history]
    result = []
    for i, curve in enumerate(history):
        rounds = len(curve)
        backward = (curve[-1] - curve[-1 - window]) / window if rounds > window else 0.0
        guess = best[i] - best[i] / rounds
        similar = [j for j in range(len(history)) if kinds[j] == kinds[i]]
        if len(similar) > 1:
            throughput = max(macs[j] / best[j] for j in similar)
            guess = min(guess, beta * macs[i] / throughput)
        forward = guess - best[i]
        result.append(weights[i] * (alpha * backward + (1 - alpha) * forward))
    return result


def choose_task(history: Sequence[Sequence[float]], weights: Sequence[float],
                macs: Sequence[float], kinds: Sequence[str], alive: Sequence[bool],
                rng: np.random.Generator, epsilon: float = 0.05, **gradient_options) -> int:
    """The task the next round goes to: with probability ``epsilon`` (or when every
    live task's gradient is the same) a random live task, else the live task of the
    most negative `gradients`."""
    live = [i for i, ok in enumerate(alive) if ok]
    if not live:
        raise TuneError("no task left to tune")
    if rng.random() < epsilon:
        return live[int(rng.integers(len(live)))]
    grads = gradients(history, weights, macs, kinds, **gradient_options)
    chosen = [grads[i] for i in live]
    if max(chosen) == min(chosen):
        return live[int(rng.integers(len(live)))]
    return live[int(np.argmin(chosen))]


@dataclasses.dataclass
class NetworkTuneResult:
    """The trials of a network tuning run, in the order they were logged.

    ``trials`` holds ``(task index, record)`` pairs; ``rounds`` the task each
    round went to (resumed trials counted as rounds of ``batch`` trials, the trials of
    a round).
    """

    tasks: list[NetworkTask]
    trials: list[tuple[int, dict[str, Any]]]
    rounds: list[int]
    measured: int
    batch: int

    def best(self) -> list[dict[str, Any] | None]:
        """Each task's best correct record."""
        best: list[dict[str, Any] | None] = [None] * len(self.tasks)
        for task, record in self.trials:
            if record["correct"] and record["cost"] is not None and (
                    best[task] is None or record["cost"] < best[task]["cost"]):
                best[task] = record
        return best

    def end_to_end(self) -> float | None:
        """Estimated end-to-end cost: each task's best times its weight, summed (None
        while a task has no correct trial)."""
        curve = self.curve()
        return curve[-1] if curve else None

    def curve(self) -> list[float | None]:
        """The end-to-end cost after each trial (None while a task has none correct)."""
        best: list[float | None] = [None] * len(self.tasks)
        curve = []
        for task, record in self.trials:
            if record["correct"] and record["cost"] is not None and (
                    best[task] is None or record["cost"] < best[task]):
                best[task] = record["cost"]
            curve.append(None if any(b is None for b in best) else
                         sum(t.weight * b for t, b in zip(self.tasks, best)))
        return curve

    def allocation(self) -> list[int]:
        """Trials each task received."""
        counts = [0] * len(self.tasks)
        for task, _ in self.trials:
            counts[task] += 1
        return counts


def _resumed(tasks: list[NetworkTask], config: HwConfig, settings: TuneSettings
             ) -> list[list[dict]]:
    """Each task's trials already in the log (of this target, config and design)."""
    if settings.log is None:
        return [[] for _ in tasks]
    design = design_digest(settings.target, config)
    by_key: dict[str, list[dict]] = {task.key: [] for task in tasks}
    for record in read_log(settings.log):
        if record["workload"] in by_key and record["config_hash"] == config.hash \
                and record["target"] == settings.target and record["design"] == design:
            by_key[record["workload"]].append(record)
    return [sorted(by_key[task.key], key=lambda r: r.get("trial", 0)) for task in tasks]


def _best_after(records: Sequence[dict]) -> float | None:
    good = [r["cost"] for r in records if r["correct"] and r["cost"] is not None]
    return min(good) if good else None


def tune_network(tasks: Sequence[NetworkTask], config: HwConfig,
                 settings: TuneSettings | None = None, *, strategy: str = "gradient",
                 pool: Pool | None = None, cache: dict[str, Measurement] | None = None,
                 progress: Callable[[int, dict], None] | None = None,
                 message: Callable[[str], None] | None = None, alpha: float = 0.2,
                 beta: float = 2.0, window: int = 3, epsilon: float = 0.05
                 ) -> NetworkTuneResult:
    """Tune a network's tasks within ``settings.trials`` trials in all.

    Parameters
    ----------
    tasks : sequence of NetworkTask
        As `extract_tasks` gives them.
    config : HwConfig
    settings : TuneSettings, optional
        As for `tune`; ``trials`` counts every task's trials together (resumed
        ones included), ``batch`` is the trials of one round (default: twice
        the workers, at least 4), ``log`` is required.
    strategy : str
        ``"gradient"`` (Ansor's task scheduler) or ``"uniform"`` (rounds in turn).
    pool : Pool, optional
        Where to measure (not closed here); else one made from ``settings``.
    cache : dict, optional
        Known measurements by `tune.log.measurement_key`; new ones are added.
    progress : callable, optional
        Called with ``(task index, record)`` for each trial as it is logged.
    message : callable, optional
        As for `tune`.
    alpha, beta, window, epsilon
        The scheduler's parameters (`gradients`, `choose_task`).

    Raises
    ------
    TuneError
        For bad arguments, no tasks, or a log that already holds trials of these
        tasks without ``settings.resume``.
    """
    tasks = list(tasks)
    settings = TuneSettings() if settings is None else settings
    if strategy not in STRATEGIES:
        raise TuneError(f"unknown strategy {strategy!r} (available: {', '.join(STRATEGIES)})")
    if not tasks:
        raise TuneError("the network has no accelerator layer to tune")
    if settings.log is None:
        raise TuneError("network tuning needs a log (its rounds resume from it)")
    if not isinstance(settings.trials, int) or settings.trials < 1:
        raise TuneError(f"trials: expected a positive integer, got {settings.trials!r}")
    done = _resumed(tasks, config, settings)
    if any(done) and not settings.resume:
        raise TuneError(f"log {settings.log} already holds {sum(map(len, done))} trial(s) of "
                        f"this network's layers on {config.name!r}: pass --resume to continue "
                        "them or use another --log")
    own_pool = pool is None
    pool = Pool(settings.jobs, settings.scheduler) if own_pool else pool
    try:
        return _Scheduler(tasks, config, settings, strategy, pool, cache, progress, message,
                          dict(alpha=alpha, beta=beta, window=window), epsilon, done).run()
    finally:
        if own_pool:
            pool.close()


class _Scheduler:
    """The state of one `tune_network` call: each task's trials and best-cost history."""

    def __init__(self, tasks, config, settings, strategy, pool, cache, progress, message,
                 gradient_options, epsilon, done):
        self.tasks, self.config, self.settings = tasks, config, settings
        self.strategy, self.pool = strategy, pool
        self.cache = {} if cache is None else cache
        self.progress, self.message = progress, message
        self.gradient_options, self.epsilon = gradient_options, epsilon
        self.batch = settings.batch or max(4, 2 * pool.jobs)
        self.rng = np.random.default_rng(settings.seed)
        self.records: list[list[dict]] = [list(d) for d in done]
        self.trials = [(i, r) for i, d in enumerate(done) for r in d]
        self.trials.sort(key=lambda pair: pair[1].get("time", 0.0))
        # Resumed trials count as rounds of `batch` trials each.
        self.history: list[list[float]] = []
        self.rounds: list[int] = []
        for i, records in enumerate(self.records):
            curve = []
            for end in range(self.batch, len(records) + self.batch, self.batch):
                best = _best_after(records[:end])
                if best is not None:
                    curve.append(best)
                self.rounds.append(i)
            self.history.append(curve)
        self.failed_rounds = [0] * len(tasks)
        self.alive = [True] * len(tasks)
        self.measured = 0

    def run(self) -> NetworkTuneResult:
        settings = self.settings
        while len(self.trials) < settings.trials and any(self.alive):
            task = self._next()
            want = min(self.batch, settings.trials - len(self.trials))
            self._round(task, want)
        return NetworkTuneResult(self.tasks, self.trials, self.rounds, self.measured,
                                 self.batch)

    def _next(self) -> int:
        live = [i for i in range(len(self.tasks)) if self.alive[i]]
        # Every task gets a round before any gets a second; one without a correct
        # trial yet has no gradient and goes first.
        fresh = [i for i in live if not self.history[i]]
        if fresh:
            return min(fresh, key=lambda i: len(self.records[i]))
        if self.strategy == "uniform":
            return min(live, key=lambda i: (len(self.records[i]), i))
        return choose_task(self.history, [t.weight for t in self.tasks],
                           [t.op.macs for t in self.tasks], [t.kind for t in self.tasks],
                           self.alive, self.rng, self.epsilon, **self.gradient_options)

    def _round(self, task: int, want: int) -> None:
        records = self.records[task]
        others = [r for i, rs in enumerate(self.records) if i != task for r in rs]
        settings = dataclasses.replace(self.settings, trials=len(records) + want, resume=True,
                                       batch=want, seed=self.settings.seed + len(records))

        def logged(record):
            if self.progress is not None:
                self.progress(task, record)

        result = tune(self.tasks[task].op, self.config, settings, pool=self.pool,
                      transfer=others, cache=self.cache, progress=logged, message=self.message)
        new = result.records[len(records):]
        self.measured += result.measured
        records.extend(new)
        self.trials.extend((task, record) for record in new)
        self.rounds.append(task)
        best = _best_after(records)
        if best is not None:
            self.history[task].append(best)
        else:
            self.failed_rounds[task] += 1
        # A space with no more legal points, or a task none of whose schedules runs,
        # takes no more rounds.
        if not new or self.failed_rounds[task] >= 2:
            self.alive[task] = False


def tuned_schedules(records: Sequence[dict], config: HwConfig, target: str = "accel"
                    ) -> Callable[[Any], Any]:
    """A schedule chooser for `graph.network.compile_network`: for a layer op, the
    schedule of its best correct trial in ``records`` on this config and design, else
    None (the default schedule).

    The chooser's ``applied`` attribute lists the workload keys it gave a schedule for.
    """
    chosen = get_target(target)
    design = design_digest(target, config)

    def schedule_for(op):
        record = best_record(records, op, config, target, design)
        if record is None:
            return None
        schedule_for.applied.append(workload_key(op))
        return chosen.space(op, config).decode(record["schedule"])

    schedule_for.applied = []
    return schedule_for
