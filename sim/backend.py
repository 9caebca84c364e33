"""The interface every simulation tier implements, and how a tier registers by name.

A backend executes the program that sits in a DRAM image, exactly as the
hardware would after the host wrote the image and pulsed ``start``: it fetches
``insn_count`` instructions from byte ``insn_offset`` and leaves its results in
the same image (modified in place). Each tier registers its factory here when
it is imported (`register_backend`); `sim.backends` finds them by name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol

import numpy as np

__all__ = ["RunResult", "Backend", "register_backend", "REGISTRY"]


@dataclasses.dataclass
class RunResult:
    """What a backend reports about one run.

    Parameters
    ----------
    cycles : int or None
        Simulated cycles from start to done; None for untimed tiers.
    counters : dict of str to int
        Event counters of the tier (names differ between tiers).
    details : dict
        Anything else worth reporting (e.g. per-module figures, trace path).
    """

    cycles: int | None
    counters: dict[str, int]
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


class Backend(Protocol):
    """What `sim.backends.get_backend` returns: a named simulator of one config.

    Attributes
    ----------
    name : str
        The name it is registered under.
    """

    name: str

    def run(self, dram: np.ndarray, insn_offset: int, insn_count: int) -> RunResult:
        """Run the program in ``dram`` (uint8, modified in place)."""


# Every registered factory by name (read through `sim.backends`).
REGISTRY: dict[str, Callable[..., Backend]] = {}


def register_backend(name: str, factory: Callable[..., Backend]) -> None:
    """Make ``factory(config, **options)`` available as backend ``name``."""
    REGISTRY[name] = factory
