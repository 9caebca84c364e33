"""`HostTarget`: what a host target's programs (``cpu``, ``gpu``) hold, how its code is generated.

Each target declares one beside its compiler (`compiler.cpu.program.CPU`,
`compiler.gpu.program.GPU`) and registers it here (`register_host_target`);
`compiler.host` checks programs against the registered ones (`host_targets`).
The targets sit above this shared module, so they register themselves, as
the simulation backends do into `sim.backend`; the package `vdla.compiler`
imports both, so they are registered before any of its modules is used.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

__all__ = ["HostTarget", "host_targets", "register_host_target"]


@dataclasses.dataclass(frozen=True)
class HostTarget:
    """What one host target's programs hold, and how its code is generated.

    Parameters
    ----------
    name : str
        ``"cpu"`` or ``"gpu"`` (the program's ``target``).
    code : str
        What its generator writes (``"C"``, ``"CUDA C"``), for messages.
    modes : tuple of str
    dtypes_of : callable
        ``mode -> {tensor name: numpy dtype}``.
    schedule_type : type
        A `vdla.records.JsonRecord` whose ``from_dict`` raises `ScheduleError`.
    generate : callable
        ``(op, mode, schedule) -> source``, deterministic.
    records : dict of str to (callable, str)
        The fields the compiling machine recorded: a test each value must
        pass, and what it must be (for the message).
    """

    name: str
    code: str
    modes: tuple[str, ...]
    dtypes_of: Callable[[str], dict]
    schedule_type: type
    generate: Callable[[Any, str, Any], str]
    records: dict[str, tuple[Callable[[Any], bool], str]]

    def info(self, mode: str, schedule, **records) -> dict:
        """The ``metadata[target]`` entry a compiler writes: no code, by construction."""
        return {"mode": mode, "schedule": schedule.to_dict(), **records}


_REGISTERED: dict[str, HostTarget] = {}


def register_host_target(target: HostTarget) -> HostTarget:
    """Make ``target`` one of `host_targets` (under its name); returns it, for
    ``CPU = register_host_target(HostTarget(...))``."""
    _REGISTERED[target.name] = target
    return target


def host_targets() -> dict[str, HostTarget]:
    """The registered host targets by name, in name order."""
    return dict(sorted(_REGISTERED.items()))
