"""The compute module: micro-op and accumulator SRAMs, a GEMM unit and an ALU unit.

Instructions arrive in order on ``cmds``; an in-order front end issues them.

* GEMM and ALU instructions go to their unit: two independent pipelines, each
  taking one micro-op per cycle, that run at the same time. An instruction
  issues when its unit's loop sequencer is free (in the cycle its previous
  instruction sends its last micro-op, so a unit's instructions follow each
  other without a bubble or a drain) and once the *other* unit has completed
  everything it was given -- with ``overlap`` set, everything but its newest
  instruction. Instructions of its own unit need no wait: its pipeline keeps
  their order and forwards results. But the ISA lets an ``overlap`` instruction
  start only once its own unit's earlier ones have completed, and issues in
  program order, so whatever follows the other unit's newest instruction is
  ordered after the completion of all that unit's older ones, which the
  pipelined issue alone does not give (a GEMM still writing its last rows
  while the next GEMM has issued, and an ALU ``overlap`` instruction after it
  reading them). Its tokens are popped as it issues, and an entry
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

Each unit is a `UnitPipeline` (stages, pacing and forwarding are described
there); it never stalls once a micro-op has entered it.

SRAM ports -- every memory is block RAMs with one read and one write port:
uop -- one copy per unit (each read by its unit every cycle), both written by
uop LOADs; acc -- `BankedMemory` of ``HwConfig.acc_banks`` banks, logical
read ports GEMM dst, ALU dst and ALU src, write ports GEMM and ALU (the ALU's
also serves acc LOADs, which never run beside a unit); out -- banked like acc
in the accelerator top, written through ``out_write`` (GEMM) and
``out_write_alu`` (ALU and acc LOADs), read by store. The units never meet on a
bank's port: an instruction with ``overlap`` may run beside the other unit
only on other acc banks (the ISA's bank rule, checked by the functional
simulator), and an ALU micro-op reads its two acc operands in two cycles.

Between the units nothing is forwarded: an instruction without ``overlap``
issues only when the other unit is empty, so its first read (two cycles after
issue) sees every earlier write, and instructions that do overlap must not
touch the same acc / out rows where either writes them, nor the same acc bank
(the ISA leaves that to the program). inp and wgt are never written by
compute.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from vdla.hw import isa
from vdla.hw.banked_memory import BankedMemory, collision_attrs
from vdla.hw.config import HwConfig
from vdla.hw.layouts import (MemReadSignature, TokenSignature, instruction_layout,
                        sram_read_signature, sram_write_signature)
from vdla.hw.load import LoadEngine, engine_port_signature, padded_nonempty, run_load
from vdla.hw.unit_pipeline import out_of_acc, unit_variant

__all__ = ["Compute", "InFlight", "RegisteredInFlight", "RETIRE_QUEUE_DEPTH"]

# Issued GEMM / ALU instructions not yet retired. Each unit holds at most a few
# in its pipeline at once (one per stage), so 8 rarely stalls issue.
RETIRE_QUEUE_DEPTH = 8

RETIRE_LAYOUT = data.StructLayout({"alu": 1, "push_prev": 1, "push_next": 1})


class InFlight:
    """Whether a unit has no instruction in flight (``none``) or at most one (``one``),
    compared with its count (``in_flight``); `issued` and `completed` are the
    statements that keep them as the count moves (none here)."""

    def __init__(self, unit: str, in_flight: Signal):
        self.none, self.one = in_flight == 0, in_flight <= 1

    def issued(self) -> list:
        return []

    def completed(self) -> list:
        return []


class RegisteredInFlight(InFlight):
    """``registered_dispatch``: ``none`` and ``one`` kept in registers beside the
    count, so the issue reads no comparator."""

    def __init__(self, unit: str, in_flight: Signal):
        self.in_flight = in_flight
        self.none = Signal(init=1, name=f"{unit}_none_in_flight")
        self.one = Signal(init=1, name=f"{unit}_one_in_flight")

    def issued(self):
        return [self.none.eq(0), self.one.eq(self.none)]

    def completed(self):
        return [self.none.eq(self.in_flight == 1), self.one.eq(self.in_flight <= 2)]


class Compute(wiring.Component):
    """The compute module.

    Ports
    -----
    cmds : In(stream of instruction words)
    from_load, from_store : In(token stream)
    to_load, to_store : Out(token stream)
    mem_uop, mem_acc : Out(MemReadSignature)
        Without ``shared_load_engine``; with it, instead:
    engine : Out(engine_port_signature)
        Its uop / acc LOADs, to the accelerator's `hw.load.SharedLoadEngine`,
    sram_uop, sram_acc : Out(SRAM write port signature)
        whose writes of the uop and acc buffers come back on these.
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
        self.in_flight_kind = RegisteredInFlight if config.registered_dispatch else InFlight
        if config.shared_load_engine:
            loads = {"engine": Out(engine_port_signature(config)),
                     "sram_uop": Out(sram_write_signature(config, "uop")),
                     "sram_acc": Out(sram_write_signature(config, "acc"))}
        else:
            loads = {"mem_uop": Out(MemReadSignature(config.dram_bus_bits)),
                     "mem_acc": Out(MemReadSignature(config.dram_bus_bits))}
        super().__init__({
            "cmds": In(stream.Signature(HwConfig.INSN_BITS)),
            "from_load": In(TokenSignature),
            "to_load": Out(TokenSignature),
            "from_store": In(TokenSignature),
            "to_store": Out(TokenSignature),
            **loads,
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

        # ---------------------------------------------------------- SRAMs
        # Every memory is block RAMs with one read and one write port. Each unit
        # reads micro-ops every cycle, so each has its own copy of the uop
        # buffer (uop LOADs write both). acc is banked (`BankedMemory`): logical
        # read ports GEMM dst, ALU dst, ALU src; write ports GEMM, ALU / acc LOAD.
        uop_mems = {}
        for unit in ("gemm", "alu"):
            uop_mems[unit] = memory.Memory(shape=HwConfig.UOP_BITS, depth=config.depth("uop"),
                                           init=[], attrs=collision_attrs(config))
            m.submodules[f"uop_mem_{unit}"] = uop_mems[unit]
        uop_read_gemm = uop_mems["gemm"].read_port(transparent_for=())
        uop_read_alu = uop_mems["alu"].read_port(transparent_for=())
        uop_writes = [uop_mems[unit].write_port() for unit in ("gemm", "alu")]
        m.submodules.acc_mem = acc_mem = BankedMemory(
            acc_bits, config.depth("acc"), config.acc_banks, read_ports=3, write_ports=2,
            attrs=collision_attrs(config))
        acc_read_gemm, acc_read_alu_dst, acc_read_alu_src = acc_mem.read
        acc_write_gemm, acc_write_alu = acc_mem.write

        if config.shared_load_engine:
            loader, sram_uop, sram_acc = self.engine, self.sram_uop, self.sram_acc
        else:
            m.submodules.loader = loader = LoadEngine(config, ("uop", "acc"))
            connect(m, loader.mem_uop, flipped(self.mem_uop))
            connect(m, loader.mem_acc, flipped(self.mem_acc))
            sram_uop, sram_acc = loader.sram_uop, loader.sram_acc
        for uop_write in uop_writes:
            m.d.comb += [uop_write.en.eq(sram_uop.en),
                         uop_write.addr.eq(sram_uop.addr),
                         uop_write.data.eq(sram_uop.data)]

        m.submodules.gemm = gemm = unit_variant(config, "gemm")(config)
        m.submodules.alu = alu = unit_variant(config, "alu")(config)
        begin_gemm, begin_alu = gemm.begin, alu.begin

        def view(word, opcode):
            layout = instruction_layout(config, opcode)
            return data.View(layout, word[:layout.size])

        # ---------------------------------------------------------- front end decode
        head = self.cmds.payload
        head_header = view(head, isa.Opcode.FINISH)
        head_gemm, head_alu = view(head, isa.Opcode.GEMM), view(head, isa.Opcode.ALU)
        head_is_gemm = head_header.opcode == isa.Opcode.GEMM
        head_is_alu = head_header.opcode == isa.Opcode.ALU
        head_load = view(head, isa.Opcode.LOAD)
        head_pop_prev, head_pop_next = head_header.pop_prev, head_header.pop_next
        head_is_ours = (head_header.opcode == isa.Opcode.LOAD) & (
            (head_load.memory_type == isa.MemType.UOP) | (head_load.memory_type == isa.MemType.ACC))
        if config.decodes_in_place and config.cmd_queue_depth == 0:
            # The offered word's first beat has settled a cycle or more before it is
            # offered (`hw.fetch`): decoded into registers, the issue waits on no decoder.
            decoded = [Signal(name=f"head_{name}") for name in
                       ("is_gemm", "is_alu", "pop_prev", "pop_next", "is_ours")]
            m.d.sync += [register.eq(value) for register, value in zip(
                decoded, (head_is_gemm, head_is_alu, head_pop_prev, head_pop_next, head_is_ours))]
            head_is_gemm, head_is_alu, head_pop_prev, head_pop_next, head_is_ours = decoded
        head_overlap = Mux(head_is_gemm, head_gemm.overlap, head_alu.overlap)
        pops_ready = ((~head_pop_prev | self.from_load.valid)
                      & (~head_pop_next | self.from_store.valid))
        m.d.comb += [gemm.insn.eq(head), alu.insn.eq(head)]

        # ---------------------------------------------------------- units and SRAM ports
        connect(m, gemm.uop_read, uop_read_gemm)
        connect(m, alu.uop_read, uop_read_alu)
        connect(m, gemm.acc_read, acc_read_gemm)
        connect(m, alu.acc_read, acc_read_alu_dst)
        connect(m, alu.acc_src_read, acc_read_alu_src)
        connect(m, gemm.inp_read, flipped(self.inp_read))
        connect(m, gemm.wgt_read, flipped(self.wgt_read))
        connect(m, gemm.acc_write, acc_write_gemm)
        connect(m, gemm.out_write, flipped(self.out_write))
        m.d.comb += [self.gemm_uop.eq(gemm.executes), self.alu_uop.eq(alu.executes)]
        # The ALU's write ports also take acc LOADs, which never run beside a unit.
        with m.If(alu.acc_write.en):
            m.d.comb += [
                acc_write_alu.en.eq(1), acc_write_alu.addr.eq(alu.acc_write.addr),
                acc_write_alu.data.eq(alu.acc_write.data),
                self.out_write_alu.en.eq(1), self.out_write_alu.addr.eq(alu.out_write.addr),
                self.out_write_alu.data.eq(alu.out_write.data),
            ]
        with m.Else():
            m.d.comb += [
                acc_write_alu.en.eq(sram_acc.en),
                acc_write_alu.addr.eq(sram_acc.addr),
                acc_write_alu.data.eq(sram_acc.data),
                self.out_write_alu.en.eq(sram_acc.en),
                self.out_write_alu.addr.eq(sram_acc.addr),
                self.out_write_alu.data.eq(out_of_acc(config, sram_acc.data)),
            ]

        # ---------------------------------------------------------- completion
        # Per unit: instructions issued and not completed (in flight), and
        # completed but not retired (done). An instruction completes when its
        # last micro-op (or marker) leaves S4.
        count_shape = range(RETIRE_QUEUE_DEPTH + 1)
        gemm_in_flight, alu_in_flight = Signal(count_shape), Signal(count_shape)
        gemm_done, alu_done = Signal(count_shape), Signal(count_shape)
        retire_gemm, retire_alu = Signal(), Signal()
        # Whether each unit has none / at most one instruction in flight.
        in_flight_at_most = {}
        for unit, in_flight, done, begin, completes, retires in (
                ("gemm", gemm_in_flight, gemm_done, begin_gemm, gemm.completes, retire_gemm),
                ("alu", alu_in_flight, alu_done, begin_alu, alu.completes, retire_alu)):
            in_flight_at_most[unit] = at_most = self.in_flight_kind(unit, in_flight)
            with m.If(begin & ~completes):
                m.d.sync += [in_flight.eq(in_flight + 1)] + at_most.issued()
            with m.Elif(completes & ~begin):
                m.d.sync += [in_flight.eq(in_flight - 1)] + at_most.completed()
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
        if config.registered_load_walk:
            load_nonempty = Signal()   # of the LOAD in `word`, decoded as it is latched
            m.d.comb += loader.nonempty.eq(load_nonempty)
        pushes_ready = ((~header.push_prev | self.to_load.ready)
                        & (~header.push_next | self.to_store.ready))
        finished = Signal()
        retired = Signal(16)
        m.d.comb += [self.finished.eq(finished), self.retired.eq(retired)]
        # The other unit must have completed everything it was given, or with
        # overlap everything but its newest instruction (see the module docstring).
        alu_none, alu_one = in_flight_at_most["alu"].none, in_flight_at_most["alu"].one
        gemm_none, gemm_one = in_flight_at_most["gemm"].none, in_flight_at_most["gemm"].one
        if config.registered_dispatch:
            # Each unit's condition from registers and its own overlap bit, then the
            # decoded unit's: a shallow tree (`HwConfig.registered_dispatch`).
            gemm_can_issue = gemm.ready & Mux(head_gemm.overlap, alu_one, alu_none)
            alu_can_issue = alu.ready & Mux(head_alu.overlap, gemm_one, gemm_none)
            unit_ready = (((head_is_gemm & gemm_can_issue) | (head_is_alu & alu_can_issue))
                          & retire_queue.w_rdy)
        else:
            gemm_can_issue = gemm.ready & Mux(head_overlap, alu_one, alu_none)
            alu_can_issue = alu.ready & Mux(head_overlap, gemm_one, gemm_none)
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
                                self.from_load.ready.eq(head_pop_prev),
                                self.from_store.ready.eq(head_pop_next),
                                begin_gemm.eq(head_is_gemm), begin_alu.eq(head_is_alu),
                                retire_queue.w_en.eq(1),
                            ]
                    with m.Elif(~retire_queue.r_rdy):
                        m.d.comb += [
                            self.cmds.ready.eq(1),
                            self.from_load.ready.eq(head_pop_prev),
                            self.from_store.ready.eq(head_pop_next),
                        ]
                        m.d.sync += word.eq(head)
                        if config.registered_load_walk:
                            m.d.sync += load_nonempty.eq(padded_nonempty(head_load))
                        with m.If(head_is_ours):
                            m.next = "LOAD"
                        with m.Else():
                            m.next = "PUSH"
                with m.Elif(~retire_queue.r_rdy):
                    m.d.comb += self.idle.eq(1)
            run_load(m, loader, self, "LOAD", "LOAD_WAIT", then="PUSH")
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
