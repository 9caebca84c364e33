"""Epilogue lowering: bias add, shift and clip as ALU loop nests.

Per accumulator tile::

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
"""

from __future__ import annotations

from compiler import ir
from compiler.ir import Access, Affine
from hw.isa import AluOp

__all__ = ["lower_epilogues"]

# The ALU's shift uses the operand's low 5 bits.
MAX_SHIFT = 31


def lower_epilogues(function: ir.Function) -> ir.Function:
    """Replace every `ir.Epilogue` by its bias copy and ALU nests (in place)."""
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
            new = _expand(stmt, spec, bias, blocks["k"])
            alu_nests += sum(isinstance(leaf, ir.Alu) for leaf in
                             (ir.loop_nest(s)[1] for s in new if not isinstance(s, ir.Copy)))
            body.extend(new)
        stage.body = body
    function.stats["epilogue"] = {"alu_nests": alu_nests}
    return function


def _expand(epilogue: ir.Epilogue, spec, bias: ir.Buffer | None, channel_blocks: int) -> list:
    loops = [("b", epilogue.batch_blocks), ("k", epilogue.channel_blocks),
             ("p", epilogue.positions)]
    b, k, p = (Affine.var(v) for v in ("b", "k", "p"))
    dst = Access(epilogue.acc, (b * epilogue.channel_blocks + k) * epilogue.positions + p)
    statements = []
    if spec.bias:
        # A region as large as the layer's bias keeps every block at its own place.
        offset = epilogue.first_channel_block if bias.entries == channel_blocks else 0
        statements.append(ir.Copy("load", "bias", (channel_blocks,),
                                  (epilogue.first_channel_block,), (epilogue.channel_blocks,),
                                  "acc", bias, offset))
        statements.append(ir.nest(loops, ir.Alu(AluOp.ADD, dst, Access(bias, k + offset))))
    if spec.shift:
        statements.append(ir.nest(loops, ir.Alu(AluOp.SHR, dst, imm=min(spec.shift, MAX_SHIFT))))
    statements.append(ir.nest(loops, ir.Alu(AluOp.MIN, dst, imm=127)))
    statements.append(ir.nest(loops, ir.Alu(AluOp.MAX, dst, imm=0 if spec.relu else -128)))
    return statements
