"""The interface every simulation tier implements, and how a tier registers by name.

A backend executes the program that sits in a DRAM image, exactly as the
hardware would after the host wrote the image and pulsed ``start``: it fetches
``insn_count`` instructions from byte ``insn_offset`` and leaves its results in
the same image (modified in place). Each tier registers its factory here when
it is imported (`register_backend`); `sim.backends` finds them by name.

A tier also declares, when it registers, which of its factory's keyword
options a user sets (`RUN_OPTIONS`): ``vdla run`` accepts, refuses and
documents its options from that table alone (`cli.backend_options`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Protocol

import numpy as np

__all__ = ["RunResult", "Backend", "register_backend", "REGISTRY", "RUN_OPTIONS"]


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

# The keyword options of each registered factory that a user sets (read through
# `sim.backends.run_options`).
RUN_OPTIONS: dict[str, tuple[str, ...]] = {}


def register_backend(name: str, factory: Callable[..., Backend],
                     run_options: Iterable[str] = ()) -> None:
    """Make ``factory(config, **options)`` available as backend ``name``.

    Parameters
    ----------
    name : str
    factory : callable
        ``factory(config, **options)`` returns the `Backend`.
    run_options : iterable of str
        The keyword options of ``factory`` that a user of ``vdla run`` sets
        (``trace``, ``cycle_limit``, ``port`` ...); its other keywords are for
        callers in Python (a prebuilt model, a transport).
    """
    REGISTRY[name] = factory
    RUN_OPTIONS[name] = tuple(run_options)
