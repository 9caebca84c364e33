"""`CpuRunner`: runs ``cpu`` programs in-process, their C generated, built (cached) and called."""

from __future__ import annotations

from typing import Any

import numpy as np

from vdla.compiler.cpu.build import CpuBuildError
from vdla.compiler.cpu.kernel import CpuKernel
from vdla.compiler.host_runner import HostRunner
from vdla.runtime.errors import ProgramError

__all__ = ["CpuRunner"]


class CpuRunner(HostRunner):
    """Runs ``cpu`` programs on this machine's processor, through ctypes.

    Parameters
    ----------
    threads : int
        Threads of each run (the caller's included).
    """

    target = "cpu"

    def __init__(self, threads: int = 2):
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"threads: expected a positive integer, got {threads!r}")
        super().__init__()
        self.threads = threads

    def _load(self, spec):
        try:
            return CpuKernel(spec.op, spec.mode, spec.schedule)
        except CpuBuildError as error:
            raise ProgramError(f"cpu program: its C does not build here: {error}") from None

    def _run(self, kernel, data: np.ndarray, residual: np.ndarray | None = None) -> np.ndarray:
        return kernel.run(data, threads=self.threads, residual=residual)

    def _details(self, kernel) -> dict[str, Any]:
        return {"threads": self.threads, "isa": kernel.isa}
