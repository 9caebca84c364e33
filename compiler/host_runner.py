"""Running host-target programs (``cpu``, ``gpu``): a kernel built once per program, timed runs.

`HostRunner` is what the host targets' runners share (`compiler.cpu.CpuRunner`,
`compiler.gpu.GpuRunner`): it refuses another target's program, checks the
program's header against its op (`compiler.host.host_spec`) and the inputs
against its tensors (`runtime.runner.check_inputs`), builds the kernel from
the checked op, mode and schedule (the code is generated again, never read
from the program, so nothing but code vdla generates is ever built or
loaded) and returns a `runtime.runner.ProgramResult`, the contract the
accelerator's `runtime.runner.AccelRunner` keeps too.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from vdla.compiler.host import HostSpec, host_spec
from vdla.runtime.program import Program
from vdla.runtime.runner import ProgramResult, check_inputs, refuse_target

__all__ = ["HostRunner"]


class HostRunner:
    """Runs the programs of one generated-code target.

    Subclasses name their ``target``, build a kernel from a checked
    `compiler.host.HostSpec` (``_load``), run it (``_run``) and say what a
    run reports (``_details``).
    """

    target = ""

    def __init__(self):
        self._kernels: dict[tuple, Any] = {}

    def _load(self, spec: HostSpec):
        raise NotImplementedError

    def _run(self, kernel, data: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _details(self, kernel) -> dict[str, Any]:
        raise NotImplementedError

    def check_target(self, program: Program) -> None:
        """Raise `runtime.errors.ProgramError` unless ``program`` is one of this target's."""
        refuse_target(program, self.target, f"the {self.target} target")

    def run(self, program: Program, inputs: dict[str, np.ndarray]) -> ProgramResult:
        """Run ``program`` on ``inputs``: its output and the run's wall time.

        Raises
        ------
        runtime.errors.InputError
            Missing, unknown, mistyped or misshapen inputs.
        runtime.errors.ProgramError
            A program of another target, or whose header `compiler.host.host_spec`
            rejects.
        """
        self.check_target(program)
        spec = host_spec(program)
        check_inputs(program, inputs)
        return self.run_spec(spec, inputs)

    def run_spec(self, spec: HostSpec, inputs: dict[str, np.ndarray]) -> ProgramResult:
        """Run what a checked ``spec`` describes (`compiler.host.host_spec`) on checked inputs.

        The kernel is built from the spec's op, mode and schedule only, never
        from its ``source``; it is built once per spec and kept.
        """
        kernel = self._kernels.get(spec.key)
        if kernel is None:
            kernel = self._kernels[spec.key] = self._load(spec)
        kernel.set_weights(inputs["weight"], inputs.get("bias"))
        began = time.perf_counter()
        # A layer with a residual (`compiler.ops.Epilogue.residual_shift`) also reads it.
        extra = {"residual": inputs["residual"]} if "residual" in inputs else {}
        out = self._run(kernel, inputs["data"], **extra)
        seconds = time.perf_counter() - began
        return ProgramResult(outputs={"out": out}, cycles=None, counters={},
                             details={"seconds": seconds, "mode": kernel.mode,
                                      "schedule": kernel.schedule.to_dict(),
                                      **self._details(kernel)},
                             sim=self.target, instructions=0)
