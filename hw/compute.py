"""The compute module: micro-op and accumulator SRAMs, a GEMM unit and an ALU unit.

Instructions arrive in order on ``cmds``; an in-order front end issues them.

* GEMM and ALU instructions go to their unit: two independent pipelines, each
  taking one micro-op per cycle, that run at the same time. An instruction
  issues when its unit's loop sequencer is free (in the cycle its previous
  instruction sends its last micro-op, so a unit's instructions follow each
  other without a bubble or a drain) and, unless its ``overlap`` bit is set,
  once the *other* unit has completed everything it was given (instructions of
  its own unit need no wait: its pipeline keeps their order and forwards
  results). Its tokens are popped as it issues, and an entry
  ``{unit, push_prev, push_next}`` goes into the retire queue.
* The retire queue retires its head, pushing the head's tokens, once that
  instruction has completed (its last micro-op written acc and out). Units
  complete their instructions in order and the queue is in program order, so
  every push follows the last write of its instruction and of every earlier
  one. A unit counts completed-but-not-retired instructions; the head of unit
  ``U`` has completed when that count is non-zero. An instruction with an empty
  loop sends a write-less "last" marker down its unit's pipeline instead.
* Every other instruction (LOAD of uop / acc, LOAD of another memory type,
  which only moves tokens, and FINISH) waits until the retire queue is empty,
  so both units have drained, then pops, runs on its own (uop / acc LOADs on a
  `LoadEngine`) and pushes. FINISH sets ``finished`` and stops the front end.

Each unit's pipeline never stalls once a micro-op has entered it:

====  =====================================================================
S0    loop sequencer (i, j, u) and index offsets; uop SRAM read of ``u``
S1    uop word + offsets -> dst, src, wgt indices (registered)
S2    SRAM reads: GEMM acc[dst], inp[src], wgt[wgt]; ALU acc[dst], acc[src]
      (none for ``reset``, no acc[src] with ``use_imm``)
S3    read data; acc operands forwarded from the unit's own S4 / S5; GEMM
      dot products; operands registered
S4    result = acc + product, ALU op, or 0 (reset); acc[dst] and out[dst]
      written through the unit's own write ports
====  =====================================================================

SRAM ports: uop -- one read port per unit, one write port (LOAD); acc -- GEMM
reads dst, ALU reads dst and src, one write port per unit (the ALU's also
serves acc LOADs, which never run beside a unit); out -- one write port per
unit (``out_write``: GEMM, ``out_write_alu``: ALU and acc LOADs).

Read-after-write hazards on acc within a unit: a micro-op reading acc in S2
does not see the write of the micro-op in S4 that same cycle (SRAM ports are
not transparent) nor that of the one in S3 behind it. S3 therefore takes the
result being written in S4 this cycle, else the one written last cycle (S5),
else the SRAM data: back-to-back micro-ops on the same acc row run at full
rate, across instruction boundaries too. Between the units nothing is
forwarded: an instruction without ``overlap`` issues only when the other unit
is empty, so its first read (two cycles after issue) sees every earlier write,
and instructions that do overlap must not touch the same acc / out rows where
either writes them (the ISA leaves that to the program). inp and wgt are never
written by compute.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from vdla.hw import isa
from vdla.hw.alu import RELU_BIT, SHIFT_MASK_BITS, VectorAlu
from vdla.hw.config import HwConfig
from vdla.hw.gemm import GemmCore
from vdla.hw.layouts import (MemReadSignature, TokenSignature, instruction_layout,
                        sram_read_signature, sram_write_signature, uop_layout)
from vdla.hw.load import LoadEngine

__all__ = ["Compute", "RETIRE_QUEUE_DEPTH"]

# Issued GEMM / ALU instructions not yet retired. Each unit holds at most a few
# in its pipeline at once (one per stage), so 8 rarely stalls issue.
RETIRE_QUEUE_DEPTH = 8

RETIRE_LAYOUT = data.StructLayout({"alu": 1, "push_prev": 1, "push_next": 1})


def out_of_acc(config: HwConfig, acc_value):
    """The out element mirroring an acc element: the low bits of every scalar."""
    acc_bits, out_bits = config.element_bits("acc"), config.element_bits("out")
    count = config.batch * config.block_out
    return Cat(*(acc_value.word_select(e, acc_bits)[:out_bits] for e in range(count)))


class _LoopSequencer:
    """S0 of a unit: walks ``for i, j, u`` of the instruction given on ``begin``.

    ``ready`` is high when the sequencer can take an instruction this cycle (it
    is idle or sends its last micro-op now). Each cycle it emits ``valid`` (a
    micro-op: uop ``u`` with the index offsets ``off_*``) and ``last`` (the end
    of an instruction: its last micro-op, or a write-less marker one cycle
    after an empty instruction began).
    """

    def __init__(self, m: Module, config: HwConfig, name: str, insn, begin, with_wgt: bool):
        uop_bits = config.index_bits("uop") + 1
        index_bits = {"dst": config.acc_index_bits, "src": config.uop_src_bits,
                      "wgt": config.wgt_index_bits}
        kinds = ("dst", "src", "wgt") if with_wgt else ("dst", "src")

        def reg(shape, suffix):
            return Signal(shape, name=f"{name}_{suffix}")

        self.u = u = reg(uop_bits, "u")
        u_first, u_last = reg(uop_bits, "u_first"), reg(uop_bits, "u_last")
        i, i_last = reg(isa.ITER_BITS, "i"), reg(isa.ITER_BITS, "i_last")
        j, j_last = reg(isa.ITER_BITS, "j"), reg(isa.ITER_BITS, "j_last")
        factor_out = {k: reg(index_bits[k], f"{k}_factor_out") for k in kinds}
        factor_in = {k: reg(index_bits[k], f"{k}_factor_in") for k in kinds}
        outer = {k: reg(index_bits[k], f"{k}_outer") for k in kinds}
        self.off = off = {k: reg(index_bits[k], f"{k}_offset") for k in kinds}
        self.valid = issuing = reg(1, "issuing")
        marker = reg(1, "marker")
        self.last = reg(1, "last")
        self.ready = reg(1, "ready")

        end_u, end_j, end_i = u == u_last, j == j_last, i == i_last
        at_last = issuing & end_u & end_j & end_i
        m.d.comb += [self.last.eq(at_last | marker), self.ready.eq(~issuing | at_last)]
        with m.If(issuing):
            with m.If(end_u):
                m.d.sync += u.eq(u_first)
                with m.If(end_j):
                    m.d.sync += [j.eq(0), i.eq(i + 1)]
                    for k in kinds:
                        following = outer[k] + factor_out[k]
                        m.d.sync += [outer[k].eq(following), off[k].eq(following)]
                    with m.If(end_i):
                        m.d.sync += issuing.eq(0)
                with m.Else():
                    m.d.sync += j.eq(j + 1)
                    m.d.sync += [off[k].eq(off[k] + factor_in[k]) for k in kinds]
            with m.Else():
                m.d.sync += u.eq(u + 1)
        m.d.sync += marker.eq(0)
        with m.If(begin):
            nonempty = (insn.iter_out != 0) & (insn.iter_in != 0) & (insn.uop_end > insn.uop_begin)
            m.d.sync += [
                u.eq(insn.uop_begin), u_first.eq(insn.uop_begin), u_last.eq(insn.uop_end - 1),
                i.eq(0), i_last.eq(insn.iter_out - 1), j.eq(0), j_last.eq(insn.iter_in - 1),
                issuing.eq(nonempty), marker.eq(~nonempty),
            ]
            for k in kinds:
                m.d.sync += [factor_out[k].eq(getattr(insn, f"{k}_factor_out")),
                             factor_in[k].eq(getattr(insn, f"{k}_factor_in")),
                             outer[k].eq(0), off[k].eq(0)]


class Compute(wiring.Component):
    """The compute module.

    Ports
    -----
    cmds : In(stream of instruction words)
    from_load, from_store : In(token stream)
    to_load, to_store : Out(token stream)
    mem_uop, mem_acc : Out(MemReadSignature)
    inp_read, wgt_read : In(SRAM read port signature)
        Read by the GEMM unit.
    out_write, out_write_alu : In(SRAM write port signature)
        The GEMM unit's and the ALU unit's (and acc LOADs') out writes.
    finished : Out(1)
        FINISH retired (sticky until reset).
    busy, wait_token, wait_mem, idle : Out(1)
        Activity: ``busy`` while either unit holds an instruction or a LOAD runs.
    gemm_busy, alu_busy : Out(1)
        The unit holds an issued instruction that has not completed.
    gemm_uop, alu_uop : Out(1)
        Pulse per executed micro-op (reset ones included).
    retired : Out(16)
    """

    def __init__(self, config: HwConfig):
        self.config = config
        super().__init__({
            "cmds": In(stream.Signature(HwConfig.INSN_BITS)),
            "from_load": In(TokenSignature),
            "to_load": Out(TokenSignature),
            "from_store": In(TokenSignature),
            "to_store": Out(TokenSignature),
            "mem_uop": Out(MemReadSignature(config.dram_bus_bits)),
            "mem_acc": Out(MemReadSignature(config.dram_bus_bits)),
            "inp_read": In(sram_read_signature(config, "inp")),
            "wgt_read": In(sram_read_signature(config, "wgt")),
            "out_write": In(sram_write_signature(config, "out")),
            "out_write_alu": In(sram_write_signature(config, "out")),
            "finished": Out(1),
            "busy": Out(1), "wait_token": Out(1), "wait_mem": Out(1), "idle": Out(1),
            "gemm_busy": Out(1), "alu_busy": Out(1),
            "gemm_uop": Out(1), "alu_uop": Out(1),
            "retired": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        config = self.config
        acc_bits = config.element_bytes("acc") * 8
        scalar_bits = config.element_bits("acc")
        scalars = config.batch * config.block_out
        acc_index_bits = config.index_bits("acc")
        src_bits, wgt_bits = config.uop_src_bits, config.wgt_index_bits

        # ---------------------------------------------------------- SRAMs
        m.submodules.uop_mem = uop_mem = memory.Memory(
            shape=HwConfig.UOP_BITS, depth=config.depth("uop"), init=[])
        m.submodules.acc_mem = acc_mem = memory.Memory(
            shape=acc_bits, depth=config.depth("acc"), init=[])
        uop_read_gemm = uop_mem.read_port(transparent_for=())
        uop_read_alu = uop_mem.read_port(transparent_for=())
        uop_write = uop_mem.write_port()
        acc_read_gemm = acc_mem.read_port(transparent_for=())
        acc_read_alu_dst = acc_mem.read_port(transparent_for=())
        acc_read_alu_src = acc_mem.read_port(transparent_for=())
        acc_write_gemm = acc_mem.write_port()
        acc_write_alu = acc_mem.write_port()

        m.submodules.loader = loader = LoadEngine(config, ("uop", "acc"))
        connect(m, loader.mem_uop, flipped(self.mem_uop))
        connect(m, loader.mem_acc, flipped(self.mem_acc))
        connect(m, loader.sram_uop, uop_write)

        m.submodules.gemm = gemm = GemmCore(config)
        m.submodules.alu = alu = VectorAlu(config)

        def view(word, opcode):
            layout = instruction_layout(config, opcode)
            return data.View(layout, word[:layout.size])

        # Pipeline data registers: read only where their stage's valid bit (which
        # is reset) is set, so they need no reset. Without one, their next-state
        # logic does not depend on the rst / start inputs, and Verilator
        # evaluates it once per cycle instead of again on every input change.
        def Data(shape=1):  # noqa: N802 (reads as a Signal constructor)
            return Signal(shape, reset_less=True)

        # ---------------------------------------------------------- front end decode
        head = self.cmds.payload
        head_header = view(head, isa.Opcode.FINISH)
        head_gemm, head_alu = view(head, isa.Opcode.GEMM), view(head, isa.Opcode.ALU)
        head_is_gemm = head_header.opcode == isa.Opcode.GEMM
        head_is_alu = head_header.opcode == isa.Opcode.ALU
        head_overlap = Mux(head_is_gemm, head_gemm.overlap, head_alu.overlap)
        pops_ready = ((~head_header.pop_prev | self.from_load.valid)
                      & (~head_header.pop_next | self.from_store.valid))
        begin_gemm, begin_alu = Signal(), Signal()

        # ---------------------------------------------------------- GEMM unit
        gemm_seq = _LoopSequencer(m, config, "gemm", head_gemm, begin_gemm, with_wgt=True)
        g0_reset = Data()
        with m.If(begin_gemm):
            m.d.sync += g0_reset.eq(head_gemm.reset)
        m.d.comb += [uop_read_gemm.addr.eq(gemm_seq.u), uop_read_gemm.en.eq(gemm_seq.valid)]

        g1_valid, g1_last, g1_reset = Signal(), Signal(), Data()
        g1_dst, g1_src, g1_wgt = Data(acc_index_bits), Data(src_bits), Data(wgt_bits)
        m.d.sync += [g1_valid.eq(gemm_seq.valid), g1_last.eq(gemm_seq.last),
                     g1_reset.eq(g0_reset), g1_dst.eq(gemm_seq.off["dst"]),
                     g1_src.eq(gemm_seq.off["src"]), g1_wgt.eq(gemm_seq.off["wgt"])]
        g_uop = data.View(uop_layout(config), uop_read_gemm.data[:uop_layout(config).size])
        g2_valid, g2_last, g2_reset = Signal(), Signal(), Data()
        g2_dst, g2_src, g2_wgt = Data(acc_index_bits), Data(src_bits), Data(wgt_bits)
        m.d.sync += [g2_valid.eq(g1_valid), g2_last.eq(g1_last), g2_reset.eq(g1_reset),
                     g2_dst.eq(g_uop.dst + g1_dst), g2_src.eq(g_uop.src + g1_src),
                     g2_wgt.eq(g_uop.wgt + g1_wgt)]
        g_reads = g2_valid & ~g2_reset
        m.d.comb += [
            # Reads only for a micro-op that uses them: idle cycles copy no wide
            # SRAM words in simulation.
            acc_read_gemm.addr.eq(g2_dst), acc_read_gemm.en.eq(g_reads),
            self.inp_read.addr.eq(g2_src), self.inp_read.en.eq(g_reads),
            self.wgt_read.addr.eq(g2_wgt), self.wgt_read.en.eq(g_reads),
        ]
        g3_valid, g3_last, g3_reset = Signal(), Signal(), Data()
        g3_dst = Data(acc_index_bits)
        m.d.sync += [g3_valid.eq(g2_valid), g3_last.eq(g2_last), g3_reset.eq(g2_reset),
                     g3_dst.eq(g2_dst)]

        g4_valid, g4_last, g4_reset = Signal(), Signal(), Data()
        g4_dst = Data(acc_index_bits)
        g4_a, g4_product, g_result = Data(acc_bits), Data(acc_bits), Signal(acc_bits)
        g5_valid, g5_dst, g5_result = Signal(), Data(acc_index_bits), Data(acc_bits)
        m.d.comb += [gemm.inp.eq(self.inp_read.data), gemm.wgt.eq(self.wgt_read.data)]
        m.d.sync += [
            g4_valid.eq(g3_valid), g4_last.eq(g3_last), g4_reset.eq(g3_reset), g4_dst.eq(g3_dst),
            g4_a.eq(Mux(g4_valid & (g4_dst == g3_dst), g_result,
                        Mux(g5_valid & (g5_dst == g3_dst), g5_result, acc_read_gemm.data))),
            g4_product.eq(gemm.product),
        ]
        accumulated = Cat(*((g4_a.word_select(e, scalar_bits)
                             + g4_product.word_select(e, scalar_bits))[:scalar_bits]
                            for e in range(scalars)))
        m.d.comb += g_result.eq(Mux(g4_reset, 0, accumulated))
        m.d.sync += [g5_valid.eq(g4_valid), g5_dst.eq(g4_dst), g5_result.eq(g_result)]
        m.d.comb += [
            acc_write_gemm.en.eq(g4_valid), acc_write_gemm.addr.eq(g4_dst),
            acc_write_gemm.data.eq(g_result),
            self.out_write.en.eq(g4_valid), self.out_write.addr.eq(g4_dst),
            self.out_write.data.eq(out_of_acc(config, g_result)),
            self.gemm_uop.eq(g4_valid),
        ]

        # ---------------------------------------------------------- ALU unit
        alu_seq = _LoopSequencer(m, config, "alu", head_alu, begin_alu, with_wgt=False)
        control = data.StructLayout({
            "op": len(head_alu.alu_op), "use_imm": 1, "reset": 1,
            "imm": SHIFT_MASK_BITS + 1,     # REQUANT's shift and relu bits
            "operand": scalar_bits,         # the immediate operand, sign extended
        })
        assert RELU_BIT == SHIFT_MASK_BITS
        a0 = Data(control)
        with m.If(begin_alu):
            # Latched sign extension: a register keeps Yosys from inlining the
            # extension bit by bit into the operand mux.
            m.d.sync += [
                a0.op.eq(head_alu.alu_op), a0.use_imm.eq(head_alu.use_imm),
                a0.reset.eq(head_alu.reset), a0.imm.eq(head_alu.imm[:SHIFT_MASK_BITS + 1]),
                a0.operand.eq(Mux(head_alu.alu_op == isa.AluOp.REQUANT, 0, head_alu.imm)),
            ]
        m.d.comb += [uop_read_alu.addr.eq(alu_seq.u), uop_read_alu.en.eq(alu_seq.valid)]

        a1_valid, a1_last, a1 = Signal(), Signal(), Data(control)
        a1_dst, a1_src = Data(acc_index_bits), Data(src_bits)
        m.d.sync += [a1_valid.eq(alu_seq.valid), a1_last.eq(alu_seq.last), a1.eq(a0),
                     a1_dst.eq(alu_seq.off["dst"]), a1_src.eq(alu_seq.off["src"])]
        a_uop = data.View(uop_layout(config), uop_read_alu.data[:uop_layout(config).size])
        a2_valid, a2_last, a2 = Signal(), Signal(), Data(control)
        a2_dst, a2_src = Data(acc_index_bits), Data(acc_index_bits)
        m.d.sync += [a2_valid.eq(a1_valid), a2_last.eq(a1_last), a2.eq(a1),
                     a2_dst.eq(a_uop.dst + a1_dst), a2_src.eq(a_uop.src + a1_src)]
        a_reads = a2_valid & ~a2.reset
        m.d.comb += [
            acc_read_alu_dst.addr.eq(a2_dst), acc_read_alu_dst.en.eq(a_reads),
            acc_read_alu_src.addr.eq(a2_src), acc_read_alu_src.en.eq(a_reads & ~a2.use_imm),
        ]
        a3_valid, a3_last, a3 = Signal(), Signal(), Data(control)
        a3_dst, a3_src = Data(acc_index_bits), Data(acc_index_bits)
        m.d.sync += [a3_valid.eq(a2_valid), a3_last.eq(a2_last), a3.eq(a2),
                     a3_dst.eq(a2_dst), a3_src.eq(a2_src)]

        a4_valid, a4_last, a4 = Signal(), Signal(), Data(control)
        a4_dst = Data(acc_index_bits)
        a4_a, a4_b, a_result = Data(acc_bits), Data(acc_bits), Signal(acc_bits)
        a5_valid, a5_dst, a5_result = Signal(), Data(acc_index_bits), Data(acc_bits)

        def alu_forwarded(index, sram_data):
            return Mux(a4_valid & (a4_dst == index), a_result,
                       Mux(a5_valid & (a5_dst == index), a5_result, sram_data))

        operand_vector = Cat(*([a3.operand] * scalars))
        m.d.sync += [
            a4_valid.eq(a3_valid), a4_last.eq(a3_last), a4.eq(a3), a4_dst.eq(a3_dst),
            a4_a.eq(alu_forwarded(a3_dst, acc_read_alu_dst.data)),
            a4_b.eq(Mux(a3.use_imm, operand_vector, alu_forwarded(a3_src, acc_read_alu_src.data))),
        ]
        m.d.comb += [alu.op.eq(a4.op), alu.a.eq(a4_a), alu.b.eq(a4_b), alu.imm.eq(a4.imm)]
        m.d.comb += a_result.eq(Mux(a4.reset, 0, alu.result))
        m.d.sync += [a5_valid.eq(a4_valid), a5_dst.eq(a4_dst), a5_result.eq(a_result)]
        m.d.comb += self.alu_uop.eq(a4_valid)
        # The ALU's write ports also take acc LOADs, which never run beside a unit.
        with m.If(a4_valid):
            m.d.comb += [
                acc_write_alu.en.eq(1), acc_write_alu.addr.eq(a4_dst),
                acc_write_alu.data.eq(a_result),
                self.out_write_alu.en.eq(1), self.out_write_alu.addr.eq(a4_dst),
                self.out_write_alu.data.eq(out_of_acc(config, a_result)),
            ]
        with m.Else():
            m.d.comb += [
                acc_write_alu.en.eq(loader.sram_acc.en),
                acc_write_alu.addr.eq(loader.sram_acc.addr),
                acc_write_alu.data.eq(loader.sram_acc.data),
                self.out_write_alu.en.eq(loader.sram_acc.en),
                self.out_write_alu.addr.eq(loader.sram_acc.addr),
                self.out_write_alu.data.eq(out_of_acc(config, loader.sram_acc.data)),
            ]

        # ---------------------------------------------------------- completion
        # Per unit: instructions issued and not completed (in flight), and
        # completed but not retired (done). An instruction completes when its
        # last micro-op (or marker) leaves S4.
        count_shape = range(RETIRE_QUEUE_DEPTH + 1)
        gemm_in_flight, alu_in_flight = Signal(count_shape), Signal(count_shape)
        gemm_done, alu_done = Signal(count_shape), Signal(count_shape)
        retire_gemm, retire_alu = Signal(), Signal()
        for in_flight, done, begin, completes, retires in (
                (gemm_in_flight, gemm_done, begin_gemm, g4_last, retire_gemm),
                (alu_in_flight, alu_done, begin_alu, a4_last, retire_alu)):
            with m.If(begin & ~completes):
                m.d.sync += in_flight.eq(in_flight + 1)
            with m.Elif(completes & ~begin):
                m.d.sync += in_flight.eq(in_flight - 1)
            with m.If(completes & ~retires):
                m.d.sync += done.eq(done + 1)
            with m.Elif(retires & ~completes):
                m.d.sync += done.eq(done - 1)
        m.d.comb += [self.gemm_busy.eq(gemm_in_flight != 0),
                     self.alu_busy.eq(alu_in_flight != 0)]

        # ---------------------------------------------------------- retire queue
        m.submodules.retire_queue = retire_queue = fifo.SyncFIFO(
            width=RETIRE_LAYOUT.size, depth=RETIRE_QUEUE_DEPTH)
        oldest = data.View(RETIRE_LAYOUT, retire_queue.r_data)
        oldest_done = Mux(oldest.alu, alu_done != 0, gemm_done != 0)
        oldest_pushes_ready = ((~oldest.push_prev | self.to_load.ready)
                               & (~oldest.push_next | self.to_store.ready))
        retire = Signal()
        m.d.comb += [
            retire.eq(retire_queue.r_rdy & oldest_done & oldest_pushes_ready),
            retire_queue.r_en.eq(retire),
            retire_gemm.eq(retire & ~oldest.alu), retire_alu.eq(retire & oldest.alu),
        ]
        entry = data.View(RETIRE_LAYOUT, retire_queue.w_data)
        m.d.comb += [entry.alu.eq(head_is_alu), entry.push_prev.eq(head_header.push_prev),
                     entry.push_next.eq(head_header.push_next)]

        # ---------------------------------------------------------- sequencing
        # The other instructions: latched, run alone, pushed from their own state.
        word = Signal(HwConfig.INSN_BITS)
        header, as_load = view(word, isa.Opcode.FINISH), view(word, isa.Opcode.LOAD)
        m.d.comb += loader.cmd.payload.eq(as_load)
        head_load = view(head, isa.Opcode.LOAD)
        ours = (head_load.memory_type == isa.MemType.UOP) | (head_load.memory_type == isa.MemType.ACC)
        pushes_ready = ((~header.push_prev | self.to_load.ready)
                        & (~header.push_next | self.to_store.ready))
        finished = Signal()
        retired = Signal(16)
        m.d.comb += [self.finished.eq(finished), self.retired.eq(retired)]
        gemm_can_issue = gemm_seq.ready & (head_overlap | (alu_in_flight == 0))
        alu_can_issue = alu_seq.ready & (head_overlap | (gemm_in_flight == 0))
        unit_ready = Mux(head_is_gemm, gemm_can_issue, alu_can_issue) & retire_queue.w_rdy
        to_load_valid, to_store_valid = Signal(), Signal()
        m.d.comb += [self.to_load.valid.eq(to_load_valid | (retire & oldest.push_prev)),
                     self.to_store.valid.eq(to_store_valid | (retire & oldest.push_next))]
        with m.If(retire):
            m.d.sync += retired.eq(retired + 1)
        with m.If(retire_queue.r_rdy & oldest_done & ~oldest_pushes_ready):
            m.d.comb += self.wait_token.eq(1)
        m.d.comb += self.busy.eq(self.gemm_busy | self.alu_busy)

        with m.FSM():
            with m.State("ISSUE"):
                with m.If(~finished & self.cmds.valid):
                    with m.If(~pops_ready):
                        m.d.comb += self.wait_token.eq(1)
                    with m.Elif(head_is_gemm | head_is_alu):
                        with m.If(unit_ready):
                            m.d.comb += [
                                self.cmds.ready.eq(1),
                                self.from_load.ready.eq(head_header.pop_prev),
                                self.from_store.ready.eq(head_header.pop_next),
                                begin_gemm.eq(head_is_gemm), begin_alu.eq(head_is_alu),
                                retire_queue.w_en.eq(1),
                            ]
                    with m.Elif(~retire_queue.r_rdy):
                        m.d.comb += [
                            self.cmds.ready.eq(1),
                            self.from_load.ready.eq(head_header.pop_prev),
                            self.from_store.ready.eq(head_header.pop_next),
                        ]
                        m.d.sync += word.eq(head)
                        with m.If((head_header.opcode == isa.Opcode.LOAD) & ours):
                            m.next = "LOAD"
                        with m.Else():
                            m.next = "PUSH"
                with m.Elif(~retire_queue.r_rdy):
                    m.d.comb += self.idle.eq(1)
            loader.run_states(m, self, "LOAD", "LOAD_WAIT", then="PUSH")
            with m.State("PUSH"):
                with m.If(pushes_ready):
                    # Both token queues are counters whose ready does not depend on
                    # valid, so offering only when all are ready pushes each once.
                    m.d.comb += [to_load_valid.eq(header.push_prev),
                                 to_store_valid.eq(header.push_next)]
                    m.d.sync += retired.eq(retired + 1)
                    with m.If(header.opcode == isa.Opcode.FINISH):
                        m.d.sync += finished.eq(1)
                    m.next = "ISSUE"
                with m.Else():
                    m.d.comb += self.wait_token.eq(1)
        return m
