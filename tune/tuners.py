"""Search strategies over a declared knob space: grid, random, and a learned model.

A tuner proposes batches of points (option indices of a `ScheduleSpace`) it
has not proposed before and learns from their measurements (`update`). No
tuner proposes two points that compile to the same program (the space's
``canonical``: loop orders differing only in one-iteration loops).
`GridTuner` walks the legal points in order, `RandomTuner` draws them
uniformly. `XGBTuner` is AutoTVM's model-based tuner: an XGBoost ranking model
(``rank:pairwise``) trained on the features of measured candidates
(`tune.features`) scores unmeasured ones; simulated annealing over the space,
from the best points so far and random ones, collects the candidates the model
ranks highest, AutoTVM's diversity filter picks the batch among them, and a
share of it stays random to keep exploring. Until there are
measurements to learn from, the analytical estimate
(`compiler.accel.cost.estimate_cost`, the target's ``prior_feature``) ranks and
half the first batch is random; after that the estimate is the margin the
model's trees correct: the model starts from the hand-written cost model and
learns where it is wrong. The model can warm-start from other
workloads' measurements: each workload is its own ranking group, so only
orderings within a workload are learned.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable, Sequence

import numpy as np

from vdla.compiler.accel.space import ScheduleSpace
from vdla.tune.target import Measurement, Target, TuneError

__all__ = ["Tuner", "GridTuner", "RandomTuner", "XGBTuner", "TUNERS", "make_tuner",
           "rank_labels"]

Point = tuple[int, ...]


class Tuner:
    """Base: legality and features of points, cached; subclasses choose what to try."""

    def __init__(self, space: ScheduleSpace, target: Target, seed: int = 0):
        self.space, self.target = space, target
        self.rng = np.random.default_rng(seed)
        self._features: dict[Point, np.ndarray | None] = {}
        self._programs: dict[Point, Point] = {}

    def features(self, point: Point) -> np.ndarray | None:
        """The point's features, or None when it is illegal."""
        if point not in self._features:
            self._features[point] = self.target.features(self.space,
                                                         self.space.schedule(point))
        return self._features[point]

    def legal(self, point: Point) -> bool:
        return self.features(point) is not None

    def program(self, point: Point) -> Point:
        """The point's representative among points that compile to the same program
        (the space's ``canonical``, where it has one): measuring two of them is one
        measurement twice."""
        if point not in self._programs:
            canonical = getattr(self.space, "canonical", None)
            self._programs[point] = point if canonical is None else canonical(point)
        return self._programs[point]

    def programs(self, points) -> set[Point]:
        return {self.program(point) for point in points}

    def random_points(self, count: int, exclude: set[Point], tries: int = 20000) -> list[Point]:
        """Up to ``count`` legal points drawn uniformly, none the same program as another
        or as a point in ``exclude``."""
        shape, found = self.space.shape, []
        seen, taken = set(exclude), self.programs(exclude)
        for _ in range(tries):
            if len(found) == count:
                break
            point = tuple(int(self.rng.integers(n)) for n in shape)
            if point in seen:
                continue
            seen.add(point)
            if self.legal(point) and self.program(point) not in taken:
                taken.add(self.program(point))
                found.append(point)
        return found

    def propose(self, count: int, visited: set[Point]) -> list[Point]:
        raise NotImplementedError

    def update(self, results: Sequence[tuple[Point, Measurement]]) -> None:
        """Learn from measured points (the default learns nothing)."""


class GridTuner(Tuner):
    """Every legal point, in the space's row-major order."""

    def __init__(self, space, target, seed=0):
        super().__init__(space, target, seed)
        self._order = space.points()

    def propose(self, count, visited):
        batch, taken = [], self.programs(visited)
        for point in self._order:
            if len(batch) == count:
                break
            if self.legal(point) and self.program(point) not in taken:
                taken.add(self.program(point))
                batch.append(point)
        return batch


class RandomTuner(Tuner):
    """Legal points drawn uniformly, never twice."""

    def propose(self, count, visited):
        return self.random_points(count, visited)


def rank_labels(costs: Sequence[float | None]) -> np.ndarray:
    """Relevance of each measurement within its workload: best cost / cost, 0 for failures."""
    good = [cost for cost in costs if cost is not None]
    best = min(good) if good else 1.0
    return np.asarray([best / cost if cost is not None else 0.0 for cost in costs],
                      dtype=np.float32)


class XGBTuner(Tuner):
    """Model-guided search: an XGBoost ranker proposes batches by simulated annealing.

    Parameters
    ----------
    transfer : sequence of (features, costs)
        Measurements of other workloads, one pair of arrays per workload.
    chains, steps : int
        Parallel annealing chains and steps per batch.
    epsilon : float
        Share of each batch drawn at random.
    prior_weight : float
        Score per halving of the analytical estimate in the margin the model
        starts from (`_prior`).
    diversity, knob_weight : int, float
        A batch is picked from ``diversity`` times its size of the model's best
        candidates, favouring knob values it does not hold yet (`_diverse`).
    """

    def __init__(self, space, target, seed=0, transfer=(), chains: int = 48,
                 steps: int = 60, epsilon: float = 0.1, diversity: int = 4,
                 knob_weight: float = 0.1, prior_weight: float = 4.0):
        super().__init__(space, target, seed)
        try:
            import xgboost  # noqa: F401
        except ImportError:
            raise TuneError("the xgb tuner needs the 'xgboost-cpu' package "
                            "(a dependency of vdla: reinstall it); --tuner random or grid need nothing") \
                from None
        self.seed = seed
        self.chains, self.steps, self.epsilon = chains, steps, epsilon
        self.diversity, self.knob_weight = diversity, knob_weight
        self.prior_weight = prior_weight
        self.transfer = [(np.asarray(x, np.float32), rank_labels(list(costs)))
                         for x, costs in transfer if len(costs)]
        self.measured: list[tuple[Point, float | None]] = []
        self.model = None

    def update(self, results):
        self.measured += [(point, m.cost if m.ok else None) for point, m in results]
        self.model = self._train()

    def _train(self):
        import xgboost
        groups = list(self.transfer)
        if self.measured:
            x = np.stack([self.features(point) for point, _ in self.measured])
            groups.append((x, rank_labels([cost for _, cost in self.measured])))
        rows = sum(len(labels) for _, labels in groups)
        if rows < 8:
            return None
        x = np.concatenate([x for x, _ in groups])
        data = xgboost.DMatrix(x, label=np.concatenate([labels for _, labels in groups]),
                               qid=np.concatenate([np.full(len(labels), i)
                                                   for i, (_, labels) in enumerate(groups)]),
                               base_margin=self._prior(x))
        params = {"objective": "rank:pairwise", "max_depth": 4, "eta": 0.3,
                  "min_child_weight": 1, "gamma": 1e-4, "nthread": 1, "seed": self.seed,
                  "verbosity": 0}
        return xgboost.train(params, data, num_boost_round=60)

    def _prior(self, x: np.ndarray) -> np.ndarray:
        """The analytical estimate's score of each row (0 without one): the margin the
        model's trees correct, so a model of a few trials starts from the estimate."""
        feature = getattr(self.target, "prior_feature", None)
        if feature is None:
            return np.zeros(len(x), dtype=np.float32)
        return -self.prior_weight * x[:, feature]

    def _score(self, points: list[Point]) -> np.ndarray:
        x = np.stack([self.features(p) for p in points])
        if self.model is None:
            return self._prior(x)
        return self.model.inplace_predict(x, base_margin=self._prior(x))

    def _neighbour(self, point: Point) -> Point:
        knobs = [i for i, n in enumerate(self.space.shape) if n > 1]
        knob = knobs[int(self.rng.integers(len(knobs)))]
        values = list(point)
        values[knob] = int(self.rng.integers(self.space.shape[knob] - 1))
        values[knob] += values[knob] >= point[knob]
        return tuple(values)

    def propose(self, count, visited):
        if not any(n > 1 for n in self.space.shape) or (
                self.model is None and getattr(self.target, "prior_feature", None) is None):
            return self.random_points(count, visited)
        # Until a model is trained, half the batch explores: the prior alone cannot
        # say where it is wrong, and a ranker learns only from contrasts.
        share = self.epsilon if self.model is not None else max(self.epsilon, 0.5)
        exploit = count - int(round(count * share))
        pool = exploit * self.diversity
        batch = self._diverse(self._anneal(pool, visited), exploit)
        return batch + self.random_points(count - len(batch), visited | set(batch))

    def _diverse(self, ranked: list[tuple[float, Point]], count: int) -> list[Point]:
        """AutoTVM's diversity filter: from the model's best candidates, greedily the one
        of best score (scaled to 0..1 over the candidates) plus ``knob_weight`` per knob
        value the batch does not hold yet, so one batch does not spend itself on
        near-copies of one guess."""
        if len(ranked) <= count:
            return [point for _, point in ranked]
        scores = np.array([score for score, _ in ranked])
        spread = scores.max() - scores.min()
        scaled = (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)
        chosen, covered, left = [], set(), list(range(len(ranked)))
        for _ in range(count):
            best = max(left, key=lambda i: scaled[i] + self.knob_weight * len(
                set(enumerate(ranked[i][1])) - covered))
            left.remove(best)
            chosen.append(ranked[best][1])
            covered |= set(enumerate(ranked[best][1]))
        return chosen

    def _anneal(self, count: int, visited: set[Point]) -> list[tuple[float, Point]]:
        """The ``count`` unvisited programs the model ranks best along annealing chains,
        best first, with their scores."""
        best_measured = sorted((cost, point) for point, cost in self.measured
                               if cost is not None)[:self.chains // 2]
        starts = [point for _, point in best_measured]
        starts += self.random_points(self.chains - len(starts), set(starts))
        if not starts:
            return []
        chains = list(starts)
        scores = self._score(chains)
        taken = self.programs(visited)
        top: dict[Point, tuple[float, Point]] = {}     # program -> best (score, point) seen

        def consider(point, score):
            program = self.program(point)
            if program not in taken and (program not in top or score > top[program][0]):
                top[program] = (score, point)

        for point, score in zip(chains, scores):
            consider(point, float(score))
        spread = float(np.std(scores)) or 1.0
        for step in range(self.steps):
            temperature = spread * (1 - step / self.steps) + 1e-9
            moves = [self._neighbour(point) for point in chains]
            legal = [i for i, move in enumerate(moves) if self.legal(move)]
            if not legal:
                continue
            new_scores = self._score([moves[i] for i in legal])
            for i, score in zip(legal, new_scores):
                score = float(score)
                consider(moves[i], score)
                if score >= scores[i] or self.rng.random() < math.exp(
                        (score - scores[i]) / temperature):
                    chains[i], scores[i] = moves[i], score
        return heapq.nlargest(count, top.values())


TUNERS: dict[str, Callable[..., Tuner]] = {"xgb": XGBTuner, "random": RandomTuner,
                                          "grid": GridTuner}


def make_tuner(name: str, space: ScheduleSpace, target: Target, seed: int = 0,
               transfer=()) -> Tuner:
    """A tuner by name (``xgb``, ``random``, ``grid``).

    Raises
    ------
    TuneError
        For an unknown name.
    """
    if name not in TUNERS:
        raise TuneError(f"unknown tuner {name!r} (available: {', '.join(TUNERS)})")
    if name == "xgb":
        return XGBTuner(space, target, seed, transfer=transfer)
    return TUNERS[name](space, target, seed)
