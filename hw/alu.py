"""The vector ALU's datapath: one accumulator element per cycle.

`VectorAlu` is combinational: ``result[e] = op(a[e], b[e])`` for every int32
scalar ``e`` of an acc element (``batch x block_out``), with ``op`` one of
`hw.isa.AluOp`: MIN and MAX (signed), ADD and MUL (low 32 bits, wrapping),
SHR (arithmetic) and SHL by ``b[e] & 31``, and REQUANT, the fused epilogue
``clip((a[e] + b[e]) >> (imm & 31), lo, 127)`` (the add wraps in int32, the
shift is arithmetic, ``lo`` is 0 when ``imm & 32`` -- relu -- else -128;
higher ``imm`` bits are ignored), and REQUANT_EVEN, REQUANT whose ties go to
even: where the shift amount ``s`` is not 0 and the ``s`` bits it drops are
all zero, bit 0 of the shifted value is cleared before the clip (a zero test
beside the shifter and one AND gate per lane; the clip bounds are even, so
the comparisons are unchanged). Every op is defined, so none passes ``a``
through. The compute module
(`hw.compute`) feeds ``a = acc[dst]`` and ``b = acc[src]``, the sign-extended
immediate, or 0 (REQUANT with ``use_imm``), and the instruction's raw ``imm``,
all from pipeline registers, so the ALU is one pipeline stage and takes one
micro-op per cycle.

`TwoCycleAlu` (``HwConfig.two_cycle_alu``) is two stages, for a slow FPGA (on iCE40
the one-stage ALU's adder, shifter, comparator and multiplexers take ~60 ns):
the inputs are held for two cycles and ``result`` is valid in the second. The
first cycle registers, per lane, the shifter's operand (``a + b`` for ADD and
REQUANT, ``a`` or ``a`` reversed for the shifts and MIN / MAX) and its amount,
``a < b``, and MUL's three products of 16-bit halves; the second reads those
registers (and ``b`` for MIN / MAX): it adds MUL's products, picks MIN / MAX,
shifts (ADD by 0), and REQUANT compares the registered sum against the clip
bounds shifted left by its amount, beside the shifter instead of after it
(``x >> s > 127`` exactly when ``x >= 128 << s``, ``x >> s < lo`` when ``x <
lo << s``). So no path runs from the operands' forwarding multiplexers through
an adder, comparator or the shifter into the second cycle.
`RegisteredTwoCycleAlu` (``two_cycle_alu`` with ``registered_control``) also
registers those shifted clip bounds and REQUANT_EVEN's mask of dropped bits
(once, for every lane) and the shifter's fill bit in the first cycle, so the
second compares and shifts from registers.

Each variant is a class; `alu_variant` names the one a config asks for.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.config import HwConfig
from vdla.hw.isa import IMM_BITS, REQUANT_OPS, REQUANT_RELU, SHIFT_BITS, AluOp

__all__ = ["VectorAlu", "TwoCycleAlu", "RegisteredTwoCycleAlu", "alu_variant"]

SHIFT_MASK_BITS = SHIFT_BITS                 # shifts use the operand's low bits
RELU_BIT = REQUANT_RELU.bit_length() - 1     # REQUANT: this imm bit set -> clip at 0, not -128
OUT_MIN, OUT_MAX = -128, 127


def alu_variant(config: HwConfig) -> type["VectorAlu"]:
    """The ALU class ``config``'s switches choose (``two_cycle_alu``, ``registered_control``)."""
    if not config.two_cycle_alu:
        return VectorAlu
    return RegisteredTwoCycleAlu if config.registered_control else TwoCycleAlu


class VectorAlu(wiring.Component):
    """Elementwise int32 ALU over one acc element, in one cycle (combinational).

    The base of the variants (`alu_variant`): they share the ports and differ in
    `_lanes`.

    Ports
    -----
    op : In(3)
        An `AluOp` value.
    a, b : In(acc element bits)
    imm : In(IMM_BITS)
        The instruction's immediate; only REQUANT and REQUANT_EVEN read it (shift
        and relu bits).
    result : Out(acc element bits)
    """

    def __init__(self, config: HwConfig):
        if alu_variant(config) is not type(self):
            # The unit pipeline paces the ALU by the config's switches, not by the class.
            raise ValueError(f"{type(self).__name__}: config {config.name} needs "
                             f"{alu_variant(config).__name__} (two_cycle_alu "
                             f"{config.two_cycle_alu}, registered_control "
                             f"{config.registered_control})")
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
        shift_left = self.op == AluOp.SHL
        requant_low = Signal(range(OUT_MIN, 1))
        m.d.comb += requant_low.eq(Mux(self.imm[RELU_BIT], 0, OUT_MIN))
        self._lanes(m, bits, shift_left, requant_low)
        return m

    def _tie_mask(self, m, bits):
        """REQUANT_EVEN's mask of the bits its shift drops, all zero for every other op
        and for a shift of 0 (no tie): a lane ties where its sum has none of them set."""
        mask = Signal(bits, name="tie_mask")
        amount = self.imm[:SHIFT_MASK_BITS]
        m.d.comb += mask.eq(Mux(self.op == AluOp.REQUANT_EVEN,
                                ~(Const((1 << bits) - 1, bits) << amount)[:bits], 0))
        return mask

    @staticmethod
    def _round_even(shifted, operand, mask):
        """``shifted`` with bit 0 cleared where ``operand`` ties (`_tie_mask`)."""
        tie = mask.any() & ~(operand & mask).any()
        return Cat(shifted[0] & ~tie, shifted[1:])

    def _lanes(self, m, bits, shift_left, requant_low):
        """Every lane's datapath, into ``m``."""
        op = self.op
        requant = op.matches(*REQUANT_OPS)
        tie_mask = self._tie_mask(m, bits)
        # Per lane one comparator (MIN, MAX), one adder (ADD, REQUANT) and one
        # right shifter (SHR, REQUANT's shift, and SHL as a logical right
        # shift of the bit-reversed operand), each shared by the ops that need it.
        for e in range(self.config.batch * self.config.block_out):
            a = self.a.word_select(e, bits).as_signed()
            b = self.b.word_select(e, bits).as_signed()
            amount = Mux(requant, self.imm[:SHIFT_MASK_BITS], b.as_unsigned()[:SHIFT_MASK_BITS])
            less = Signal(name=f"less_{e}")
            total = Signal(bits, name=f"sum_{e}")      # ADD and REQUANT: wraps in int32
            m.d.comb += [less.eq(a < b), total.eq(a.as_unsigned() + b.as_unsigned())]
            # The shifter's operand, one fill bit above it: the sign for the
            # arithmetic shifts, 0 for SHL's logical one.
            operand = Signal(bits, name=f"shift_in_{e}")
            m.d.comb += operand.eq(Mux(requant, total, Mux(shift_left, a.as_unsigned()[::-1], a)))
            fill = operand[-1] & ~shift_left
            shifted = Signal(bits, name=f"shifted_{e}")
            m.d.comb += shifted.eq((Cat(operand, fill).as_signed() >> amount)[:bits])
            clipped = shifted.as_signed()
            rounded = self._round_even(shifted, total, tie_mask).as_signed()
            out = Signal(bits, name=f"alu_{e}")
            # MUL keeps the low 32 bits: unsigned arithmetic gives the same
            # bits as signed and simulates faster.
            _select(m, op, out, a, [
                (AluOp.MIN, Mux(less, a, b)), (AluOp.MAX, Mux(less, b, a)), (AluOp.ADD, total),
                (AluOp.SHR, shifted), (AluOp.SHL, shifted[::-1]),
                (AluOp.MUL, (a.as_unsigned() * b.as_unsigned())[:bits]),
                (REQUANT_OPS, Mux(clipped > OUT_MAX, OUT_MAX,
                                  Mux(clipped < requant_low, requant_low, rounded)))])
            m.d.comb += self.result.word_select(e, bits).eq(out)


class TwoCycleAlu(VectorAlu):
    """The two-cycle ALU (module docstring): ``result`` is valid a clock edge after
    the inputs, which are held for both cycles."""

    def _shared_bounds(self, m, requant_low):
        """REQUANT's shifted clip bounds for every lane, or None: each lane shifts its own."""
        return None

    def _second_cycle_tie_mask(self, m, bits):
        """`_tie_mask` as the second cycle reads it (the inputs are held: the same)."""
        return self._tie_mask(m, bits)

    def _shift_operand(self, m, e, bits, operand, shift_left, choices):
        """Register ``operand`` (the ``choices`` value, by op) and return the shifter's
        fill bit: the operand's sign, 0 for SHL's logical shift."""
        with m.Switch(self.op):
            for ops, value in choices:
                with (m.Case(*ops) if ops else m.Default()):
                    m.d.sync += operand.eq(value)
        return operand[-1] & ~shift_left

    def _lanes(self, m, bits, shift_left, requant_low):
        op = self.op
        shared_bounds = self._shared_bounds(m, requant_low)
        tie_mask = self._second_cycle_tie_mask(m, bits)
        for e in range(self.config.batch * self.config.block_out):
            a = self.a.word_select(e, bits).as_signed()
            b = self.b.word_select(e, bits).as_signed()
            # First cycle: the shifter's operand and its amount (ADD, MUL, MIN, MAX: 0)
            # and ``a < b``, registered; the second reads ``b`` only for MIN and MAX
            # (a multiplexer, not the shift amount).
            operand = Signal(bits, name=f"shift_in_{e}")
            amount = Signal(SHIFT_MASK_BITS, name=f"amount_{e}")
            m.d.sync += amount.eq(0)
            # MUL: the three products of 16-bit halves that reach the low 32 bits,
            # registered (in the multiplier blocks' output registers), summed in the
            # second cycle: the first holds no adder after the multipliers.
            half = bits // 2
            a_bits, b_bits = a.as_unsigned(), b.as_unsigned()
            low = Signal(bits, name=f"mul_low_{e}", reset_less=True)
            cross = [Signal(half, name=f"mul_cross{n}_{e}", reset_less=True) for n in range(2)]
            m.d.sync += [low.eq(a_bits[:half] * b_bits[:half]),
                         cross[0].eq(a_bits[:half] * b_bits[half:]),
                         cross[1].eq(a_bits[half:] * b_bits[:half])]
            product = Cat(low[:half], low[half:] + cross[0] + cross[1])[:bits]
            fill = self._shift_operand(m, e, bits, operand, shift_left, (
                ((AluOp.ADD, *REQUANT_OPS), a.as_unsigned() + b.as_unsigned()),
                ((AluOp.SHL,), a.as_unsigned()[::-1]), ((), a)))
            less = Signal(name=f"less_{e}")
            m.d.sync += less.eq(a < b)
            with m.Switch(op):
                with m.Case(*REQUANT_OPS):
                    m.d.sync += amount.eq(self.imm[:SHIFT_MASK_BITS])
                with m.Case(AluOp.SHR, AluOp.SHL):
                    m.d.sync += amount.eq(b.as_unsigned()[:SHIFT_MASK_BITS])
            # Second cycle: shift, clip, select.
            shifted = Signal(bits, name=f"shifted_{e}")
            m.d.comb += shifted.eq((Cat(operand, fill).as_signed() >> amount)[:bits])
            high_bound, low_bound = shared_bounds or (Const(OUT_MAX + 1, 8) << amount,
                                                      requant_low << amount)
            above = operand.as_signed() >= high_bound
            below = operand.as_signed() < low_bound
            out = Signal(bits, name=f"alu_{e}")
            # MIN and MAX: ``a`` (the operand, registered) or ``b`` (held), by ``a < b``.
            _select(m, op, out, shifted, [
                (AluOp.MIN, Mux(less, operand, b)), (AluOp.MAX, Mux(less, b, operand)),
                (AluOp.SHL, shifted[::-1]), (AluOp.MUL, product),
                (REQUANT_OPS, Mux(above, OUT_MAX, Mux(below, requant_low, self._round_even(
                    shifted, operand, tie_mask))))])
            m.d.comb += self.result.word_select(e, bits).eq(out)


class RegisteredTwoCycleAlu(TwoCycleAlu):
    """`TwoCycleAlu` whose second cycle reads the clip bounds and the shifter's fill
    bit from registers (``registered_control``)."""

    def _shared_bounds(self, m, requant_low):
        # REQUANT's clip bounds shifted by its amount (the immediate's), registered
        # in the first cycle for every lane: the second compares against registers.
        amount = self.imm[:SHIFT_MASK_BITS]
        bounds = Const(OUT_MAX + 1, 8) << amount, requant_low << amount
        shared_bounds = (Signal.like(bounds[0], name="high_bound"),
                         Signal.like(bounds[1], name="low_bound"))
        m.d.sync += [register.eq(bound) for register, bound in zip(shared_bounds, bounds)]
        return shared_bounds

    def _second_cycle_tie_mask(self, m, bits):
        mask = Signal(bits, name="tie_mask_registered")
        m.d.sync += mask.eq(self._tie_mask(m, bits))
        return mask

    def _shift_operand(self, m, e, bits, operand, shift_left, choices):
        # The operand and the shifter's fill bit (the sign, but 0 for SHL's
        # logical shift), registered: no decoder before the shifter.
        chosen, fill = Signal(bits, name=f"shift_in_next_{e}"), Signal(name=f"fill_{e}")
        m.d.sync += [operand.eq(chosen), fill.eq(chosen[-1] & ~shift_left)]
        with m.Switch(self.op):
            for ops, value in choices:
                with (m.Case(*ops) if ops else m.Default()):
                    m.d.comb += chosen.eq(value)
        return fill


def _select(m: Module, op, out, otherwise, cases) -> None:
    """``out`` = the value of the first of ``cases`` (``(op or ops, value)``) naming
    ``op``, else ``otherwise`` (an unknown op passes ``a`` through)."""
    with m.Switch(op):
        for ops, value in cases:
            with m.Case(*(ops if isinstance(ops, tuple) else (ops,))):
                m.d.comb += out.eq(value)
        with m.Default():
            m.d.comb += out.eq(otherwise)
