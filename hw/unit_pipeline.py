"""One compute unit's pipeline: the GEMM unit and the ALU unit are two instances.

`UnitPipeline` takes one GEMM (``unit="gemm"``) or ALU (``unit="alu"``)
instruction at a time on ``begin`` / ``insn`` and runs its loop nest one
micro-op per cycle; once a micro-op has entered, it never stalls:

====  =====================================================================
S0    `LoopSequencer` (i, j, u) and index offsets; uop SRAM read of ``u``
S1    uop word + offsets -> dst, src [, wgt] indices (registered)
S2    SRAM reads: acc[dst] (both units); GEMM inp[src] and wgt[wgt]; ALU
      acc[src] (none for ``reset``, no acc[src] with ``use_imm``)
S3    read data; acc operands forwarded from the unit's own S4 / S5; GEMM
      dot products (`GemmCore`); operands registered
S4    result = acc + product, ALU op (`VectorAlu`), or 0 (reset); acc[dst]
      and out[dst] written through the unit's own write ports
====  =====================================================================

Read-after-write hazards on acc within the unit: a micro-op reading acc in S2
does not see the write of the micro-op in S4 that same cycle (SRAM ports are
not transparent) nor that of the one in S3 behind it, so S3 takes the result
being written in S4 this cycle, else the one written last cycle (S5), else the
SRAM data: back-to-back micro-ops on the same acc row run at full rate, across
instruction boundaries too. Nothing is forwarded from the other unit; the
compute module (`hw.compute`) orders the units.

``completes`` pulses when an instruction's last micro-op (or its write-less
marker, for an empty loop) leaves S4; ``executes`` pulses for every micro-op in
S4 (reset ones included).
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw import isa
from vdla.hw.alu import RELU_BIT, SHIFT_MASK_BITS, VectorAlu
from vdla.hw.config import HwConfig
from vdla.hw.gemm import GemmCore
from vdla.hw.layouts import (instruction_layout, sram_read_signature, sram_write_signature,
                             uop_layout)
from vdla.hw.sequencer import LoopSequencer, index_kinds, loop_layout

__all__ = ["UnitPipeline", "UNITS", "out_of_acc"]

UNITS = ("gemm", "alu")


def out_of_acc(config: HwConfig, acc_value):
    """The out element mirroring an acc element: the low bits of every scalar."""
    acc_bits, out_bits = config.element_bits("acc"), config.element_bits("out")
    count = config.batch * config.block_out
    return Cat(*(acc_value.word_select(e, acc_bits)[:out_bits] for e in range(count)))


def _field_bits(config: HwConfig, opcode: isa.Opcode, name: str) -> int:
    return next(f.bits for f in isa.formats(config)[opcode] if f.name == name)


def _control_layout(config: HwConfig, unit: str) -> data.StructLayout:
    """What a micro-op carries down the pipeline besides its indices."""
    if unit == "gemm":
        return data.StructLayout({"reset": 1})
    assert RELU_BIT == SHIFT_MASK_BITS
    return data.StructLayout({
        "reset": 1, "op": _field_bits(config, isa.Opcode.ALU, "alu_op"), "use_imm": 1,
        "imm": SHIFT_MASK_BITS + 1,               # REQUANT's shift and relu bits
        "operand": config.element_bits("acc"),    # the immediate operand, sign extended
    })


class UnitPipeline(wiring.Component):
    """The pipeline of one compute unit (see the module docstring).

    Parameters
    ----------
    config : HwConfig
    unit : str
        ``"gemm"`` or ``"alu"``.

    Ports
    -----
    begin : In(1)
        Take the instruction word on ``insn`` (only while ``ready``).
    insn : In(instruction bits)
    ready : Out(1)
        The sequencer can take an instruction this cycle.
    uop_read, acc_read : In(SRAM read port signature)
        The micro-op read and the acc[dst] read.
    inp_read, wgt_read : In(SRAM read port signature)
        GEMM only.
    acc_src_read : In(SRAM read port signature)
        ALU only: acc[src].
    acc_write, out_write : In(SRAM write port signature)
    completes, executes : Out(1)
    """

    def __init__(self, config: HwConfig, unit: str):
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
        self.config = config
        self.unit = unit
        members = {
            "begin": In(1),
            "insn": In(HwConfig.INSN_BITS),
            "ready": Out(1),
            "uop_read": In(sram_read_signature(config, "uop")),
            "acc_read": In(sram_read_signature(config, "acc")),
            "acc_write": In(sram_write_signature(config, "acc")),
            "out_write": In(sram_write_signature(config, "out")),
            "completes": Out(1),
            "executes": Out(1),
        }
        if unit == "gemm":
            members["inp_read"] = In(sram_read_signature(config, "inp"))
            members["wgt_read"] = In(sram_read_signature(config, "wgt"))
        else:
            members["acc_src_read"] = In(sram_read_signature(config, "acc"))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        config = self.config
        gemm = self.unit == "gemm"
        opcode = isa.Opcode.GEMM if gemm else isa.Opcode.ALU
        layout = instruction_layout(config, opcode)
        insn = data.View(layout, self.insn[:layout.size])
        acc_bits = config.element_bytes("acc") * 8
        scalar_bits = config.element_bits("acc")
        scalars = config.batch * config.block_out
        index_bits = {"dst": config.acc_index_bits,
                      "src": config.uop_src_bits if gemm else config.acc_index_bits,
                      "wgt": config.wgt_index_bits}
        kinds = index_kinds(gemm)

        # Pipeline data registers: read only where their stage's valid bit (which
        # is reset) is set, so they need no reset. Without one, their next-state
        # logic does not depend on the rst / start inputs, and Verilator
        # evaluates it once per cycle instead of again on every input change.
        def Data(shape=1, name=None):  # noqa: N802 (reads as a Signal constructor)
            return Signal(shape, reset_less=True, name=name)

        # ------------------------------------------------------------ S0
        m.submodules.sequencer = seq = LoopSequencer(config, with_wgt=gemm)
        m.d.comb += [seq.begin.eq(self.begin), self.ready.eq(seq.ready)]
        m.d.comb += [getattr(seq.insn, name).eq(getattr(insn, name))
                     for name in loop_layout(config, gemm).members]
        control = _control_layout(config, self.unit)
        c0 = Data(control)
        with m.If(self.begin):
            m.d.sync += c0.reset.eq(insn.reset)
            if not gemm:
                # Latched sign extension: a register keeps Yosys from inlining the
                # extension bit by bit into the operand mux.
                m.d.sync += [
                    c0.op.eq(insn.alu_op), c0.use_imm.eq(insn.use_imm),
                    c0.imm.eq(insn.imm[:SHIFT_MASK_BITS + 1]),
                    c0.operand.eq(Mux(insn.alu_op == isa.AluOp.REQUANT, 0, insn.imm)),
                ]
        m.d.comb += [self.uop_read.addr.eq(seq.u), self.uop_read.en.eq(seq.valid)]

        def stage(previous_valid, previous_last, previous_control, name):
            """The valid, last and control registers of the next stage."""
            valid, last = Signal(name=f"{name}_valid"), Signal(name=f"{name}_last")
            ctl = Data(control, name=f"{name}_control")
            m.d.sync += [valid.eq(previous_valid), last.eq(previous_last),
                         ctl.eq(previous_control)]
            return valid, last, ctl

        # ------------------------------------------------------------ S1
        v1, l1, c1 = stage(seq.valid, seq.last, c0, "s1")
        offset1 = {k: Data(index_bits[k], name=f"s1_{k}_offset") for k in kinds}
        m.d.sync += [offset1[k].eq(getattr(seq.offset, k)) for k in kinds]

        # ------------------------------------------------------------ S2
        v2, l2, c2 = stage(v1, l1, c1, "s2")
        uop = data.View(uop_layout(config), self.uop_read.data[:uop_layout(config).size])
        index2 = {k: Data(index_bits[k], name=f"s2_{k}") for k in kinds}
        m.d.sync += [index2[k].eq(getattr(uop, k) + offset1[k]) for k in kinds]
        # Reads only for a micro-op that uses them: idle cycles copy no wide
        # SRAM words in simulation.
        reads = v2 & ~c2.reset
        m.d.comb += [self.acc_read.addr.eq(index2["dst"]), self.acc_read.en.eq(reads)]
        if gemm:
            m.d.comb += [self.inp_read.addr.eq(index2["src"]), self.inp_read.en.eq(reads),
                         self.wgt_read.addr.eq(index2["wgt"]), self.wgt_read.en.eq(reads)]
        else:
            m.d.comb += [self.acc_src_read.addr.eq(index2["src"]),
                         self.acc_src_read.en.eq(reads & ~c2.use_imm)]

        # ------------------------------------------------------------ S3
        v3, l3, c3 = stage(v2, l2, c2, "s3")
        dst3 = Data(index_bits["dst"], name="s3_dst")
        m.d.sync += dst3.eq(index2["dst"])
        if not gemm:
            src3 = Data(index_bits["src"], name="s3_src")
            m.d.sync += src3.eq(index2["src"])

        # ------------------------------------------------------------ S4
        v4, l4, c4 = stage(v3, l3, c3, "s4")
        dst4 = Data(index_bits["dst"], name="s4_dst")
        a4, b4 = Data(acc_bits, name="s4_a"), Data(acc_bits, name="s4_b")
        result = Signal(acc_bits)
        v5, dst5, result5 = Signal(name="s5_valid"), Data(index_bits["dst"]), Data(acc_bits)

        def forwarded(index, sram_data):
            return Mux(v4 & (dst4 == index), result,
                       Mux(v5 & (dst5 == index), result5, sram_data))

        m.d.sync += [dst4.eq(dst3), a4.eq(forwarded(dst3, self.acc_read.data))]
        if gemm:
            m.submodules.core = core = GemmCore(config)
            m.d.comb += [core.inp.eq(self.inp_read.data), core.wgt.eq(self.wgt_read.data)]
            m.d.sync += b4.eq(core.product)
            computed = Cat(*((a4.word_select(e, scalar_bits)
                              + b4.word_select(e, scalar_bits))[:scalar_bits]
                             for e in range(scalars)))
        else:
            operand_vector = Cat(*([c3.operand] * scalars))
            m.d.sync += b4.eq(Mux(c3.use_imm, operand_vector,
                                  forwarded(src3, self.acc_src_read.data)))
            m.submodules.alu = alu = VectorAlu(config)
            m.d.comb += [alu.op.eq(c4.op), alu.a.eq(a4), alu.b.eq(b4), alu.imm.eq(c4.imm)]
            computed = alu.result
        m.d.comb += result.eq(Mux(c4.reset, 0, computed))
        m.d.sync += [v5.eq(v4), dst5.eq(dst4), result5.eq(result)]
        m.d.comb += [
            self.acc_write.en.eq(v4), self.acc_write.addr.eq(dst4), self.acc_write.data.eq(result),
            self.out_write.en.eq(v4), self.out_write.addr.eq(dst4),
            self.out_write.data.eq(out_of_acc(config, result)),
            self.completes.eq(l4), self.executes.eq(v4),
        ]
        return m
