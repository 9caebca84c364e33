"""Search strategies over a declared knob space: grid, random, and a learned model.

A tuner proposes batches of points (option indices of a `ScheduleSpace`) it
has not proposed before and learns from their measurements (`update`).
`GridTuner` walks the legal points in order, `RandomTuner` draws them
uniformly. `XGBTuner` is AutoTVM's model-based tuner: an XGBoost ranking model
(``rank:pairwise``) trained on the features of measured candidates
(`tune.features`) scores unmeasured ones, and the batch is the unmeasured
points the model ranks highest (a small share stays random to keep
exploring). Where the space is small enough (``enumerate_limit`` points, the
ResNet-18 layers' spaces are ~10^5) the model scores every legal point, so the
batch is the model's true top; in larger spaces simulated annealing, from the
best points so far and random ones, collects it as AutoTVM does. Until
there are measurements to learn from, the analytical estimate
(`compiler.schedule.estimate_cost`, the target's ``prior_feature``) ranks: the
model starts from the hand-written cost model and learns where it is wrong. The model
can warm-start from other workloads' measurements: each workload is its own
ranking group, so only orderings within a workload are learned.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable, Sequence

import numpy as np

from vdla.compiler.schedule import ScheduleSpace
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

    def features(self, point: Point) -> np.ndarray | None:
        """The point's features, or None when it is illegal."""
        if point not in self._features:
            self._features[point] = self.target.features(self.space,
                                                         self.space.schedule(point))
        return self._features[point]

    def legal(self, point: Point) -> bool:
        return self.features(point) is not None

    def random_points(self, count: int, exclude: set[Point], tries: int = 20000) -> list[Point]:
        """Up to ``count`` distinct legal points not in ``exclude``, drawn uniformly."""
        shape, found = self.space.shape, []
        seen = set(exclude)
        for _ in range(tries):
            if len(found) == count:
                break
            point = tuple(int(self.rng.integers(n)) for n in shape)
            if point in seen:
                continue
            seen.add(point)
            if self.legal(point):
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
        batch = []
        for point in self._order:
            if len(batch) == count:
                break
            if point not in visited and self.legal(point):
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
        Parallel annealing chains and steps per batch (spaces too large to score whole).
    epsilon : float
        Share of each batch drawn at random.
    enumerate_limit : int
        Spaces of at most this many points (legal or not) are scored whole.
    """

    def __init__(self, space, target, seed=0, transfer=(), chains: int = 48,
                 steps: int = 60, epsilon: float = 0.1, enumerate_limit: int = 200_000):
        super().__init__(space, target, seed)
        try:
            import xgboost  # noqa: F401
        except ImportError:
            raise TuneError("the xgb tuner needs the 'xgboost-cpu' package "
                            "(pip install 'vdla[tune]'); --tuner random or grid need nothing") \
                from None
        self.seed = seed
        self.chains, self.steps, self.epsilon = chains, steps, epsilon
        self.transfer = [(np.asarray(x, np.float32), rank_labels(list(costs)))
                         for x, costs in transfer if len(costs)]
        self.measured: list[tuple[Point, float | None]] = []
        self.model = None
        self._everything = (None if math.prod(space.shape) > enumerate_limit
                            else self._legal_matrix())

    def _legal_matrix(self) -> tuple[list[Point], np.ndarray] | None:
        """Every legal point of the space and its features (None if none is legal)."""
        points = [point for point in self.space.points() if self.legal(point)]
        if not points:
            return None
        return points, np.stack([self._features[point] for point in points])

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
        data = xgboost.DMatrix(np.concatenate([x for x, _ in groups]),
                               label=np.concatenate([labels for _, labels in groups]),
                               qid=np.concatenate([np.full(len(labels), i)
                                                   for i, (_, labels) in enumerate(groups)]))
        params = {"objective": "rank:pairwise", "max_depth": 4, "eta": 0.3,
                  "min_child_weight": 1, "gamma": 1e-4, "nthread": 1, "seed": self.seed,
                  "verbosity": 0}
        return xgboost.train(params, data, num_boost_round=60)

    def _score(self, points: list[Point]) -> np.ndarray:
        return self._score_features(np.stack([self.features(p) for p in points]))

    def _score_features(self, x: np.ndarray) -> np.ndarray:
        if self.model is None:                  # the prior: lower analytical estimate first
            return -x[:, self.target.prior_feature]
        return self.model.inplace_predict(x)

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
        explore = int(round(count * self.epsilon))
        if self._everything is not None:
            batch = self._top(count - explore, visited)
        else:
            batch = self._anneal(count - explore, visited)
        return batch + self.random_points(count - len(batch), visited | set(batch))

    def _top(self, count: int, visited: set[Point]) -> list[Point]:
        """The ``count`` unvisited legal points the model ranks best, over the whole space."""
        points, x = self._everything
        scores = self._score_features(x)
        batch = []
        for index in np.argsort(-scores, kind="stable"):
            if len(batch) == count:
                break
            if points[index] not in visited:
                batch.append(points[index])
        return batch

    def _anneal(self, count: int, visited: set[Point]) -> list[Point]:
        """The ``count`` unvisited legal points the model ranks best along annealing chains."""
        best_measured = sorted((cost, point) for point, cost in self.measured
                               if cost is not None)[:self.chains // 2]
        starts = [point for _, point in best_measured]
        starts += self.random_points(self.chains - len(starts), set(starts))
        if not starts:
            return []
        chains = list(starts)
        scores = self._score(chains)
        top: list[tuple[float, Point]] = []      # a min-heap of the best unvisited points
        in_top: set[Point] = set()

        def consider(point, score):
            if point in visited or point in in_top:
                return
            if len(top) < count:
                heapq.heappush(top, (score, point))
                in_top.add(point)
            elif score > top[0][0]:
                _, dropped = heapq.heapreplace(top, (score, point))
                in_top.discard(dropped)
                in_top.add(point)

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
        return [point for _, point in sorted(top, reverse=True)]


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
