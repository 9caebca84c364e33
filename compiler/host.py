"""Host-target programs (``cpu``, ``gpu``): what their file holds, and the check that reads it.

A host program is data, never code. Its file holds the layer
(``metadata["op"]``) and, under ``metadata[target]``, the arithmetic mode,
the schedule and what the compiling machine recorded (cpu: ``isa`` and
``flags``; gpu: ptxas's report). Its runner (`compiler.host_runner.HostRunner`)
regenerates the C or CUDA C from (op, mode, schedule) with the target's
deterministic code generator and builds that. A ``source`` field, as files
kept before vdla stopped storing code, is only compared with the regenerated code (a
difference is refused) and never compiled.

`host_spec` checks every header field against the op before anything is
built, as `runtime.verify` does for accelerator programs: the op is well
formed, the mode is the target's, the schedule passes its own checks and
generates, the tensors are exactly those the op and mode imply (names,
roles, host layouts, shapes: `runtime.program.host_tensors`) and none
larger than the accelerator's DRAM image may be (`runtime.verify.MAX_DRAM_BYTES`),
the descriptions and records are what they claim, and there are no
instructions, DRAM plan or unknown fields. A violation is one `ProgramError`
naming the field, so an edited shape, mode or schedule can never reach a
kernel as memory it would read or write out of bounds.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from vdla.compiler.errors import CompileError
from vdla.compiler.host_target import HostTarget, host_targets
from vdla.compiler.ops import op_from_dict
from vdla.runtime.errors import ProgramError
from vdla.runtime.program import PROGRAM_TARGETS, Program, host_tensors
from vdla.runtime.program_file import register_header_check
from vdla.runtime.verify import MAX_DRAM_BYTES

__all__ = ["HostTarget", "HostSpec", "host_spec", "host_targets"]

# Fields of a host program's metadata besides its target's own entry.
_LAYER_FIELDS = ("layer", "op", "op_description")


@dataclasses.dataclass(frozen=True)
class HostSpec:
    """A checked host program: what its kernel is built from (`host_spec`).

    ``source`` is the code regenerated from ``op``, ``mode`` and ``schedule``;
    ``key`` identifies the kernel (equal keys, equal code).
    """

    target: HostTarget
    op: Any
    mode: str
    schedule: Any
    source: str

    @property
    def key(self) -> tuple:
        return (self.target.name, self.op, self.mode, self.schedule)


def _fields(where: str, what: str, data: dict, required, optional=()) -> None:
    missing = [name for name in required if name not in data]
    if missing:
        raise ProgramError(f"{where}: {what} has no {', '.join(map(repr, missing))}")
    unknown = sorted(set(data) - set(required) - set(optional))
    if unknown:
        raise ProgramError(f"{where}: unknown {what} field(s) "
                           f"{', '.join(repr(name)[:40] for name in unknown)}")


def _check_tensors(where: str, program: Program, op, mode: str, expected: list) -> None:
    names = [getattr(t, "name", None) for t in program.tensors]
    wanted = [t.name for t in expected]
    layer = f"{op.describe()} ({mode})"
    if names != wanted:
        raise ProgramError(f"{where}: its tensors are {', '.join(repr(n)[:40] for n in names)}"
                           f"{'' if names else 'none'}, but {layer} takes "
                           f"{', '.join(map(repr, wanted))}")
    for got, want in zip(program.tensors, expected):
        for field in ("role", "layout", "shape", "dram_offset"):
            value = getattr(got, field)
            if field == "shape" and isinstance(value, list):
                value = tuple(value)
            if value != getattr(want, field) or type(value) is not type(getattr(want, field)):
                raise ProgramError(f"{where}: tensor {got.name!r} has {field} {value!r:.60}, "
                                   f"but {layer} gives it {field} {getattr(want, field)!r}")


def host_spec(program: Program) -> HostSpec:
    """Check a cpu or gpu program's header against its op; what its kernel is built from.

    Raises
    ------
    ProgramError
        Naming the first field that is missing, unknown, malformed or does
        not match the op (module docstring).
    """
    target = host_targets().get(program.target)
    if target is None:
        raise ProgramError(f"program target {program.target!r:.40} is not a host target "
                           f"(known: {', '.join(host_targets())})")
    where = f"{target.name} program"
    plan = {"instructions": len(program.instructions), "micro-ops": len(program.uops),
            "insn_offset": program.insn_offset, "uop_offset": program.uop_offset,
            "dram_bytes": program.dram_bytes}
    if any(value != 0 for value in plan.values()):
        raise ProgramError(f"{where}: a host program has no instructions and no DRAM plan, "
                           "but this one has " + ", ".join(f"{name} {value!r:.20}" for name, value
                                                           in plan.items() if value != 0))
    metadata = program.metadata
    if not isinstance(metadata, dict):
        raise ProgramError(f"{where}: metadata must be a JSON object, got "
                           f"{type(metadata).__name__}")
    _fields(where, "metadata", metadata, (*_LAYER_FIELDS, target.name))
    try:
        op = op_from_dict(metadata["op"])
    except CompileError as error:
        raise ProgramError(f"{where}: op: {error}") from None
    info = metadata[target.name]
    if not isinstance(info, dict):
        raise ProgramError(f"{where}: metadata[{target.name!r}] must be a JSON object, got "
                           f"{type(info).__name__}")
    _fields(where, f"metadata[{target.name!r}]", info, ("mode", "schedule", *target.records),
            ("source",))
    mode = info["mode"]
    if not isinstance(mode, str) or mode not in target.modes:
        raise ProgramError(f"{where}: mode {mode!r:.40} is not one of {', '.join(target.modes)}")
    try:
        schedule = target.schedule_type.from_dict(info["schedule"])
    except CompileError as error:
        raise ProgramError(f"{where}: schedule: {error}") from None
    tensors = host_tensors(op, target.dtypes_of(mode))
    _check_tensors(where, program, op, mode, tensors)
    for tensor in tensors:  # as the accelerator's DRAM image is bounded (runtime.verify)
        nbytes = math.prod(tensor.shape) * tensor.dtype.itemsize
        if nbytes > MAX_DRAM_BYTES:
            raise ProgramError(f"{where}: tensor {tensor.name!r} of shape {tensor.shape} takes "
                               f"{nbytes} bytes, more than vdla's {MAX_DRAM_BYTES}-byte limit")
    for field in ("layer", "op_description"):
        if metadata[field] != op.describe():
            raise ProgramError(f"{where}: {field} {metadata[field]!r:.80} does not describe its "
                               f"op ({op.describe()})")
    for field, (valid, kind) in target.records.items():
        if not valid(info[field]):
            raise ProgramError(f"{where}: {field} must be {kind}, got {info[field]!r:.60}")
    try:
        source = target.generate(op, mode, schedule)
    except CompileError as error:
        raise ProgramError(f"{where}: cannot generate its {target.code}: {error}") from None
    if "source" in info and info["source"] != source:
        raise ProgramError(f"{where}: its stored {target.code} is not the {target.code} vdla "
                           "generates for its op, mode and schedule (edited, or written by "
                           "another vdla version); it is never compiled: recompile the program")
    return HostSpec(target, op, mode, schedule, source)


# Program files of the host targets are verified on load with this check
# (`runtime.program_file.verify_program_header`: the runtime cannot regenerate code).
for _target in PROGRAM_TARGETS:
    if _target != "accel":
        register_header_check(_target, host_spec)
