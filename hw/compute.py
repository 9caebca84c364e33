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
from vdla.hw.load import EnginePortSignature, LoadEngine, padded_nonempty, run_load
from vdla.hw.unit_pipeline import UNITS, out_of_acc, unit_variant

__all__ = ["Compute", "ComputeSignature", "InFlight", "RegisteredInFlight", "RETIRE_QUEUE_DEPTH"]

# Issued GEMM / ALU instructions not yet retired. Each unit holds at most a few
# in its pipeline at once (one per stage), so 8 rarely stalls issue.
RETIRE_QUEUE_DEPTH = 8

RETIRE_LAYOUT = data.StructLayout({"alu": 1, "push_prev": 1, "push_next": 1})


def _view(config: HwConfig, word, opcode: isa.Opcode) -> data.View:
    """``word`` seen as an instruction of ``opcode``'s format."""
    layout = instruction_layout(config, opcode)
    return data.View(layout, word[:layout.size])


class _OwnLoads:
    """uop / acc LOADs on a `LoadEngine` of compute's own (a submodule), whose DRAM
    read ports are compute's ``mem_uop`` and ``mem_acc``; `members` are the ports,
    `build` returns the engine and its uop and acc SRAM writes."""

    @staticmethod
    def members(config: HwConfig) -> dict:
        return {"mem_uop": Out(MemReadSignature(config.dram_bus_bits)),
                "mem_acc": Out(MemReadSignature(config.dram_bus_bits))}

    @staticmethod
    def build(m: Module, compute: "Compute"):
        m.submodules.loader = loader = LoadEngine(compute.config, ("uop", "acc"))
        connect(m, loader.mem_uop, flipped(compute.mem_uop))
        connect(m, loader.mem_acc, flipped(compute.mem_acc))
        return loader, loader.sram_uop, loader.sram_acc


class _SharedLoads(_OwnLoads):
    """``shared_load_engine``: uop / acc LOADs offered on ``engine`` to the accelerator's
    `hw.load.SharedLoadEngine`, whose writes of the uop and acc buffers come back on
    ``sram_uop`` and ``sram_acc``."""

    @staticmethod
    def members(config: HwConfig) -> dict:
        return {"engine": Out(EnginePortSignature(config)),
                "sram_uop": Out(sram_write_signature(config, "uop")),
                "sram_acc": Out(sram_write_signature(config, "acc"))}

    @staticmethod
    def build(m: Module, compute: "Compute"):
        return compute.engine, compute.sram_uop, compute.sram_acc


def _loads_variant(config: HwConfig) -> type[_OwnLoads]:
    return _SharedLoads if config.shared_load_engine else _OwnLoads


class ComputeSignature(wiring.Signature):
    """The compute module's ports, described in `Compute`; its LOAD ports are those of
    the variant ``config.shared_load_engine`` chooses (`_OwnLoads`, `_SharedLoads`)."""

    def __init__(self, config: HwConfig):
        super().__init__({
            "cmds": In(stream.Signature(HwConfig.INSN_BITS)),
            "from_load": In(TokenSignature),
            "to_load": Out(TokenSignature),
            "from_store": In(TokenSignature),
            "to_store": Out(TokenSignature),
            **_loads_variant(config).members(config),
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

    @staticmethod
    def may_issue(head: "_Head", gemm, alu, at_most: dict[str, "InFlight"]):
        """Whether the unit of ``head`` can take it: its sequencer is ready and the other
        unit (``at_most``: each unit's `InFlight`) has completed everything it was
        given, or with ``overlap`` everything but its newest instruction (see the
        module docstring)."""
        overlap = Mux(head.is_gemm, head.gemm.overlap, head.alu.overlap)
        gemm_can_issue = gemm.ready & Mux(overlap, at_most["alu"].one, at_most["alu"].none)
        alu_can_issue = alu.ready & Mux(overlap, at_most["gemm"].one, at_most["gemm"].none)
        return Mux(head.is_gemm, gemm_can_issue, alu_can_issue)


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

    @staticmethod
    def may_issue(head, gemm, alu, at_most):
        """As `InFlight.may_issue`, as a shallow tree: each unit's condition from
        registers and its own overlap bit, then the decoded unit's."""
        gemm_can_issue = gemm.ready & Mux(head.gemm.overlap, at_most["alu"].one,
                                          at_most["alu"].none)
        alu_can_issue = alu.ready & Mux(head.alu.overlap, at_most["gemm"].one,
                                        at_most["gemm"].none)
        return (head.is_gemm & gemm_can_issue) | (head.is_alu & alu_can_issue)


class _Head:
    """The instruction ``word`` that ``cmds`` offers, decoded for the issue: its unit
    (``is_gemm``, ``is_alu``), the tokens it pops, and whether it is a LOAD compute
    runs (``is_ours``: of uop or acc)."""

    def __init__(self, m: Module, config: HwConfig, word):
        self.word = word
        self.header = header = _view(config, word, isa.Opcode.FINISH)
        self.gemm = _view(config, word, isa.Opcode.GEMM)
        self.alu = _view(config, word, isa.Opcode.ALU)
        self.load = load = _view(config, word, isa.Opcode.LOAD)
        self.is_gemm = ((header.opcode == isa.Opcode.GEMM)
                        | (header.opcode == isa.Opcode.GEMM_OVERWRITE))
        self.is_alu = header.opcode == isa.Opcode.ALU
        self.pop_prev, self.pop_next = header.pop_prev, header.pop_next
        self.is_ours = (header.opcode == isa.Opcode.LOAD) & (
            (load.memory_type == isa.MemType.UOP) | (load.memory_type == isa.MemType.ACC))


class _RegisteredHead(_Head):
    """Without command queues, where fetch decodes in place (`HwConfig.decodes_in_place`):
    the offered word's first beat has settled a cycle or more before it is offered
    (`hw.fetch`), so decoded into registers every cycle, the issue waits on no decoder."""

    def __init__(self, m, config, word):
        super().__init__(m, config, word)
        decoded = [Signal(name=f"head_{name}") for name in
                   ("is_gemm", "is_alu", "pop_prev", "pop_next", "is_ours")]
        m.d.sync += [register.eq(value) for register, value in zip(
            decoded, (self.is_gemm, self.is_alu, self.pop_prev, self.pop_next, self.is_ours))]
        self.is_gemm, self.is_alu, self.pop_prev, self.pop_next, self.is_ours = decoded


def _head_variant(config: HwConfig) -> type[_Head]:
    return _RegisteredHead if config.decodes_in_place and config.cmd_queue_depth == 0 else _Head


class _Buffers:
    """Compute's SRAMs, built into its module. Every memory is block RAMs with one read
    and one write port. Each unit reads micro-ops every cycle, so each has its own
    copy of the uop buffer (``uop_read[unit]``; uop LOADs write both through
    ``uop_writes``). acc is banked (`BankedMemory`): logical read ports GEMM dst,
    ALU dst, ALU src; write ports GEMM, ALU / acc LOAD."""

    def __init__(self, m: Module, config: HwConfig):
        uop_mems = {}
        for unit in UNITS:
            uop_mems[unit] = memory.Memory(shape=HwConfig.UOP_BITS, depth=config.depth("uop"),
                                           init=[], attrs=collision_attrs(config))
            m.submodules[f"uop_mem_{unit}"] = uop_mems[unit]
        uop_read_gemm = uop_mems["gemm"].read_port(transparent_for=())
        uop_read_alu = uop_mems["alu"].read_port(transparent_for=())
        self.uop_read = {"gemm": uop_read_gemm, "alu": uop_read_alu}
        self.uop_writes = [uop_mems[unit].write_port() for unit in UNITS]
        m.submodules.acc_mem = acc_mem = BankedMemory(
            config.element_bytes("acc") * 8, config.depth("acc"), config.acc_banks, read_ports=3,
            write_ports=2, attrs=collision_attrs(config))
        self.acc_read_gemm, self.acc_read_alu_dst, self.acc_read_alu_src = acc_mem.read
        self.acc_write_gemm, self.acc_write_alu = acc_mem.write


class _Retirement:
    """The units' completion and the retire queue (the module docstring's second
    point), built into compute's module.

    Per unit: instructions issued and not completed (in flight: `InFlight` ``at_most``
    says whether none or at most one), and completed but not retired (done). An
    instruction completes when its unit's ``completes`` pulses (`hw.unit_pipeline`).
    ``retire`` pops the oldest entry and pushes its tokens.
    """

    def __init__(self, m: Module, compute: "Compute", gemm, alu, head: _Head):
        self._count(m, compute, gemm, alu)
        self._queue(m, compute, head)

    def _count(self, m, compute, gemm, alu):
        count_shape = range(RETIRE_QUEUE_DEPTH + 1)
        gemm_in_flight, alu_in_flight = Signal(count_shape), Signal(count_shape)
        gemm_done, alu_done = Signal(count_shape), Signal(count_shape)
        retire_gemm, retire_alu = Signal(), Signal()
        self.done = {"gemm": gemm_done, "alu": alu_done}
        self.retires = {"gemm": retire_gemm, "alu": retire_alu}
        self.at_most = {}
        for unit, in_flight, done, begin, completes, retires in (
                ("gemm", gemm_in_flight, gemm_done, gemm.begin, gemm.completes, retire_gemm),
                ("alu", alu_in_flight, alu_done, alu.begin, alu.completes, retire_alu)):
            self.at_most[unit] = at_most = compute.in_flight_kind(unit, in_flight)
            with m.If(begin & ~completes):
                m.d.sync += [in_flight.eq(in_flight + 1)] + at_most.issued()
            with m.Elif(completes & ~begin):
                m.d.sync += [in_flight.eq(in_flight - 1)] + at_most.completed()
            with m.If(completes & ~retires):
                m.d.sync += done.eq(done + 1)
            with m.Elif(retires & ~completes):
                m.d.sync += done.eq(done - 1)
        m.d.comb += [compute.gemm_busy.eq(gemm_in_flight != 0),
                     compute.alu_busy.eq(alu_in_flight != 0)]

    def _queue(self, m, compute, head):
        m.submodules.retire_queue = retire_queue = fifo.SyncFIFO(
            width=RETIRE_LAYOUT.size, depth=RETIRE_QUEUE_DEPTH)
        self.fifo = retire_queue
        self.oldest = oldest = data.View(RETIRE_LAYOUT, retire_queue.r_data)
        self.oldest_done = oldest_done = Mux(oldest.alu, self.done["alu"] != 0,
                                             self.done["gemm"] != 0)
        self.oldest_pushes_ready = oldest_pushes_ready = (
            (~oldest.push_prev | compute.to_load.ready)
            & (~oldest.push_next | compute.to_store.ready))
        self.retire = retire = Signal()
        m.d.comb += [
            retire.eq(retire_queue.r_rdy & oldest_done & oldest_pushes_ready),
            retire_queue.r_en.eq(retire),
            self.retires["gemm"].eq(retire & ~oldest.alu),
            self.retires["alu"].eq(retire & oldest.alu),
        ]
        entry = data.View(RETIRE_LAYOUT, retire_queue.w_data)
        m.d.comb += [entry.alu.eq(head.is_alu), entry.push_prev.eq(head.header.push_prev),
                     entry.push_next.eq(head.header.push_next)]


class _FrontEnd:
    """Compute's in-order front end (the module docstring's first and third points),
    built into its module: it issues a GEMM / ALU instruction to its unit and puts an
    entry in the retire queue, and runs any other instruction alone once the retire
    queue is empty (latched in ``word``), then pushes its tokens from its own state.
    """

    def __init__(self, m: Module, compute: "Compute", head: _Head, gemm, alu,
                 retirement: _Retirement, loader):
        self.compute, self.head, self.gemm, self.alu = compute, head, gemm, alu
        self.retirement = retirement
        config = compute.config
        word = Signal(HwConfig.INSN_BITS)
        self.word = word
        self.header = _view(config, word, isa.Opcode.FINISH)
        m.d.comb += loader.cmd.payload.eq(_view(config, word, isa.Opcode.LOAD))
        if config.registered_load_walk:
            load_nonempty = Signal()   # of the LOAD in `word`, decoded as it is latched
            self.load_nonempty = load_nonempty
            m.d.comb += loader.nonempty.eq(load_nonempty)
        self._outputs(m)
        with m.FSM():
            self._issue_state(m)
            run_load(m, loader, compute, "LOAD", "LOAD_WAIT", then="PUSH")
            self._push_state(m)

    def _outputs(self, m: Module):
        """The retired count, the token offers (the retire queue's and ``PUSH``'s) and
        the activity outside the FSM's states."""
        compute, retirement = self.compute, self.retirement
        finished = Signal()
        retired = Signal(16)
        self.finished, self.retired = finished, retired
        m.d.comb += [compute.finished.eq(finished), compute.retired.eq(retired)]
        to_load_valid, to_store_valid = Signal(), Signal()
        self.to_load_valid, self.to_store_valid = to_load_valid, to_store_valid
        retire, oldest = retirement.retire, retirement.oldest
        m.d.comb += [compute.to_load.valid.eq(to_load_valid | (retire & oldest.push_prev)),
                     compute.to_store.valid.eq(to_store_valid | (retire & oldest.push_next))]
        with m.If(retire):
            m.d.sync += retired.eq(retired + 1)
        with m.If(retirement.fifo.r_rdy & retirement.oldest_done
                  & ~retirement.oldest_pushes_ready):
            m.d.comb += compute.wait_token.eq(1)
        m.d.comb += compute.busy.eq(compute.gemm_busy | compute.alu_busy)

    def _issue_state(self, m: Module):
        """``ISSUE``: pop the head's tokens and issue it to its unit, or latch it to run
        alone once both units have drained."""
        compute, head, retire_queue = self.compute, self.head, self.retirement.fifo
        unit_ready = (compute.in_flight_kind.may_issue(head, self.gemm, self.alu,
                                                       self.retirement.at_most)
                      & retire_queue.w_rdy)
        pops_ready = ((~head.pop_prev | compute.from_load.valid)
                      & (~head.pop_next | compute.from_store.valid))
        pops = [compute.cmds.ready.eq(1), compute.from_load.ready.eq(head.pop_prev),
                compute.from_store.ready.eq(head.pop_next)]
        with m.State("ISSUE"):
            with m.If(~self.finished & compute.cmds.valid):
                with m.If(~pops_ready):
                    m.d.comb += compute.wait_token.eq(1)
                with m.Elif(head.is_gemm | head.is_alu):
                    with m.If(unit_ready):
                        m.d.comb += pops + [
                            self.gemm.begin.eq(head.is_gemm), self.alu.begin.eq(head.is_alu),
                            retire_queue.w_en.eq(1),
                        ]
                with m.Elif(~retire_queue.r_rdy):
                    m.d.comb += pops
                    m.d.sync += self.word.eq(head.word)
                    if compute.config.registered_load_walk:
                        m.d.sync += self.load_nonempty.eq(padded_nonempty(head.load))
                    with m.If(head.is_ours):
                        m.next = "LOAD"
                    with m.Else():
                        m.next = "PUSH"
            with m.Elif(~retire_queue.r_rdy):
                m.d.comb += compute.idle.eq(1)

    def _push_state(self, m: Module):
        """``PUSH``: offer the latched instruction's tokens; FINISH stops the front end."""
        compute, header = self.compute, self.header
        pushes_ready = ((~header.push_prev | compute.to_load.ready)
                        & (~header.push_next | compute.to_store.ready))
        with m.State("PUSH"):
            with m.If(pushes_ready):
                # Both token queues are counters whose ready does not depend on
                # valid, so offering only when all are ready pushes each once.
                m.d.comb += [self.to_load_valid.eq(header.push_prev),
                             self.to_store_valid.eq(header.push_next)]
                m.d.sync += self.retired.eq(self.retired + 1)
                with m.If(header.opcode == isa.Opcode.FINISH):
                    m.d.sync += self.finished.eq(1)
                m.next = "ISSUE"
            with m.Else():
                m.d.comb += compute.wait_token.eq(1)


class Compute(wiring.Component):
    """The compute module.

    Ports
    -----
    cmds : In(stream of instruction words)
    from_load, from_store : In(token stream)
    to_load, to_store : Out(token stream)
    mem_uop, mem_acc : Out(MemReadSignature)
        Without ``shared_load_engine``; with it, instead:
    engine : Out(EnginePortSignature)
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
        # The variants the switches choose.
        self.in_flight_kind = RegisteredInFlight if config.registered_dispatch else InFlight
        self.loads_kind = _loads_variant(config)
        self.head_kind = _head_variant(config)
        super().__init__(ComputeSignature(config))

    def elaborate(self, platform):
        m = Module()
        config = self.config
        buffers = _Buffers(m, config)
        loader, sram_uop, sram_acc = self.loads_kind.build(m, self)
        for uop_write in buffers.uop_writes:
            m.d.comb += [uop_write.en.eq(sram_uop.en),
                         uop_write.addr.eq(sram_uop.addr),
                         uop_write.data.eq(sram_uop.data)]
        m.submodules.gemm = gemm = unit_variant(config, "gemm")(config)
        m.submodules.alu = alu = unit_variant(config, "alu")(config)
        head = self.head_kind(m, config, self.cmds.payload)
        m.d.comb += [gemm.insn.eq(head.word), alu.insn.eq(head.word)]
        self._connect_units(m, buffers, gemm, alu, sram_acc)
        retirement = _Retirement(m, self, gemm, alu, head)
        _FrontEnd(m, self, head, gemm, alu, retirement, loader)
        return m

    def _connect_units(self, m, buffers: _Buffers, gemm, alu, sram_acc):
        """The units' SRAM ports; the ALU's acc and out write ports also take acc
        LOADs, which never run beside a unit."""
        connect(m, gemm.uop_read, buffers.uop_read["gemm"])
        connect(m, alu.uop_read, buffers.uop_read["alu"])
        connect(m, gemm.acc_read, buffers.acc_read_gemm)
        connect(m, alu.acc_read, buffers.acc_read_alu_dst)
        connect(m, alu.acc_src_read, buffers.acc_read_alu_src)
        connect(m, gemm.inp_read, flipped(self.inp_read))
        connect(m, gemm.wgt_read, flipped(self.wgt_read))
        connect(m, gemm.acc_write, buffers.acc_write_gemm)
        connect(m, gemm.out_write, flipped(self.out_write))
        m.d.comb += [self.gemm_uop.eq(gemm.executes), self.alu_uop.eq(alu.executes)]
        acc_write_alu = buffers.acc_write_alu
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
                self.out_write_alu.data.eq(out_of_acc(self.config, sram_acc.data)),
            ]
