"""Code generation: the DRAM plan and the final `runtime.program.Program`.

DRAM image, every region aligned to ``config.dram_alignment``::

    insn_offset   instructions (INSN_BYTES each)
    uop_offset    micro-op kernels (UOP_BYTES each)
    data, weight, [bias], [residual, identity], out   packed tensors (runtime.layout;
                the identity a constant region, `runtime.layout.constant`)

LOAD/STORE instructions were built with ``dram_base`` relative to their
tensor; here the tensor's base in elements of the instruction's memory type
(``dram_offset // element_bytes``) is added. Every instruction is encoded once
to prove each field fits before the program is handed out.

`relocate` moves a finished program's regions to other offsets of a larger
image (a network's arena, `graph.arena`) the same way: each LOAD/STORE gets
its region's displacement added. A `Program` keeps no ``Insn.tensor``, but its
verified plan names the one region each access lies in
(`runtime.verify.verify_plan`), which is the same fact.
"""

from __future__ import annotations

import dataclasses

from vdla.compiler.accel import ir
from vdla.compiler.errors import CompileError
from vdla.hw import isa
from vdla.ints import round_up
from vdla.runtime.layout import packed_nbytes
from vdla.runtime.program import Program, TensorRegion

__all__ = ["generate", "plan_dram", "relocate"]


def plan_dram(function: ir.Function) -> tuple[int, int, list[TensorRegion], int]:
    """``(insn_offset, uop_offset, tensors, dram_bytes)`` for a lowered function."""
    config = function.config
    geometry = function.plan.geometry
    alignment = config.dram_alignment
    insn_offset = 0
    uop_offset = round_up(insn_offset + len(function.instructions) * isa.INSN_BYTES, alignment)
    offset = round_up(uop_offset + max(1, len(function.uop_words)) * isa.UOP_BYTES, alignment)
    tensors = []
    residual = geometry.epilogue.residual_shift is not None
    names = (["data", "weight"] + (["bias"] if geometry.epilogue.bias else [])
             + (["residual", "identity"] if residual else []) + ["out"])
    roles = {"out": "output", "identity": "constant"}
    for name in names:
        role = roles.get(name, "input")
        layout, shape = geometry.layouts[name], geometry.shapes[name]
        tensors.append(TensorRegion(name, role, layout, tuple(shape), offset))
        offset = round_up(offset + packed_nbytes(layout, shape, config), alignment)
    return insn_offset, uop_offset, tensors, offset


def _check_fields(instruction: isa.Instruction, fields: list[isa.Field]) -> None:
    """Raise `isa.IsaError` unless every field value fits (what `isa.encode` checks)."""
    context = type(instruction).__name__
    for field in fields:
        if field.name != "opcode":
            field.check(int(getattr(instruction, field.name)), context)


def _rebase(instruction: isa.Instruction, displacement: int, config) -> isa.Instruction:
    """A LOAD/STORE moved by ``displacement`` bytes (whole elements of its memory type)."""
    element = config.element_bytes(instruction.memory_type.kind)
    assert displacement % element == 0, "regions are aligned to every element size"
    return instruction.replace(dram_base=instruction.dram_base + displacement // element)


def relocate(program: Program, insn_offset: int, uop_offset: int, offsets: dict[str, int],
             dram_bytes: int) -> Program:
    """``program`` with its regions moved into an image of ``dram_bytes`` bytes.

    Parameters
    ----------
    program : Program
        A verified program (`runtime.verify.verify_plan`).
    insn_offset, uop_offset : int
        Where its instructions and micro-ops go.
    offsets : dict of str to int
        Where each of its tensors goes, by name (aligned to ``dram_alignment``).
    dram_bytes : int
        The size of the whole image.

    Raises
    ------
    CompileError
        If a tensor has no offset or a moved address does not fit the ISA.
    """
    from vdla.runtime.verify import verify_plan
    config = program.config
    reached = verify_plan(program, shared=True)
    missing = [t.name for t in program.tensors if t.name not in offsets]
    if missing:
        raise CompileError(f"relocate: no offset for tensor {missing[0]!r}")
    old = {t.name: t.dram_offset for t in program.tensors}
    old["micro-ops"], offsets = program.uop_offset, {**offsets, "micro-ops": uop_offset}
    formats = isa.formats(config)
    instructions = list(program.instructions)
    for index, region in reached.items():
        instructions[index] = _rebase(instructions[index], offsets[region] - old[region], config)
        try:
            _check_fields(instructions[index], formats[instructions[index].opcode])
        except isa.IsaError as error:
            raise CompileError(f"relocate: instruction {index} does not fit the ISA at its "
                               f"new address: {error}") from None
    tensors = [dataclasses.replace(t, dram_offset=offsets[t.name]) for t in program.tensors]
    return dataclasses.replace(program, instructions=instructions, tensors=tensors,
                               insn_offset=insn_offset, uop_offset=uop_offset,
                               dram_bytes=dram_bytes)


def generate(function: ir.Function, metadata: dict | None = None) -> Program:
    """Resolve DRAM addresses and build the `Program`.

    Raises
    ------
    CompileError
        If an address or field does not fit the ISA.
    """
    config = function.config
    insn_offset, uop_offset, tensors, dram_bytes = plan_dram(function)
    bases = {t.name: t.dram_offset for t in tensors}
    bases["uops"] = uop_offset
    instructions = []
    formats = isa.formats(config)
    for index, insn in enumerate(function.instructions):
        instruction = insn.instruction
        if insn.tensor is not None:
            instruction = _rebase(instruction, bases[insn.tensor], config)
        try:
            _check_fields(instruction, formats[instruction.opcode])
        except isa.IsaError as error:
            raise CompileError(f"instruction {index} ({insn.note or instruction.opcode.name}) "
                               f"does not fit the ISA: {error}") from None
        instructions.append(instruction)
    dst, src, wgt = isa.decode_uops(function.uop_words, config)
    uops = [isa.Uop(int(d), int(s), int(w)) for d, s, w in zip(dst, src, wgt)]
    return Program(config=config, instructions=instructions, uops=uops, tensors=tensors,
                   insn_offset=insn_offset, uop_offset=uop_offset, dram_bytes=dram_bytes,
                   metadata=dict(metadata or {}))
