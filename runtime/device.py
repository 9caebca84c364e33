"""Run a compiled program on a simulation backend, as a host driver would.

`Device` checks the user's tensors against the program's DRAM plan, verifies
the program (`runtime.verify`), builds the DRAM image (instructions,
micro-ops, packed inputs), hands it to a backend from the `sim.backend`
registry and unpacks the outputs back to logical arrays. A backend that does
not declare ``checks_programs = True`` (applying `sim.checker` itself, as
fsim and rtl do) gets the image only after `sim.checker.check_program`
accepted it, so no tier runs a program the verifier rejects.
``Device(target="cpu")`` runs ``cpu`` programs (generated C, `compiler.cpu`)
and ``Device(target="gpu")`` runs ``gpu`` programs (generated CUDA C,
`compiler.gpu`, on a CUDA device through CuPy) under the same inputs/outputs
contract instead; each kind of device refuses the others' programs. A host
program holds no code: its header is checked against its op
(`compiler.host.host_spec`) and its kernel regenerated from the op, mode and
schedule, so nothing but code vdla generates is ever built or loaded.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from vdla.hw.config import HwConfig
from vdla.runtime.layout import LayoutError, pack, packed_nbytes, unpack
from vdla.runtime.errors import InputError, ProgramError
from vdla.runtime.program import PROGRAM_TARGETS, Program
from vdla.runtime.verify import dram_image, verify_plan
from vdla.sim.backend import get_backend
from vdla.sim.checker import check_program

__all__ = ["Device", "DeviceResult", "InputError", "ProgramError", "describe_array"]


@dataclasses.dataclass
class DeviceResult:
    """The outcome of one `Device.run`.

    Parameters
    ----------
    outputs : dict of str to numpy.ndarray
        Every output tensor, unpacked to its logical shape and dtype.
    cycles : int or None
        Simulated cycles (None for untimed backends such as fsim).
    counters : dict of str to int
        The backend's event counters.
    details : dict
        The backend's extra report.
    sim : str
        Name of the backend that ran.
    instructions : int
        Instructions in the program.
    """

    outputs: dict[str, np.ndarray]
    cycles: int | None
    counters: dict[str, int]
    details: dict[str, Any]
    sim: str
    instructions: int


def describe_array(array_dtype, shape) -> str:
    """``"int32 (4,)"``, with the byte order when it is not the native one."""
    dtype = np.dtype(array_dtype)
    order = "" if dtype.isnative else {">": " big-endian", "<": " little-endian"}[dtype.byteorder]
    return f"{dtype.name}{order} {tuple(shape)}"


class Device:
    """One accelerator instance simulated by a backend, or the host CPU.

    Parameters
    ----------
    config : HwConfig, optional
        The accelerator; programs must have been compiled for the same hardware.
        Not needed with ``target="cpu"`` or ``"gpu"``.
    sim : str, optional
        A registered backend name (`sim.backend.backend_names`), ``"fsim"`` by default.
    target : str, optional
        ``"accel"`` (default: the simulated accelerator), ``"cpu"`` (this
        machine's processor; ``threads=`` sets its threads, 2 by default)
        or ``"gpu"`` (the current CUDA device, needs ``vdla[gpu]``; or, with
        ``emulate=True``, `compiler.gpu.host_emulation` on this CPU: slow, for
        tests on small layers).
    **backend_options
        Passed to the backend's factory (e.g. ``trace=`` or ``cycle_limit=`` for
        timed backends; ``activity=True`` makes ``rtl`` record each module's
        activity into ``DeviceResult.details["activity"]``, the input of
        `bench.plots.timeline`).
    """

    def __init__(self, config: HwConfig | None = None, sim: str = "fsim", *,
                 target: str = "accel", **backend_options):
        if target not in PROGRAM_TARGETS:
            raise ValueError(f"unknown target {target!r} (known: {', '.join(PROGRAM_TARGETS)})")
        self.config, self.target = config, target
        if target in _HOST_RUNNERS:
            self.sim, self.backend = target, _HOST_RUNNERS[target](**backend_options)
            return
        if config is None:
            raise ValueError("Device: the accelerator target needs a config (an HwConfig)")
        self.sim = sim
        self.backend = get_backend(sim, config, **backend_options)

    def check_target(self, program: Program) -> None:
        """Raise `ProgramError` unless ``program`` was compiled for this device's target."""
        if program.target == self.target:
            return
        here = (f"the accelerator's {self.sim} simulator" if self.target == "accel"
                else f"the {self.target} target")
        if program.target in _HOST_RUNNERS:
            what = {"cpu": "generated C", "gpu": "generated CUDA C"}[program.target]
            raise ProgramError(f"program compiled for target {program.target!r} ({what}) cannot "
                               f"run on {here}; run it with --target {program.target} "
                               f"(Device(target={program.target!r}))")
        raise ProgramError(f"program compiled for the accelerator (target "
                           f"{program.target!r}) cannot run on {here}; run it on a "
                           "simulator (--sim fsim or rtl, Device(config, sim=...))")

    def check_inputs(self, program: Program, inputs: dict[str, np.ndarray]) -> None:
        """Raise `InputError` unless ``inputs`` are exactly the program's inputs."""
        expected = {region.name: region for region in program.inputs}
        if not isinstance(inputs, dict):
            raise InputError(f"inputs must be a dict of name to array, got "
                             f"{type(inputs).__name__}")
        for name in inputs:
            if name not in expected:
                raise InputError(f"unknown input {name!r}: the program's inputs are "
                                 f"{', '.join(sorted(expected)) or 'none'}")
        for name, region in expected.items():
            if name not in inputs:
                raise InputError(f"missing input {name!r}: expected "
                                 f"{describe_array(region.dtype, region.shape)}")
            array = inputs[name]
            got = (describe_array(array.dtype, array.shape) if isinstance(array, np.ndarray)
                   else type(array).__name__)
            if (not isinstance(array, np.ndarray) or array.dtype != region.dtype
                    or tuple(array.shape) != tuple(region.shape)):
                raise InputError(f"input {name!r}: expected "
                                 f"{describe_array(region.dtype, region.shape)}, got {got}")

    def build_image(self, program: Program, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """The DRAM image the host would write: instructions, micro-ops and packed inputs."""
        self.check_target(program)
        if not self.config.same_hardware(program.config):
            raise ProgramError(
                f"program compiled for hardware {program.config.name!r} (config hash "
                f"{program.config.hash}) cannot run on {self.config.name!r} (config hash "
                f"{self.config.hash})")
        self.check_inputs(program, inputs)
        verify_plan(program)
        dram = dram_image(program)
        for region in program.inputs:
            try:
                packed = pack(region.layout, inputs[region.name], self.config, region.name)
            except LayoutError as error:
                raise InputError(str(error)) from None
            self._place(dram, region.dram_offset, packed.reshape(-1).view(np.uint8),
                        f"input {region.name!r}")
        return dram

    @staticmethod
    def _place(dram: np.ndarray, offset: int, data: np.ndarray, what: str) -> None:
        if offset < 0 or offset + data.size > dram.size:
            raise ProgramError(f"DRAM plan: {what} at bytes [{offset}, {offset + data.size}) "
                               f"do not fit the program's {dram.size}-byte DRAM image")
        dram[offset:offset + data.size] = data

    def run(self, program: Program, inputs: dict[str, np.ndarray]) -> DeviceResult:
        """Run ``program`` on ``inputs`` and return its outputs and counters.

        Raises
        ------
        InputError
            Missing, unknown, mistyped or misshapen inputs.
        ProgramError
            A program for other hardware, with a DRAM plan that
            `runtime.verify.verify_plan` rejects, or a host program whose header
            `compiler.host.host_spec` rejects.
        sim.errors.SimulationError
            A program that breaks a rule of `sim.checker` (deadlock, race, ...),
            found before any backend runs it; or a failure of the run itself
            (a timed backend's cycle limit).
        """
        if self.target in _HOST_RUNNERS:
            from vdla.compiler.host import host_spec
            self.check_target(program)
            spec = host_spec(program)
            self.check_inputs(program, inputs)
            return self.backend.run_program(spec, inputs)
        dram = self.build_image(program, inputs)
        if not getattr(self.backend, "checks_programs", False):
            # The backend does not apply sim.checker's rules itself: check first.
            check_program(self.config, dram, program.insn_offset, len(program.instructions))
        result = self.backend.run(dram, program.insn_offset, len(program.instructions))
        outputs = {}
        for region in program.outputs:
            nbytes = packed_nbytes(region.layout, region.shape, self.config)  # verified to fit
            flat = dram[region.dram_offset:region.dram_offset + nbytes]
            outputs[region.name] = unpack(region.layout, flat, region.shape, self.config)
        return DeviceResult(outputs=outputs, cycles=result.cycles, counters=dict(result.counters),
                            details=dict(result.details), sim=self.sim,
                            instructions=len(program.instructions))


class _KernelRunner:
    """Runs programs of a generated-code target: a kernel built once per spec, timed runs.

    Subclasses name their ``target``, build a kernel from a checked
    `compiler.host.HostSpec` (``_load``; from its op, mode and schedule: the
    code is generated again, never read from the program) and say what a run
    reports (``_details``).
    """

    target = ""

    def __init__(self):
        self._kernels: dict[tuple, Any] = {}

    def _load(self, spec):
        raise NotImplementedError

    def _run(self, kernel, data: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _details(self, kernel) -> dict[str, Any]:
        raise NotImplementedError

    def run_program(self, spec, inputs: dict[str, np.ndarray]) -> DeviceResult:
        """Run the program ``spec`` describes (`compiler.host.host_spec`) on checked inputs."""
        import time
        kernel = self._kernels.get(spec.key)
        if kernel is None:
            kernel = self._kernels[spec.key] = self._load(spec)
        kernel.set_weights(inputs["weight"], inputs.get("bias"))
        began = time.perf_counter()
        out = self._run(kernel, inputs["data"])
        seconds = time.perf_counter() - began
        return DeviceResult(outputs={"out": out}, cycles=None, counters={},
                            details={"seconds": seconds, "mode": kernel.mode,
                                     "schedule": kernel.schedule.to_dict(),
                                     **self._details(kernel)},
                            sim=self.target, instructions=0)


class CpuRunner(_KernelRunner):
    """Runs ``cpu`` programs in-process: C generated, built (cached) and called through ctypes.

    Parameters
    ----------
    threads : int
        Threads of each run (the caller's included).
    """

    target = name = "cpu"

    def __init__(self, threads: int = 2):
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"threads: expected a positive integer, got {threads!r}")
        super().__init__()
        self.threads = threads

    def _load(self, spec):
        from vdla.compiler.cpu.build import CpuBuildError
        from vdla.compiler.cpu.kernel import CpuKernel
        try:
            return CpuKernel(spec.op, spec.mode, spec.schedule)
        except CpuBuildError as error:
            raise ProgramError(f"cpu program: its C does not build here: {error}") from None

    def _run(self, kernel, data: np.ndarray) -> np.ndarray:
        return kernel.run(data, threads=self.threads)

    def _details(self, kernel) -> dict[str, Any]:
        return {"threads": self.threads, "isa": kernel.isa}


class GpuRunner(_KernelRunner):
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

    target = name = "gpu"

    def __init__(self, emulate: bool = False):
        super().__init__()
        self.emulate = emulate
        if emulate:
            return
        from vdla.compiler.gpu.kernel import gpu_unavailable_reason
        reason = gpu_unavailable_reason()
        if reason is not None:
            raise ProgramError(f"the gpu target cannot run here: {reason}")

    def _load(self, spec):
        if self.emulate:
            from vdla.compiler.gpu.host_emulation import EmulatedKernel, EmulationError
            try:
                return EmulatedKernel(spec.op, spec.mode, spec.schedule)
            except EmulationError as error:
                raise ProgramError(f"gpu program: cannot emulate it here: "
                                   f"{str(error).splitlines()[0]}") from None
        from vdla.compiler.gpu.kernel import GpuKernel
        return GpuKernel(spec.op, spec.mode, spec.schedule)

    def _run(self, kernel, data: np.ndarray) -> np.ndarray:
        return kernel.run(data)

    def _details(self, kernel) -> dict[str, Any]:
        launch = {"grid": list(kernel.tiling.grid), "threads_per_block": kernel.tiling.threads}
        if self.emulate:
            return {"device": "host emulation (compiler.gpu.host_emulation)", **launch}
        import cupy
        return {"device": cupy.cuda.runtime.getDeviceProperties(
            cupy.cuda.Device().id)["name"].decode(), **launch}


_HOST_RUNNERS = {"cpu": CpuRunner, "gpu": GpuRunner}
