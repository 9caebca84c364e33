"""Run a compiled accelerator program on a simulation backend, as a host driver would.

`AccelRunner` checks the user's tensors against the program's DRAM plan,
verifies the program (`runtime.verify`), builds the DRAM image
(instructions, micro-ops, packed inputs), hands it to a backend from the
`sim.backends` registry and unpacks the outputs back to logical arrays. A
backend that does not declare ``checks_programs = True`` (applying
`sim.checker` itself, as fsim and rtl do) gets the image only after
`sim.checker.check_program` accepted it, so no tier runs a program the
verifier rejects.

The host targets' programs (``cpu``: generated C; ``gpu``: generated CUDA C)
run under the same inputs/outputs contract (`check_inputs`, `ProgramResult`)
on the runners of the layer above, `compiler.cpu.runner.CpuRunner` and
`compiler.gpu.runner.GpuRunner`, which regenerate their code from the program's op;
`compiler.runners.make_runner` picks a target's runner. Each runner refuses
the others' programs (`refuse_target`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from vdla.hw.config import HwConfig
from vdla.runtime.layout import LayoutError, pack, packed_nbytes, unpack
from vdla.runtime.errors import InputError, ProgramError
from vdla.runtime.program import Program
from vdla.runtime.verify import dram_image, verify_plan
from vdla.sim.backends import get_backend
from vdla.sim.checker import check_program

__all__ = ["AccelRunner", "ProgramResult", "InputError", "ProgramError", "describe_array",
           "check_inputs", "refuse_target"]


@dataclasses.dataclass
class ProgramResult:
    """The outcome of running one program (`AccelRunner.run`, a host runner's ``run``).

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
        What ran it: the backend's name (``"fsim"``, ``"rtl"``, ...) or the
        host target's (``"cpu"``, ``"gpu"``).
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


def check_inputs(program: Program, inputs: dict[str, np.ndarray]) -> None:
    """Raise `InputError` unless ``inputs`` are exactly the program's (names, dtypes, shapes)."""
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


def refuse_target(program: Program, target: str, here: str) -> None:
    """Raise `ProgramError` unless ``program`` was compiled for ``target``.

    ``here`` names what was asked to run it (``"the cpu target"``), and the
    message says where the program runs instead.
    """
    if program.target == target:
        return
    if program.target != "accel":
        raise ProgramError(f"program compiled for target {program.target!r} cannot run on "
                           f"{here}; run it with --target {program.target}")
    raise ProgramError(f"program compiled for the accelerator (target {program.target!r}) "
                       f"cannot run on {here}; run it on a simulator (--sim fsim or rtl)")


class AccelRunner:
    """Runs accelerator programs on one accelerator instance, simulated by a backend (or a board).

    Parameters
    ----------
    config : HwConfig
        The accelerator; programs must have been compiled for the same hardware.
    sim : str, optional
        A registered backend name (`sim.backends.backend_names`), ``"fsim"`` by default.
    **backend_options
        Passed to the backend's factory (e.g. ``trace=`` or ``cycle_limit=`` for
        timed backends; ``activity=True`` makes ``rtl`` record each module's
        activity into ``ProgramResult.details["activity"]``, the input of
        `bench.plots.timeline`).
    """

    target = "accel"

    def __init__(self, config: HwConfig, sim: str = "fsim", **backend_options):
        if not isinstance(config, HwConfig):
            raise ValueError(f"AccelRunner: the accelerator target needs a config (an HwConfig), "
                             f"got {type(config).__name__}")
        self.config, self.sim = config, sim
        self.backend = get_backend(sim, config, **backend_options)

    def check_target(self, program: Program) -> None:
        """Raise `ProgramError` unless ``program`` was compiled for the accelerator."""
        refuse_target(program, self.target, f"the accelerator's {self.sim} simulator")

    def build_image(self, program: Program, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """The DRAM image the host would write: instructions, micro-ops and packed inputs."""
        self.check_target(program)
        if not self.config.same_hardware(program.config):
            raise ProgramError(
                f"program compiled for hardware {program.config.name!r} (config hash "
                f"{program.config.hash}) cannot run on {self.config.name!r} (config hash "
                f"{self.config.hash})")
        check_inputs(program, inputs)
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

    def run_image(self, dram: np.ndarray, insn_offset: int, insn_count: int):
        """Run the program already in ``dram`` (modified in place), checked by
        `sim.checker` first where the backend does not check programs itself; the
        backend's `sim.backend.RunResult`."""
        if not getattr(self.backend, "checks_programs", False):
            check_program(self.config, dram, insn_offset, insn_count)
        return self.backend.run(dram, insn_offset, insn_count)

    def run(self, program: Program, inputs: dict[str, np.ndarray]) -> ProgramResult:
        """Run ``program`` on ``inputs`` and return its outputs and counters.

        Raises
        ------
        InputError
            Missing, unknown, mistyped or misshapen inputs.
        ProgramError
            A program for other hardware or another target, or with a DRAM plan
            that `runtime.verify.verify_plan` rejects.
        sim.errors.SimulationError
            A program that breaks a rule of `sim.checker` (deadlock, race, ...),
            found before any backend runs it; or a failure of the run itself
            (a timed backend's cycle limit).
        """
        dram = self.build_image(program, inputs)
        result = self.run_image(dram, program.insn_offset, len(program.instructions))
        outputs = {}
        for region in program.outputs:
            nbytes = packed_nbytes(region.layout, region.shape, self.config)  # verified to fit
            flat = dram[region.dram_offset:region.dram_offset + nbytes]
            outputs[region.name] = unpack(region.layout, flat, region.shape, self.config)
        return ProgramResult(outputs=outputs, cycles=result.cycles,
                             counters=dict(result.counters), details=dict(result.details),
                             sim=self.sim, instructions=len(program.instructions))
