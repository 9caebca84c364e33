"""Human-readable text of an instruction stream (golden snapshots, the CLI)."""

from __future__ import annotations

import dataclasses

from vdla.hw import isa
from vdla.runtime.program import Program

__all__ = ["format_instruction", "dump_program", "summarize"]


def format_instruction(instruction: isa.Instruction) -> str:
    """One line: opcode, the fields that differ from their defaults, the token flags."""
    parts = [instruction.opcode.name]
    if isinstance(instruction, (isa.Load, isa.Store)):
        parts.append(instruction.memory_type.name)
    elif isinstance(instruction, isa.Alu):
        parts.append(instruction.alu_op.name)
    for field in dataclasses.fields(instruction):
        if field.name in isa.DEPENDENCY_FLAGS or field.name in ("memory_type", "alu_op"):
            continue
        value = getattr(instruction, field.name)
        if value != field.default or field.name in ("uop_begin", "uop_end"):
            parts.append(f"{field.name}={int(value)}")
    flags = instruction.flags
    return " ".join(parts) + (f"  [{flags}]" if flags else "")


def dump_program(program: Program) -> str:
    """The whole stream, numbered, followed by the micro-ops and the DRAM plan."""
    lines = [f"# {program.metadata.get('op_description', 'program')}",
             f"# config {program.config.name} ({program.config.batch}x{program.config.block_in}"
             f"x{program.config.block_out})"]
    lines += [f"{i:5d} {format_instruction(insn)}" for i, insn in enumerate(program.instructions)]
    lines.append(f"# {len(program.uops)} uops")
    lines += [f"uop {i:5d} dst={u.dst} src={u.src} wgt={u.wgt}" for i, u in enumerate(program.uops)]
    lines.append(f"# dram insn@{program.insn_offset} uop@{program.uop_offset} "
                 + " ".join(f"{t.name}@{t.dram_offset}" for t in program.tensors)
                 + f" total={program.dram_bytes}")
    return "\n".join(lines) + "\n"


def summarize(program: Program) -> dict:
    """Counts a user wants after compiling: instructions per module, uops, DRAM image bytes."""
    per_module = {name: 0 for name in isa.MODULES}
    per_opcode: dict[str, int] = {}
    for instruction in program.instructions:
        per_module[isa.MODULES[isa.module_of(instruction)]] += 1
        name = instruction.opcode.name
        if isinstance(instruction, isa.Load):
            name += f" {instruction.memory_type.name}"
        per_opcode[name] = per_opcode.get(name, 0) + 1
    return {"instructions": len(program.instructions), "per_module": per_module,
            "per_opcode": per_opcode, "uops": len(program.uops),
            "dram_image_bytes": program.dram_bytes}
