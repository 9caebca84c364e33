"""`make_runner`: the runner of a target's programs, for callers that take the target as data.

``accel`` programs run on `runtime.runner.AccelRunner` (a simulation backend or
a board), ``cpu`` ones on `compiler.cpu.runner.CpuRunner` and ``gpu`` ones on
`compiler.gpu.runner.GpuRunner`; all three take ``run(program, inputs)`` and
return a `runtime.runner.ProgramResult`. The host runners live here, in the
compiler, because they regenerate their code from the program's op; the
runtime below runs accelerator programs only.

Each runner declares the options a user sets (`run_options`): a simulation
backend when it registers (`sim.backend.register_backend`), a host target in
`HOST_RUNNERS`. ``vdla run`` reads nothing else to accept, refuse and document
them (`cli.backend_options`).
"""

from __future__ import annotations

from vdla.compiler.cpu.runner import CpuRunner
from vdla.compiler.gpu.runner import GpuRunner
from vdla.hw.config import HwConfig
from vdla.runtime.program import PROGRAM_TARGETS
from vdla.runtime.runner import AccelRunner

__all__ = ["make_runner", "run_options", "runner_names", "HOST_RUNNERS"]

# Each host target's runner and the keyword options of it that a user sets.
HOST_RUNNERS = {"cpu": (CpuRunner, ("threads",)), "gpu": (GpuRunner, ())}


def make_runner(target: str, config: HwConfig | None = None, sim: str = "fsim", **options):
    """A runner of ``target``'s programs.

    Parameters
    ----------
    target : str
        One of `runtime.program.PROGRAM_TARGETS`.
    config : HwConfig, optional
        The accelerator (``accel`` only).
    sim : str
        The backend (``accel`` only).
    **options
        The runner's own: a backend's options for ``accel``, ``threads=``
        for ``cpu``, ``emulate=`` for ``gpu``.

    Raises
    ------
    ValueError
        For an unknown target.
    """
    if target == "accel":
        return AccelRunner(config, sim, **options)
    if target in HOST_RUNNERS:
        return HOST_RUNNERS[target][0](**options)
    raise ValueError(f"unknown target {target!r} (known: {', '.join(PROGRAM_TARGETS)})")


def run_options(target: str, sim: str = "fsim") -> tuple[str, ...]:
    """The keyword options of ``target``'s runner (on backend ``sim`` for ``accel``)
    that a user sets.

    Raises
    ------
    sim.errors.OptionError
        For an unknown backend.
    ValueError
        For an unknown target.
    """
    from vdla.sim.backends import run_options as backend_options
    if target == "accel":
        return backend_options(sim)
    if target in HOST_RUNNERS:
        return HOST_RUNNERS[target][1]
    raise ValueError(f"unknown target {target!r} (known: {', '.join(PROGRAM_TARGETS)})")


def runner_names() -> list[tuple[str, str | None]]:
    """Every runner as ``(target, sim)``: the accelerator on each registered backend, then
    the host targets (``sim`` None)."""
    from vdla.sim.backends import backend_names
    return [("accel", sim) for sim in backend_names()] + [(t, None) for t in HOST_RUNNERS]
