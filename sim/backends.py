"""Every simulation backend by name: the built-in tiers, loaded on first use, and those registered.

The built-in tiers (`sim.fsim`, `sim.rtl`, `sim.board`) register themselves
into `sim.backend` when imported; they are imported here, lazily, so the
Verilator tier's start-up cost stays away from users who only want fsim, and
so `sim.backend` (which every tier imports) imports none of them.
"""

from __future__ import annotations

import importlib

from vdla.hw.config import HwConfig
from vdla.sim.backend import REGISTRY, RUN_OPTIONS, Backend
from vdla.sim.errors import OptionError

__all__ = ["get_backend", "backend_names", "run_options", "BUILTIN"]

# The modules of the built-in tiers, each registering its backends on import.
BUILTIN = ("vdla.sim.fsim", "vdla.sim.rtl", "vdla.sim.board")


def backend_names() -> list[str]:
    """Names of every registered backend, sorted (the built-in ones included)."""
    _load_builtin()
    return sorted(REGISTRY)


def run_options(name: str) -> tuple[str, ...]:
    """The keyword options backend ``name`` declares a user may set
    (`sim.backend.register_backend`); `OptionError` for an unknown name."""
    _load_builtin()
    if name not in REGISTRY:
        raise OptionError(f"unknown simulator {name!r} (available: {', '.join(sorted(REGISTRY))})")
    return RUN_OPTIONS.get(name, ())


def get_backend(name: str, config: HwConfig, **options) -> Backend:
    """Construct the backend called ``name`` for ``config``.

    Raises
    ------
    OptionError
        For an unknown backend name (or, from the backend, an option it does not take).
    """
    _load_builtin()
    if name not in REGISTRY:
        raise OptionError(f"unknown simulator {name!r} (available: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[name](config, **options)


def _load_builtin() -> None:
    for module in BUILTIN:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:
                raise
