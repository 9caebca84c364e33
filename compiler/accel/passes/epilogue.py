"""Epilogue lowering: bias add, shift and clip as ALU loop nests.

Per accumulator tile, by default one fused pass::

    LOAD acc  bias[k0 : k0 + nk] -> reserved bias region     (compute module)
    ALU REQUANT acc[tile] = clip((acc + bias[k]) >> shift, lo, 127)
                (src = the bias entry of the channel block, or use_imm without
                 bias; imm = shift | 32 * relu, lo = 0 with relu else -128;
                 REQUANT_EVEN with rounding half_even: ties to even)

or, with ``fused=False`` (hardware without REQUANT), four passes::

    LOAD acc  bias[k0 : k0 + nk] -> reserved bias region     (compute module)
    ALU ADD   acc[tile] += bias[k]       (src = the bias entry of the channel block)
    ALU SHR   acc[tile] >>= shift        (immediate; the ALU uses 5 shift bits, and
                                          >> 31 equals any larger shift on int32)
    ALU MIN   acc[tile] = min(acc, 127)
    ALU MAX   acc[tile] = max(acc, -128)   or max(acc, 0) with relu

Every ALU write also writes the low 8 bits to the out buffer, so after the last
op the out buffer holds the int8 result the store copies to DRAM. The bias
region either holds the whole bias (its copies are then elided after the
first) or only the tile's channel blocks.

A fixed-point epilogue (``Epilogue.multiplier``) is the ALU sequence of
`compiler.requant`: ADD the bias, SHR the pre-shift, MIN/MAX clamp, MUL,
SHR and ADD 1 for rounding, REQUANT by 1 (or SHR/MIN/MAX unfused). With
per-channel multipliers the bias region holds the multipliers' blocks after
the biases' (both copied per tile, or once when resident) and MUL reads them.
"""

from __future__ import annotations

from vdla.compiler.accel import ir
from vdla.compiler.accel.ir import Access, Affine
from vdla.compiler.requant import CLAMP
from vdla.compiler.errors import ShapeError
from vdla.hw.isa import SHIFT_BITS, AluOp, requant_imm, requant_op

__all__ = ["lower_epilogues"]

# The ALU shifts by the operand's low bits only; shifting an int32 further than
# this gives the same result (0 or -1), so larger shifts are clamped to it.
MAX_SHIFT = (1 << SHIFT_BITS) - 1


def lower_epilogues(function: ir.Function, fused: bool = True) -> ir.Function:
    """Replace every `ir.Epilogue` by its bias copy and ALU nests (in place).

    ``fused`` uses the one-pass ALU REQUANT; False the four-pass ADD/SHR/MIN/MAX.
    """
    spec = function.plan.geometry.epilogue
    blocks = function.plan.blocks
    bias = function.buffer("bias") if spec.bias else None
    alu_nests = 0
    for stage in function.all_stages():
        body = []
        for stmt in stage.body:
            if not isinstance(stmt, ir.Epilogue):
                body.append(stmt)
                continue
            new = _expand(stmt, spec, bias, blocks["k"], fused)
            alu_nests += sum(isinstance(leaf, ir.Alu) for leaf in
                             (ir.loop_nest(s)[1] for s in new if not isinstance(s, ir.Copy)))
            body.extend(new)
        stage.body = body
    function.stats["epilogue"] = {"alu_nests": alu_nests, "fused": fused}
    return function


def _expand(epilogue: ir.Epilogue, spec, bias: ir.Buffer | None, channel_blocks: int,
            fused: bool) -> list:
    loops = [("b", epilogue.batch_blocks), ("k", epilogue.channel_blocks),
             ("p", epilogue.positions)]
    b, k, p = (Affine.var(v) for v in ("b", "k", "p"))
    dst = Access(epilogue.acc, (b * epilogue.channel_blocks + k) * epilogue.positions + p)
    statements = []
    if spec.bias:
        # A region as large as the layer's bias keeps every block at its own place; per-channel
        # multipliers follow the biases, in the region's second half.
        copies = 2 if spec.per_channel else 1
        half = bias.entries // copies
        offset = epilogue.first_channel_block if half == channel_blocks else 0
        for copy in range(copies):
            statements.append(ir.Copy("load", "bias", (copies * channel_blocks,),
                                      (copy * channel_blocks + epilogue.first_channel_block,),
                                      (epilogue.channel_blocks,), "acc", bias,
                                      copy * half + offset))
    if spec.fixed_point:
        return statements + _fixed_point(loops, dst, spec, bias, offset if spec.bias else 0,
                                         fused)
    if fused:
        imm = requant_imm(min(spec.shift, MAX_SHIFT), spec.relu)
        op = requant_op(spec.rounding)
        if spec.bias:
            statements.append(ir.nest(loops, ir.Alu(op, dst, Access(bias, k + offset), imm=imm)))
        else:
            statements.append(ir.nest(loops, ir.Alu(op, dst, imm=imm)))
        return statements
    if spec.round_even:
        raise ShapeError("rounding half_even needs the fused REQUANT epilogue (REQUANT_EVEN); "
                         "the four ALU passes round half up")
    if spec.bias:
        statements.append(ir.nest(loops, ir.Alu(AluOp.ADD, dst, Access(bias, k + offset))))
    if spec.shift:
        statements.append(ir.nest(loops, ir.Alu(AluOp.SHR, dst, imm=min(spec.shift, MAX_SHIFT))))
    statements.append(ir.nest(loops, ir.Alu(AluOp.MIN, dst, imm=127)))
    statements.append(ir.nest(loops, ir.Alu(AluOp.MAX, dst, imm=0 if spec.relu else -128)))
    return statements


def _fixed_point(loops, dst: Access, spec, bias: ir.Buffer | None, offset: int,
                 fused: bool) -> list:
    """The ALU nests of a fixed-point requantisation (`compiler.requant`, in its order)."""
    k = Affine.var("k")
    steps = [ir.Alu(AluOp.ADD, dst, Access(bias, k + offset))] if spec.bias else []
    if spec.pre_shift:
        steps.append(ir.Alu(AluOp.SHR, dst, imm=spec.pre_shift))
    multiply = (ir.Alu(AluOp.MUL, dst, Access(bias, k + offset + bias.entries // 2))
                if spec.per_channel else ir.Alu(AluOp.MUL, dst, imm=spec.multiplier))
    steps += [ir.Alu(AluOp.MIN, dst, imm=CLAMP), ir.Alu(AluOp.MAX, dst, imm=-CLAMP), multiply]
    shift = spec.shift
    if shift:  # round half up: floor((floor(u / 2**(q-1)) + 1) / 2)
        if shift > 1:
            steps.append(ir.Alu(AluOp.SHR, dst, imm=shift - 1))
        steps.append(ir.Alu(AluOp.ADD, dst, imm=1))
        shift = 1
    if fused:
        steps.append(ir.Alu(AluOp.REQUANT, dst, imm=requant_imm(shift, spec.relu)))
    else:
        steps += ([ir.Alu(AluOp.SHR, dst, imm=shift)] if shift else []) + [
            ir.Alu(AluOp.MIN, dst, imm=127), ir.Alu(AluOp.MAX, dst, imm=0 if spec.relu else -128)]
    return [ir.nest(loops, step) for step in steps]
