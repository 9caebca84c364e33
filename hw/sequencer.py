"""The loop sequencer: stage S0 of a compute unit, one micro-op per cycle.

A GEMM or ALU instruction runs ``for i in iter_out: for j in iter_in: for u in
[uop_begin, uop_end)``; every micro-op index is the micro-op's own plus
``i * factor_out + j * factor_in`` (`hw.isa`). `LoopSequencer` walks that nest
with counters and running index offsets (adders, no multipliers): when
``begin`` is high it latches the instruction on ``insn`` and from the next
cycle emits one micro-op per cycle (``valid``, ``u`` and the offsets), or one
every other cycle while ``paced`` is high (the ALU's two-read micro-ops, whose
second acc read takes the next cycle's port). ``ready`` is high in the cycle
the sequencer can take the next instruction: it is idle, or it sends its last
micro-op now, so a unit's instructions follow each other without a bubble
(with ``HwConfig.sequencer_gap``: only once idle, a cycle later, so that
``ready`` is a register).
With ``HwConfig.registered_control`` whether each counter is at its last
value is a register, set with the counter from a comparison against the value
before the last, so ``last`` (and ``ready``) come from registers too
(`RegisteredEnds`, the variant the sequencer chooses over `ComparedEnds`).
``last`` marks the end of an instruction: its last micro-op, or a write-less
marker one cycle after an empty instruction (zero trip count or empty uop
range) began, so every instruction completes exactly once.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw import isa
from vdla.hw.config import HwConfig

__all__ = ["LoopSequencer", "ComparedEnds", "RegisteredEnds", "ends_variant", "loop_layout",
           "index_kinds"]


def index_kinds(with_wgt: bool) -> tuple[str, ...]:
    """The micro-op index fields a unit offsets: GEMM has a wgt index, the ALU not."""
    return ("dst", "src", "wgt") if with_wgt else ("dst", "src")


def _index_bits(config: HwConfig) -> dict[str, int]:
    return {"dst": config.acc_index_bits, "src": config.uop_src_bits, "wgt": config.wgt_index_bits}


def loop_layout(config: HwConfig, with_wgt: bool) -> data.StructLayout:
    """The loop fields of a GEMM / ALU instruction the sequencer reads."""
    fields = {f.name: f.bits for f in isa.formats(config)[isa.Opcode.GEMM]}
    names = ["uop_begin", "uop_end", "iter_out", "iter_in"]
    names += [f"{k}_factor_{side}" for k in index_kinds(with_wgt) for side in ("out", "in")]
    return data.StructLayout({name: fields[name] for name in names})


class LoopSequencer(wiring.Component):
    """Walks one GEMM / ALU loop nest at a time (see the module docstring).

    Parameters
    ----------
    config : HwConfig
    with_wgt : bool
        Whether micro-ops carry a wgt index (the GEMM unit).

    Ports
    -----
    begin : In(1)
        Take the instruction on ``insn`` this cycle (only when ``ready``).
    insn : In(loop_layout)
    paced : In(1)
        Latched with ``begin``: emit a micro-op every other cycle.
    ready, valid, last : Out(1)
    u : Out(uop index bits + 1)
        The micro-op to read (valid with ``valid``).
    offset : Out(struct of index offsets ``dst``, ``src`` [, ``wgt``])
    """

    def __init__(self, config: HwConfig, with_wgt: bool):
        self.config = config
        self.with_wgt = with_wgt
        self.ends_kind = ends_variant(config)
        bits = _index_bits(config)
        super().__init__({
            "begin": In(1),
            "insn": In(loop_layout(config, with_wgt)),
            "paced": In(1),
            "ready": Out(1),
            "valid": Out(1),
            "last": Out(1),
            "u": Out(config.index_bits("uop") + 1),
            "offset": Out(data.StructLayout({k: bits[k] for k in index_kinds(with_wgt)})),
        })

    def elaborate(self, platform):
        m = Module()
        nest = _Nest(self.config, self.u, self.offset, index_kinds(self.with_wgt))
        ends = self.ends_kind(nest.u, nest.u_last, nest.j, nest.j_last, nest.i, nest.i_last)
        self._walk(m, nest, ends)
        self._take(m, nest, ends)
        return m

    def _walk(self, m: Module, nest: "_Nest", ends: "ComparedEnds"):
        """A micro-op per cycle (a paced instruction: on the cycles where ``gap`` is
        low), stepping ``u``, then ``j``, then ``i`` and the index offsets."""
        u, j, i, issuing, paced, gap = nest.u, nest.j, nest.i, nest.issuing, nest.paced, nest.gap
        off = nest.off
        emitting = issuing & ~gap
        end_u, end_j, end_i = ends.u, ends.j, ends.i
        at_last = emitting & end_u & end_j & end_i
        m.d.comb += [self.valid.eq(emitting), self.last.eq(at_last | nest.marker)]
        if self.config.sequencer_gap:
            # A register: the compute front end's issue (and fetch) waits on no comparator.
            m.d.comb += self.ready.eq(~issuing)
        else:
            m.d.comb += self.ready.eq(~issuing | (at_last & ~paced))
        m.d.sync += gap.eq(paced & emitting)
        with m.If(emitting):
            with m.If(end_u):
                m.d.sync += u.eq(nest.u_first)
                with m.If(end_j):
                    m.d.sync += [j.eq(0), i.eq(i + 1)] + ends.next_outer()
                    for k in nest.kinds:
                        following = nest.outer[k] + nest.factor_out[k]
                        m.d.sync += [nest.outer[k].eq(following), off[k].eq(following)]
                    with m.If(end_i):
                        m.d.sync += issuing.eq(0)
                with m.Else():
                    m.d.sync += [j.eq(j + 1)] + ends.next_inner()
                    m.d.sync += [off[k].eq(off[k] + nest.factor_in[k]) for k in nest.kinds]
                m.d.sync += ends.first_uop()
            with m.Else():
                m.d.sync += [u.eq(u + 1)] + ends.next_uop()
        m.d.sync += nest.marker.eq(0)

    def _take(self, m: Module, nest: "_Nest", ends: "ComparedEnds"):
        """Latch the instruction on ``begin``: its counters and settings, and whether it
        issues micro-ops or (an empty one) only the marker."""
        insn, off = self.insn, nest.off
        counters = [
            nest.u.eq(insn.uop_begin), nest.u_first.eq(insn.uop_begin),
            nest.u_last.eq(insn.uop_end - 1),
            nest.i.eq(0), nest.i_last.eq(insn.iter_out - 1), nest.j.eq(0),
            nest.j_last.eq(insn.iter_in - 1),
        ] + ends.begin(insn)
        settings = [nest.paced.eq(self.paced), nest.gap.eq(0)]
        for k in nest.kinds:
            settings += [nest.factor_out[k].eq(getattr(insn, f"{k}_factor_out")),
                         nest.factor_in[k].eq(getattr(insn, f"{k}_factor_in")),
                         nest.outer[k].eq(0), off[k].eq(0)]
        nonempty = (insn.iter_out != 0) & (insn.iter_in != 0) & (insn.uop_end > insn.uop_begin)
        starts = [nest.issuing.eq(nonempty), nest.marker.eq(~nonempty)]
        if self.config.sequencer_gap:
            # `begin` only comes while idle (``ready`` is ``~issuing``), and nothing reads
            # the loop registers while idle: they follow ``insn`` whenever idle, so
            # `begin` (the end of the issue decision) enables two flip-flops, not all.
            with m.If(~nest.issuing):
                m.d.sync += counters + settings
            with m.If(self.begin):
                m.d.sync += starts
        else:
            with m.If(self.begin):   # (in the order that keeps these configs' Verilog)
                m.d.sync += counters + starts + settings


class _Nest:
    """A `LoopSequencer`'s registers: the counters ``u`` (the ``u`` port), ``j`` and
    ``i`` with their first / last values, each index kind's factors, outer offset and
    offset (``off``: the ``offset`` port's fields), and whether it is issuing, sends
    the marker, is paced and in a paced gap."""

    def __init__(self, config: HwConfig, u_port, offset_port, kinds: tuple[str, ...]):
        bits = _index_bits(config)
        uop_bits = len(u_port)
        u, u_first, u_last = u_port, Signal(uop_bits), Signal(uop_bits)
        i, i_last = Signal(isa.ITER_BITS), Signal(isa.ITER_BITS)
        j, j_last = Signal(isa.ITER_BITS), Signal(isa.ITER_BITS)
        factor_out = {k: Signal(bits[k], name=f"{k}_factor_out") for k in kinds}
        factor_in = {k: Signal(bits[k], name=f"{k}_factor_in") for k in kinds}
        outer = {k: Signal(bits[k], name=f"{k}_outer") for k in kinds}
        issuing, marker, paced, gap = Signal(), Signal(), Signal(), Signal()
        self.kinds = kinds
        self.u, self.u_first, self.u_last = u, u_first, u_last
        self.i, self.i_last, self.j, self.j_last = i, i_last, j, j_last
        self.factor_out, self.factor_in, self.outer = factor_out, factor_in, outer
        self.off = {k: getattr(offset_port, k) for k in kinds}
        self.issuing, self.marker, self.paced, self.gap = issuing, marker, paced, gap


def ends_variant(config: HwConfig) -> type["ComparedEnds"]:
    """How a sequencer knows its counters are at their last values, by the switches
    (``registered_control``)."""
    return RegisteredEnds if config.registered_control else ComparedEnds


class ComparedEnds:
    """Whether each loop counter is at its last value (`u`, `j`, `i`): compared with
    the last value every cycle. The methods give the statements that keep the
    ends right as the counters move (none here)."""

    def __init__(self, u, u_last, j, j_last, i, i_last):
        self.u, self.j, self.i = u == u_last, j == j_last, i == i_last

    def next_outer(self) -> list:
        """With ``j`` back to 0 and ``i`` to ``i + 1``."""
        return []

    def next_inner(self) -> list:
        """With ``j`` to ``j + 1``."""
        return []

    def first_uop(self) -> list:
        """With ``u`` back to the first micro-op."""
        return []

    def next_uop(self) -> list:
        """With ``u`` to ``u + 1``."""
        return []

    def begin(self, insn) -> list:
        """With the counters set from ``insn``."""
        return []


class RegisteredEnds(ComparedEnds):
    """``registered_control``: whether each counter is at its last value, kept in
    registers updated with it (the comparisons on the next value): `last` and
    `ready` wait on no comparator."""

    def __init__(self, u, u_last, j, j_last, i, i_last):
        self.counters = u, j, i
        end_u, end_j, end_i = Signal(name="end_u"), Signal(name="end_j"), Signal(name="end_i")
        single_u, single_j = Signal(), Signal()   # one micro-op; one inner iteration
        # The values before the last (wrapped where there is none: never reached).
        u_penult, j_penult, i_penult = (Signal(len(u)), Signal(isa.ITER_BITS),
                                        Signal(isa.ITER_BITS))
        self.u, self.j, self.i = end_u, end_j, end_i
        self.single_u, self.single_j = single_u, single_j
        self.penult = u_penult, j_penult, i_penult

    def next_outer(self):
        return [self.j.eq(self.single_j), self.i.eq(self.counters[2] == self.penult[2])]

    def next_inner(self):
        return [self.j.eq(self.counters[1] == self.penult[1])]

    def first_uop(self):
        return [self.u.eq(self.single_u)]

    def next_uop(self):
        return [self.u.eq(self.counters[0] == self.penult[0])]

    def begin(self, insn):
        u_penult, j_penult, i_penult = self.penult
        one_uop, one_inner = insn.uop_end == insn.uop_begin + 1, insn.iter_in == 1
        return [self.u.eq(one_uop), self.single_u.eq(one_uop), self.j.eq(one_inner),
                self.single_j.eq(one_inner), self.i.eq(insn.iter_out == 1),
                u_penult.eq(insn.uop_end - 2), j_penult.eq(insn.iter_in - 2),
                i_penult.eq(insn.iter_out - 2)]
