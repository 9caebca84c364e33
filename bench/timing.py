"""Wall-clock timing of several implementations, each in blocks of its own.

A *block* is one implementation alone: ``warmup`` untimed calls, then
``calls`` timed calls, back to back. A *round* runs every implementation's
block once, in an order drawn at random (from a seeded generator); the
measurement is ``rounds`` rounds. Why blocks and not round-robin (one call
of each in turn): a call leaves its threads spinning, its caches and its
branch history behind, and round-robin hands all of that to the next
implementation. On an idle 2-core Zen 4 round-robin inflated onnxruntime fp32
from 16–17 ms (timed alone) to 28 ms (issue 24). Blocks let the warm-up calls
absorb what the previous block left; random order spreads a drift in the
machine's load over all implementations instead of always favouring the first.

`summarise` gives the figures reported: the median of every timed call, the
10th and 90th percentiles, the extremes, and each block's own median (their
spread is how much the machine changed between blocks).
"""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Callable, Mapping

import numpy as np

__all__ = ["Summary", "time_block", "run_blocks", "summarise", "clock"]

# The timer; tests replace it with a fake clock to check the arithmetic exactly.
clock: Callable[[], float] = time.perf_counter


def time_block(call: Callable[[], object], warmup: int, calls: int) -> list[float]:
    """Call ``call`` ``warmup`` times untimed, then ``calls`` times timed.

    Returns
    -------
    list of float
        The seconds of each timed call, in call order.

    Raises
    ------
    ValueError
        When ``warmup`` is negative or ``calls`` is below one.
    """
    if warmup < 0 or calls < 1:
        raise ValueError(f"a timed block needs warm-up >= 0 and calls >= 1 "
                         f"(got warm-up {warmup}, calls {calls})")
    for _ in range(warmup):
        call()
    seconds = []
    for _ in range(calls):
        began = clock()
        call()
        seconds.append(clock() - began)
    return seconds


def run_blocks(implementations: Mapping[str, Callable[[], object]], warmup: int, calls: int,
               rounds: int, order: random.Random,
               progress: Callable[[str], None] | None = None) -> dict[str, list[list[float]]]:
    """Time every implementation in ``rounds`` rounds of blocks, blocks in random order.

    Parameters
    ----------
    implementations : mapping of str to callable
        Name to a call taking no arguments.
    warmup, calls : int
        Untimed and timed calls of each block (`time_block`).
    rounds : int
        How many times each implementation's block runs.
    order : random.Random
        Draws each round's block order (seed it to repeat a run's order).
    progress : callable, optional
        Told ``"round r/R: name"`` before each block.

    Returns
    -------
    dict
        Name to its blocks' seconds: ``rounds`` lists of ``calls`` floats,
        the r-th list from the r-th round.
    """
    if rounds < 1:
        raise ValueError(f"timing needs at least one round (got {rounds})")
    names = list(implementations)
    seconds: dict[str, list[list[float]]] = {name: [] for name in names}
    for number in range(rounds):
        order.shuffle(names)
        for name in names:
            if progress:
                progress(f"round {number + 1}/{rounds}: {name}")
            seconds[name].append(time_block(implementations[name], warmup, calls))
    return seconds


@dataclasses.dataclass(frozen=True)
class Summary:
    """One implementation's timed calls over all its blocks, in seconds."""

    median: float
    p10: float
    p90: float
    low: float
    high: float
    block_medians: tuple[float, ...]


def summarise(blocks: list[list[float]]) -> Summary:
    """The median, 10th/90th percentiles (numpy's linear interpolation), extremes and
    per-block medians of ``blocks`` (as `run_blocks` returns for one implementation)."""
    if not blocks or not all(blocks):
        raise ValueError("no timed calls to summarise")
    every = np.concatenate([np.asarray(block, np.float64) for block in blocks])
    p10, median, p90 = np.percentile(every, [10, 50, 90])
    return Summary(float(median), float(p10), float(p90), float(every.min()),
                   float(every.max()), tuple(float(np.median(block)) for block in blocks))
