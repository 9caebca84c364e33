"""The vector ALU's datapath: one accumulator element per cycle.

`VectorAlu` is combinational: ``result[e] = op(a[e], b[e])`` for every int32
scalar ``e`` of an acc element (``batch x block_out``), with ``op`` one of
`hw.isa.AluOp`: MIN and MAX (signed), ADD and MUL (low 32 bits, wrapping),
SHR (arithmetic) and SHL by ``b[e] & 31``, and REQUANT, the fused epilogue
``clip((a[e] + b[e]) >> (imm & 31), lo, 127)`` (the add wraps in int32, the
shift is arithmetic, ``lo`` is 0 when ``imm & 32`` -- relu -- else -128;
higher ``imm`` bits are ignored). An unknown op passes ``a`` through (the
decoder of the functional simulator rejects it). The compute module
(`hw.compute`) feeds ``a = acc[dst]`` and ``b = acc[src]``, the sign-extended
immediate, or 0 (REQUANT with ``use_imm``), and the instruction's raw ``imm``,
all from pipeline registers, so the ALU is one pipeline stage and takes one
micro-op per cycle.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.config import HwConfig
from vdla.hw.isa import IMM_BITS, REQUANT_RELU, SHIFT_BITS, AluOp

__all__ = ["VectorAlu"]

SHIFT_MASK_BITS = SHIFT_BITS                 # shifts use the operand's low bits
RELU_BIT = REQUANT_RELU.bit_length() - 1     # REQUANT: this imm bit set -> clip at 0, not -128
OUT_MIN, OUT_MAX = -128, 127


class VectorAlu(wiring.Component):
    """Elementwise int32 ALU over one acc element.

    Ports
    -----
    op : In(3)
        An `AluOp` value.
    a, b : In(acc element bits)
    imm : In(IMM_BITS)
        The instruction's immediate; only REQUANT reads it (shift and relu bits).
    result : Out(acc element bits)
    """

    def __init__(self, config: HwConfig):
        self.config = config
        width = config.element_bytes("acc") * 8
        super().__init__({
            "op": In(max(op.value for op in AluOp).bit_length()),
            "a": In(width),
            "b": In(width),
            "imm": In(IMM_BITS),
            "result": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        bits = self.config.element_bits("acc")
        requant_shift = self.imm[:SHIFT_MASK_BITS]
        requant_low = Signal(range(OUT_MIN, 1))
        m.d.comb += requant_low.eq(Mux(self.imm[RELU_BIT], 0, OUT_MIN))
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
                with m.Case(AluOp.REQUANT):
                    total = (a.as_unsigned() + b.as_unsigned())[:bits].as_signed()
                    shifted = Signal(range(-2**(bits - 1), 2**(bits - 1)), name=f"requant_{e}")
                    m.d.comb += shifted.eq(total >> requant_shift)
                    m.d.comb += out.eq(Mux(shifted > OUT_MAX, OUT_MAX,
                                           Mux(shifted < requant_low, requant_low, shifted)))
                with m.Default():
                    m.d.comb += out.eq(a)
            m.d.comb += self.result.word_select(e, bits).eq(out)
        return m
