"""The compute module: micro-op and accumulator SRAMs, GEMM core, vector ALU.

Instructions arrive in order on ``cmds``. For each one the module pops the
tokens it asks for (``pop_prev`` from load, ``pop_next`` from store), runs it,
and only after its last SRAM write pushes its tokens (``push_prev`` to load,
``push_next`` to store). FINISH sets ``finished`` and stops the module.

* LOAD of uop / acc runs on a `LoadEngine` (padded 2D DRAM reads, as on the
  load module). Every acc write also writes the out SRAM (low 8 bits of each
  element), including acc LOADs. A LOAD of another memory type only moves
  tokens.
* GEMM and ALU run one micro-op per cycle through a 5-stage pipeline that
  never stalls once a micro-op has entered it:

  ====  =====================================================================
  S0    loop counters (i, j, u) and index offsets; uop SRAM read of ``u``
  S1    uop word + offsets -> dst, src, wgt indices (registered)
  S2    SRAM reads: acc[dst], acc[src] (ALU), inp[src], wgt[wgt] (GEMM)
  S3    read data; acc operands forwarded from S4 / S5; GEMM dot products;
        operands registered
  S4    result = acc + product, ALU op, or 0 (reset); acc[dst] and
        out[dst] written
  ====  =====================================================================

  Read-after-write hazards on acc: a micro-op reading acc in S2 does not see
  the write of the micro-op in S4 that same cycle (SRAM ports are not
  transparent) nor that of the one in S3 behind it. S3 therefore takes the
  result being written in S4 this cycle, else the one written last cycle (S5),
  else the SRAM data: back-to-back micro-ops on the same acc row run at full
  rate. inp and wgt are never written by compute. The pipeline drains
  (at most four cycles) at the end of each GEMM / ALU instruction, so every
  instruction's writes are complete before its tokens are pushed and before
  the next instruction (possibly an acc LOAD) starts.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from hw import isa
from hw.alu import VectorAlu
from hw.config import HwConfig
from hw.gemm import GemmCore
from hw.layouts import (MemReadSignature, TokenSignature, instruction_layout,
                        sram_read_signature, sram_write_signature, uop_layout)
from hw.load import LoadEngine

__all__ = ["Compute"]


def out_of_acc(config: HwConfig, acc_value):
    """The out element mirroring an acc element: the low bits of every scalar."""
    acc_bits, out_bits = config.element_bits("acc"), config.element_bits("out")
    count = config.batch * config.block_out
    return Cat(*(acc_value.word_select(e, acc_bits)[:out_bits] for e in range(count)))


class Compute(wiring.Component):
    """The compute module.

    Ports
    -----
    cmds : In(stream of instruction words)
    from_load, from_store : In(token stream)
    to_load, to_store : Out(token stream)
    mem_uop, mem_acc : Out(MemReadSignature)
    inp_read, wgt_read : In(SRAM read port signature)
    out_write : In(SRAM write port signature)
    finished : Out(1)
        FINISH retired (sticky until reset).
    busy, wait_token, wait_mem, idle, gemm_uop, alu_uop : Out(1)
        Counter events (``gemm_uop`` / ``alu_uop`` pulse per executed micro-op).
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
            "finished": Out(1),
            "busy": Out(1), "wait_token": Out(1), "wait_mem": Out(1), "idle": Out(1),
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

        # ---------------------------------------------------------- SRAMs
        m.submodules.uop_mem = uop_mem = memory.Memory(
            shape=HwConfig.UOP_BITS, depth=config.depth("uop"), init=[])
        m.submodules.acc_mem = acc_mem = memory.Memory(
            shape=acc_bits, depth=config.depth("acc"), init=[])
        uop_read = uop_mem.read_port(transparent_for=())
        uop_write = uop_mem.write_port()
        acc_read_dst = acc_mem.read_port(transparent_for=())
        acc_read_src = acc_mem.read_port(transparent_for=())
        acc_write = acc_mem.write_port()

        m.submodules.loader = loader = LoadEngine(config, ("uop", "acc"))
        connect(m, loader.mem_uop, flipped(self.mem_uop))
        connect(m, loader.mem_acc, flipped(self.mem_acc))
        connect(m, loader.sram_uop, uop_write)

        m.submodules.gemm = gemm = GemmCore(config)
        m.submodules.alu = alu = VectorAlu(config)

        # ---------------------------------------------------------- decode
        word = Signal(HwConfig.INSN_BITS)
        header = data.View(instruction_layout(config, isa.Opcode.FINISH),
                           word[:instruction_layout(config, isa.Opcode.FINISH).size])
        as_load = data.View(instruction_layout(config, isa.Opcode.LOAD),
                            word[:instruction_layout(config, isa.Opcode.LOAD).size])
        as_gemm = data.View(instruction_layout(config, isa.Opcode.GEMM),
                            word[:instruction_layout(config, isa.Opcode.GEMM).size])
        as_alu = data.View(instruction_layout(config, isa.Opcode.ALU),
                           word[:instruction_layout(config, isa.Opcode.ALU).size])
        # The loop fields are the same in the GEMM and ALU formats (a shared prefix).
        gemm_offsets = isa.field_offsets(isa.formats(config)[isa.Opcode.GEMM])
        alu_offsets = isa.field_offsets(isa.formats(config)[isa.Opcode.ALU])
        for name in ("reset", "uop_begin", "uop_end", "iter_out", "iter_in", "dst_factor_out",
                     "dst_factor_in", "src_factor_out", "src_factor_in"):
            assert gemm_offsets[name] == alu_offsets[name], name
        loops = as_gemm
        is_alu = Signal()
        m.d.comb += is_alu.eq(header.opcode == isa.Opcode.ALU)
        m.d.comb += loader.cmd.payload.eq(as_load)

        # ---------------------------------------------------------- S0: loops
        uop_index_bits = config.index_bits("uop") + 1
        src_bits, wgt_bits = config.uop_src_bits, config.wgt_index_bits
        issuing = Signal()
        u = Signal(uop_index_bits)
        i = Signal(len(loops.iter_out))
        j = Signal(len(loops.iter_in))
        outer_dst, outer_src, outer_wgt = (Signal(acc_index_bits), Signal(src_bits),
                                           Signal(wgt_bits))
        off_dst, off_src, off_wgt = Signal(acc_index_bits), Signal(src_bits), Signal(wgt_bits)
        begin_loops = Signal()      # pulse: initialise the loop counters
        with m.If(begin_loops):
            m.d.sync += [
                u.eq(loops.uop_begin), i.eq(0), j.eq(0),
                outer_dst.eq(0), outer_src.eq(0), outer_wgt.eq(0),
                off_dst.eq(0), off_src.eq(0), off_wgt.eq(0),
                issuing.eq((loops.iter_out != 0) & (loops.iter_in != 0)
                           & (loops.uop_end > loops.uop_begin)),
            ]
        with m.If(issuing):
            with m.If(u == loops.uop_end - 1):
                m.d.sync += u.eq(loops.uop_begin)
                with m.If(j == loops.iter_in - 1):
                    next_dst = outer_dst + loops.dst_factor_out
                    next_src = outer_src + loops.src_factor_out
                    next_wgt = outer_wgt + as_gemm.wgt_factor_out
                    m.d.sync += [
                        j.eq(0), i.eq(i + 1),
                        outer_dst.eq(next_dst), outer_src.eq(next_src),
                        outer_wgt.eq(next_wgt),
                        off_dst.eq(next_dst), off_src.eq(next_src), off_wgt.eq(next_wgt),
                    ]
                    with m.If(i == loops.iter_out - 1):
                        m.d.sync += issuing.eq(0)
                with m.Else():
                    m.d.sync += [
                        j.eq(j + 1),
                        off_dst.eq(off_dst + loops.dst_factor_in),
                        off_src.eq(off_src + loops.src_factor_in),
                        off_wgt.eq(off_wgt + as_gemm.wgt_factor_in),
                    ]
            with m.Else():
                m.d.sync += u.eq(u + 1)
        m.d.comb += [uop_read.addr.eq(u), uop_read.en.eq(issuing)]

        # ---------------------------------------------------------- S1: indices
        s1_valid = Signal()
        s1_dst, s1_src, s1_wgt = Signal(acc_index_bits), Signal(src_bits), Signal(wgt_bits)
        m.d.sync += [s1_valid.eq(issuing), s1_dst.eq(off_dst), s1_src.eq(off_src),
                     s1_wgt.eq(off_wgt)]
        uop = data.View(uop_layout(config), uop_read.data[:uop_layout(config).size])
        s2_valid = Signal()
        s2_dst, s2_src, s2_wgt = Signal(acc_index_bits), Signal(src_bits), Signal(wgt_bits)
        m.d.sync += [
            s2_valid.eq(s1_valid),
            s2_dst.eq(uop.dst + s1_dst),
            s2_src.eq(uop.src + s1_src),
            s2_wgt.eq(uop.wgt + s1_wgt),
        ]

        # ---------------------------------------------------------- S2: reads
        m.d.comb += [
            # Reads only for a micro-op in S2 (S3 ignores the data otherwise):
            # idle cycles copy no wide SRAM words in simulation.
            acc_read_dst.addr.eq(s2_dst), acc_read_dst.en.eq(s2_valid),
            acc_read_src.addr.eq(s2_src), acc_read_src.en.eq(s2_valid & is_alu & ~as_alu.use_imm),
            self.inp_read.addr.eq(s2_src), self.inp_read.en.eq(s2_valid & ~is_alu),
            self.wgt_read.addr.eq(s2_wgt), self.wgt_read.en.eq(s2_valid & ~is_alu),
        ]
        s3_valid = Signal()
        s3_dst, s3_src = Signal(acc_index_bits), Signal(acc_index_bits)
        m.d.sync += [s3_valid.eq(s2_valid), s3_dst.eq(s2_dst), s3_src.eq(s2_src)]

        # ---------------------------------------------------------- S3: operands
        s4_valid = Signal()
        s4_dst = Signal(acc_index_bits)
        s4_a, s4_b, s4_product = Signal(acc_bits), Signal(acc_bits), Signal(acc_bits)
        result = Signal(acc_bits)
        s5_valid = Signal()
        s5_dst = Signal(acc_index_bits)
        s5_result = Signal(acc_bits)

        def forwarded(index, sram_data):
            return Mux(s4_valid & (s4_dst == index), result,
                       Mux(s5_valid & (s5_dst == index), s5_result, sram_data))

        # The immediate, sign extended, is latched when the loops begin (a register
        # keeps Yosys from inlining the extension bit by bit into the operand mux).
        imm = Signal(scalar_bits)
        with m.If(begin_loops):
            m.d.sync += imm.eq(as_alu.imm)
        imm_vector = Cat(*([imm] * scalars))
        m.d.comb += [gemm.inp.eq(self.inp_read.data), gemm.wgt.eq(self.wgt_read.data)]
        m.d.sync += [
            s4_valid.eq(s3_valid),
            s4_dst.eq(s3_dst),
            s4_a.eq(forwarded(s3_dst, acc_read_dst.data)),
            s4_b.eq(Mux(as_alu.use_imm, imm_vector, forwarded(s3_src, acc_read_src.data))),
            s4_product.eq(gemm.product),
        ]

        # ---------------------------------------------------------- S4: write back
        m.d.comb += [alu.op.eq(as_alu.alu_op), alu.a.eq(s4_a), alu.b.eq(s4_b)]
        accumulated = Cat(*((s4_a.word_select(e, scalar_bits) + s4_product.word_select(e, scalar_bits))
                            [:scalar_bits] for e in range(scalars)))
        # reset zeroes acc[dst] for GEMM and ALU alike (as the functional simulator).
        with m.If(loops.reset):
            m.d.comb += result.eq(0)
        with m.Elif(is_alu):
            m.d.comb += result.eq(alu.result)
        with m.Else():
            m.d.comb += result.eq(accumulated)
        m.d.sync += [s5_valid.eq(s4_valid), s5_dst.eq(s4_dst), s5_result.eq(result)]
        m.d.comb += [self.gemm_uop.eq(s4_valid & ~is_alu), self.alu_uop.eq(s4_valid & is_alu)]

        # acc / out writes: the pipeline, or an acc LOAD (never both at once).
        with m.If(s4_valid):
            m.d.comb += [
                acc_write.en.eq(1), acc_write.addr.eq(s4_dst), acc_write.data.eq(result),
                self.out_write.en.eq(1), self.out_write.addr.eq(s4_dst),
                self.out_write.data.eq(out_of_acc(config, result)),
            ]
        with m.Else():
            m.d.comb += [
                acc_write.en.eq(loader.sram_acc.en),
                acc_write.addr.eq(loader.sram_acc.addr),
                acc_write.data.eq(loader.sram_acc.data),
                self.out_write.en.eq(loader.sram_acc.en),
                self.out_write.addr.eq(loader.sram_acc.addr),
                self.out_write.data.eq(out_of_acc(config, loader.sram_acc.data)),
            ]
        pipeline_empty = ~(issuing | s1_valid | s2_valid | s3_valid | s4_valid)

        # ---------------------------------------------------------- sequencing
        finished = Signal()
        retired = Signal(16)
        m.d.comb += [self.finished.eq(finished), self.retired.eq(retired)]
        pops_ready = ((~header.pop_prev | self.from_load.valid)
                      & (~header.pop_next | self.from_store.valid))
        pushes_ready = ((~header.push_prev | self.to_load.ready)
                        & (~header.push_next | self.to_store.ready))
        ours = (as_load.memory_type == isa.MemType.UOP) | (as_load.memory_type == isa.MemType.ACC)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [self.cmds.ready.eq(~finished), self.idle.eq(1)]
                with m.If(self.cmds.valid & ~finished):
                    m.d.sync += word.eq(self.cmds.payload)
                    m.next = "POP"
            with m.State("POP"):
                with m.If(pops_ready):
                    m.d.comb += [self.from_load.ready.eq(header.pop_prev),
                                 self.from_store.ready.eq(header.pop_next)]
                    with m.Switch(header.opcode):
                        with m.Case(isa.Opcode.LOAD):
                            with m.If(ours):
                                m.next = "LOAD"
                            with m.Else():
                                m.next = "PUSH"
                        with m.Case(isa.Opcode.GEMM, isa.Opcode.ALU):
                            m.d.comb += begin_loops.eq(1)
                            m.next = "RUN"
                        with m.Default():
                            m.next = "PUSH"
                with m.Else():
                    m.d.comb += self.wait_token.eq(1)
            with m.State("LOAD"):
                m.d.comb += [self.busy.eq(1), loader.cmd.valid.eq(1)]
                with m.If(loader.cmd.ready):
                    m.next = "LOAD_WAIT"
            with m.State("LOAD_WAIT"):
                m.d.comb += [self.busy.eq(1), self.wait_mem.eq(loader.waiting)]
                with m.If(~loader.busy):
                    m.next = "PUSH"
            with m.State("RUN"):
                m.d.comb += self.busy.eq(1)
                with m.If(pipeline_empty):
                    m.next = "PUSH"
            with m.State("PUSH"):
                with m.If(pushes_ready):
                    # Both token queues are counters whose ready does not depend on
                    # valid, so offering only when all are ready pushes each once.
                    m.d.comb += [self.to_load.valid.eq(header.push_prev),
                                 self.to_store.valid.eq(header.push_next)]
                    m.d.sync += retired.eq(retired + 1)
                    with m.If(header.opcode == isa.Opcode.FINISH):
                        m.d.sync += finished.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += self.wait_token.eq(1)
        return m
