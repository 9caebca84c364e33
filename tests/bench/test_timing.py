"""`bench.timing`: blocks, their random order, and the figures from them (on a fake clock)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from vdla.bench import timing


def logged(log: list[str], names):
    return {name: (lambda name=name: log.append(name)) for name in names}


def test_each_block_is_one_implementation_and_each_round_a_fresh_random_order():
    names = ("a", "b", "c", "d")
    log: list[str] = []
    seconds = timing.run_blocks(logged(log, names), warmup=2, calls=3, rounds=6,
                                order=random.Random(1))
    assert len(log) == 6 * 4 * 5
    blocks = [log[start:start + 5] for start in range(0, len(log), 5)]
    assert all(len(set(block)) == 1 for block in blocks)  # warm-up and calls, contiguous
    orders = [tuple(block[0] for block in blocks[r * 4:(r + 1) * 4]) for r in range(6)]
    assert all(sorted(order) == list(names) for order in orders)
    assert len(set(orders)) > 1
    assert {name: [len(block) for block in blocks_] for name, blocks_ in seconds.items()} == \
        {name: [3] * 6 for name in names}
    again: list[str] = []
    timing.run_blocks(logged(again, names), 2, 3, 6, random.Random(1))
    other: list[str] = []
    timing.run_blocks(logged(other, names), 2, 3, 6, random.Random(2))
    assert again == log and other != log


def test_only_the_timed_calls_are_timed(monkeypatch):
    durations = iter([100.0, 100.0, 3.0, 1.0, 2.0])  # two warm-up calls, three timed
    clock = {"now": 0.0}

    def call():
        clock["now"] += next(durations)
    monkeypatch.setattr(timing, "clock", lambda: clock["now"])
    assert timing.time_block(call, warmup=2, calls=3) == [3.0, 1.0, 2.0]


def test_summary_is_the_median_percentiles_extremes_and_block_medians():
    summary = timing.summarise([[5.0, 1.0, 3.0, 2.0, 4.0], [10.0, 6.0, 8.0, 7.0, 9.0]])
    # numpy's linear percentiles of 1..10: p10 at rank 0.9 -> 1.9, p90 at rank 8.1 -> 9.1
    assert (summary.median, summary.p10, summary.p90) == pytest.approx((5.5, 1.9, 9.1))
    assert (summary.low, summary.high, summary.block_medians) == (1.0, 10.0, (3.0, 8.0))
    samples = np.random.default_rng(0).exponential(size=(4, 7))
    summary = timing.summarise(samples.tolist())
    assert summary.p90 == pytest.approx(np.percentile(samples, 90))
    assert summary.block_medians == pytest.approx(tuple(np.median(samples, axis=1)))


def test_impossible_blocks_are_refused():
    with pytest.raises(ValueError, match=r"^a timed block needs warm-up >= 0 and calls >= 1 "
                                         r"\(got warm-up -1, calls 1\)$"):
        timing.time_block(lambda: None, -1, 1)
    with pytest.raises(ValueError, match=r"\(got warm-up 0, calls 0\)$"):
        timing.time_block(lambda: None, 0, 0)
    with pytest.raises(ValueError, match=r"^timing needs at least one round \(got 0\)$"):
        timing.run_blocks({"a": lambda: None}, 0, 1, 0, random.Random(0))
    with pytest.raises(ValueError, match=r"^no timed calls to summarise$"):
        timing.summarise([[1.0], []])
