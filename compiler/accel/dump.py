"""Human-readable text of an instruction stream (golden snapshots, the CLI) and of the IR
between passes (``vdla compile --dump-after``)."""

from __future__ import annotations

import dataclasses

from vdla.compiler.accel import ir
from vdla.hw import isa
from vdla.runtime.program import Program

__all__ = ["format_instruction", "dump_program", "dump_function", "summarize"]


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


def dump_function(function: ir.Function, after: str = "") -> str:
    """The IR of a function: its buffers, then every stage's statements in program
    order or, once the latency-hiding pass has flattened them, the instruction stream.

    ``after`` names the pass that produced it, for the header.
    """
    lines = [f"# {function.name}" + (f" after {after}" if after else "")]
    lines += [f"buffer {buffer!r}" for buffer in function.buffers]
    if function.instructions:
        lines.append(f"# {len(function.instructions)} instructions")
        lines += [f"{i:5d} {_insn(insn)}" for i, insn in enumerate(function.instructions)]
    else:
        for stage in function.all_stages():
            role = f" {stage.role}" if stage.role else ""
            chunk = f" chunk={stage.chunk}" if stage.chunk is not None else ""
            lines.append(f"stage {stage.kind}{role} tile={stage.tile} thread={stage.thread}"
                         f"{chunk}")
            lines += _statements(stage.body, "  ")
    return "\n".join(lines) + "\n"


def _statements(body, indent: str) -> list[str]:
    lines = []
    for stmt in body:
        if isinstance(stmt, ir.Loop):
            lines.append(f"{indent}for {stmt.var} in range({stmt.extent}):")
            lines += _statements(stmt.body, indent + "  ")
        else:
            lines.append(indent + _statement(stmt))
    return lines


def _access(access: ir.Access | None) -> str:
    if access is None:
        return "-"
    lanes = f"{{{','.join(access.lanes)}}}" if access.lanes else ""
    return f"{access.buffer.name}[{access.index!r}]{lanes}"


def _statement(stmt) -> str:
    """One line for a leaf statement of `ir` (every kind but `ir.Loop`)."""
    if isinstance(stmt, ir.Copy):
        strides = f" strides={stmt.strides}" if stmt.strides is not None else ""
        return (f"copy {stmt.direction} {stmt.tensor} grid={stmt.grid} start={stmt.start} "
                f"extent={stmt.extent}{strides} <-> {stmt.buffer!r}+{stmt.offset}")
    if isinstance(stmt, ir.Mac):
        return f"mac {_access(stmt.acc)} += {_access(stmt.inp)} * {_access(stmt.wgt)}"
    if isinstance(stmt, ir.Gemm):
        if stmt.reset:
            return f"gemm {_access(stmt.dst)} = 0"
        assign = "=" if stmt.overwrite else "+="
        return f"gemm {_access(stmt.dst)} {assign} {_access(stmt.src)} @ {_access(stmt.wgt)}"
    if isinstance(stmt, ir.Alu):
        operand = _access(stmt.src) if stmt.src is not None else f"imm={stmt.imm}"
        return f"alu {stmt.op.name} {_access(stmt.dst)}, {operand}" + \
            (" (reset)" if stmt.reset else "")
    if isinstance(stmt, ir.Epilogue):
        return (f"epilogue {stmt.acc!r} batch_blocks={stmt.batch_blocks} "
                f"channel_blocks={stmt.channel_blocks} positions={stmt.positions} "
                f"first_channel_block={stmt.first_channel_block}")
    if isinstance(stmt, ir.Insn):
        return _insn(stmt)
    raise TypeError(f"dump_function: no text for a {type(stmt).__name__} statement")


def _insn(insn: ir.Insn) -> str:
    text = format_instruction(insn.instruction)
    if insn.tensor is not None:
        text += f"  tensor={insn.tensor}"
    if insn.kernel is not None:
        text += f"  kernel={len(insn.kernel[0])} uops"
    return text + (f"  # {insn.note}" if insn.note else "")
