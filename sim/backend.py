"""The interface every simulation tier implements, and the registry by name.

A backend executes the program that sits in a DRAM image, exactly as the
hardware would after the host wrote the image and pulsed ``start``: it fetches
``insn_count`` instructions from byte ``insn_offset`` and leaves its results in
the same image (modified in place).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol

import numpy as np

from vdla.hw.config import HwConfig

__all__ = ["RunResult", "Backend", "register_backend", "get_backend", "backend_names"]


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
    """What `get_backend` returns: a named simulator of one config.

    Attributes
    ----------
    name : str
        The name it is registered under.
    """

    name: str

    def run(self, dram: np.ndarray, insn_offset: int, insn_count: int) -> RunResult:
        """Run the program in ``dram`` (uint8, modified in place)."""


_REGISTRY: dict[str, Callable[..., Backend]] = {}


def register_backend(name: str, factory: Callable[..., Backend]) -> None:
    """Make ``factory(config, **options)`` available as backend ``name``."""
    _REGISTRY[name] = factory


def backend_names() -> list[str]:
    """Names of every registered backend, sorted (the built-in ones included)."""
    _load_builtin()
    return sorted(_REGISTRY)


def get_backend(name: str, config: HwConfig, **options) -> Backend:
    """Construct the backend called ``name`` for ``config``.

    Raises
    ------
    ValueError
        For an unknown backend name.
    """
    _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"unknown simulator {name!r} (available: {', '.join(sorted(_REGISTRY))})")
    return _REGISTRY[name](config, **options)


def _load_builtin() -> None:
    # Backends register themselves on import; importing lazily keeps the
    # Verilator tier's start-up cost away from users who only want fsim.
    import importlib
    for module in ("vdla.sim.fsim", "vdla.sim.rtl", "vdla.sim.board"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:
                raise
