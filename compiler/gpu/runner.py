"""`GpuRunner`: runs ``gpu`` programs on a CUDA device (NVRTC, CuPy) or emulated on this CPU."""

from __future__ import annotations

from typing import Any

import numpy as np

from vdla.compiler.gpu.host_emulation import EmulatedKernel, EmulationError
from vdla.compiler.gpu.kernel import GpuKernel, gpu_unavailable_reason
from vdla.compiler.host_runner import HostRunner
from vdla.runtime.errors import ProgramError

__all__ = ["GpuRunner"]


class GpuRunner(HostRunner):
    """Runs ``gpu`` programs on the current CUDA device (CUDA C compiled by NVRTC through CuPy).

    A run's ``seconds`` include the copies in and out that the host-array
    contract needs; `compiler.gpu.kernel.GpuKernel.launch` is the device-only path.

    Parameters
    ----------
    emulate : bool
        Run the same generated CUDA C on this CPU instead
        (`compiler.gpu.host_emulation`; int8 and fp32, slow: for tests).

    Raises
    ------
    ProgramError
        When no CUDA device (or no CuPy) is available, saying which.
    """

    target = "gpu"

    def __init__(self, emulate: bool = False):
        super().__init__()
        self.emulate = emulate
        if emulate:
            return
        reason = gpu_unavailable_reason()
        if reason is not None:
            raise ProgramError(f"the gpu target cannot run here: {reason}")

    def _load(self, spec):
        if self.emulate:
            try:
                return EmulatedKernel(spec.op, spec.mode, spec.schedule)
            except EmulationError as error:
                raise ProgramError(f"gpu program: cannot emulate it here: "
                                   f"{str(error).splitlines()[0]}") from None
        return GpuKernel(spec.op, spec.mode, spec.schedule)

    def _run(self, kernel, data: np.ndarray) -> np.ndarray:
        return kernel.run(data)

    def _details(self, kernel) -> dict[str, Any]:
        launch = {"grid": list(kernel.tiling.grid), "threads_per_block": kernel.tiling.threads}
        if self.emulate:
            return {"device": "host emulation (compiler.gpu.host_emulation)", **launch}
        import cupy  # optional (vdla[gpu]); there is a device, so it imports
        return {"device": cupy.cuda.runtime.getDeviceProperties(
            cupy.cuda.Device().id)["name"].decode(), **launch}
