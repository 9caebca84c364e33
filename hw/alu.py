"""The vector ALU's datapath: one accumulator element per cycle.

`VectorAlu` is combinational: ``result[e] = op(a[e], b[e])`` for every int32
scalar ``e`` of an acc element (``batch x block_out``), with ``op`` one of
`hw.isa.AluOp`: MIN and MAX (signed), ADD and MUL (low 32 bits, wrapping),
SHR (arithmetic) and SHL by ``b[e] & 31``. An unknown op passes ``a``
through (the decoder of the functional simulator rejects it). The compute
module (`hw.compute`) feeds ``a = acc[dst]`` and ``b = acc[src]`` or the
sign-extended immediate from pipeline registers, so the ALU is one pipeline
stage and takes one micro-op per cycle.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import HwConfig
from hw.isa import AluOp

__all__ = ["VectorAlu"]

SHIFT_MASK_BITS = 5   # shifts use the operand's low 5 bits


class VectorAlu(wiring.Component):
    """Elementwise int32 ALU over one acc element.

    Ports
    -----
    op : In(3)
        An `AluOp` value.
    a, b : In(acc element bits)
    result : Out(acc element bits)
    """

    def __init__(self, config: HwConfig):
        self.config = config
        width = config.element_bytes("acc") * 8
        super().__init__({
            "op": In(max(op.value for op in AluOp).bit_length()),
            "a": In(width),
            "b": In(width),
            "result": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        bits = self.config.element_bits("acc")
        for e in range(self.config.batch * self.config.block_out):
            a = self.a.word_select(e, bits).as_signed()
            b = self.b.word_select(e, bits).as_signed()
            shift = b.as_unsigned()[:SHIFT_MASK_BITS]
            out = Signal(bits, name=f"alu_{e}")
            with m.Switch(self.op):
                with m.Case(AluOp.MIN):
                    m.d.comb += out.eq(Mux(a < b, a, b))
                with m.Case(AluOp.MAX):
                    m.d.comb += out.eq(Mux(a > b, a, b))
                # ADD, SHL and MUL keep the low 32 bits: unsigned arithmetic gives
                # the same bits as signed and simulates faster.
                with m.Case(AluOp.ADD):
                    m.d.comb += out.eq((a.as_unsigned() + b.as_unsigned())[:bits])
                with m.Case(AluOp.SHR):
                    m.d.comb += out.eq(a >> shift)
                with m.Case(AluOp.SHL):
                    m.d.comb += out.eq((a.as_unsigned() << shift)[:bits])
                with m.Case(AluOp.MUL):
                    m.d.comb += out.eq((a.as_unsigned() * b.as_unsigned())[:bits])
                with m.Default():
                    m.d.comb += out.eq(a)
            m.d.comb += self.result.word_select(e, bits).eq(out)
        return m
