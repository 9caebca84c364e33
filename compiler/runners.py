"""`make_runner`: the runner of a target's programs, for callers that take the target as data.

``accel`` programs run on `runtime.runner.AccelRunner` (a simulation backend or
a board), ``cpu`` ones on `compiler.cpu.runner.CpuRunner` and ``gpu`` ones on
`compiler.gpu.runner.GpuRunner`; all three take ``run(program, inputs)`` and
return a `runtime.runner.ProgramResult`. The host runners live here, in the
compiler, because they regenerate their code from the program's op; the
runtime below runs accelerator programs only.
"""

from __future__ import annotations

from vdla.compiler.cpu.runner import CpuRunner
from vdla.compiler.gpu.runner import GpuRunner
from vdla.hw.config import HwConfig
from vdla.runtime.program import PROGRAM_TARGETS
from vdla.runtime.runner import AccelRunner

__all__ = ["make_runner"]


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
    if target == "cpu":
        return CpuRunner(**options)
    if target == "gpu":
        return GpuRunner(**options)
    raise ValueError(f"unknown target {target!r} (known: {', '.join(PROGRAM_TARGETS)})")
