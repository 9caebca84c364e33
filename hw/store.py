"""The store module: 2D strided writes of the out SRAM to DRAM.

Instructions arrive in order on ``cmds``. A STORE pops a compute->store token
first if ``pop_prev`` asks, copies ``y_size x x_size`` out elements (SRAM
entries ``sram_base + y * x_size + x``) to DRAM elements ``dram_base + y *
x_stride + x``, and pushes a store->compute token (``push_prev``) once its last
beat has been accepted by the memory (with a write response,
`HwConfig.memory_system`: once every burst it has issued is answered, so a
module the token releases reads what was stored). Store has no next module, so
``pop_next``/``push_next`` are ignored; an instruction of another kind only
moves tokens.

Dataflow inside a STORE: an SRAM reader walks the entries in order and keeps
a small FIFO of elements filled (one synchronous read per cycle, reads only
issued when the FIFO has room for their data). The beat side walks the rows:
for each row it computes the bus-aligned byte address and the number of beats,
and for each burst (`hw.layouts.legal_burst`: at most `MAX_BURST_BEATS` beats and
legal on the memory system) it sends the request on
``mem.req`` and then exactly that many beats on ``mem.data`` (request and its
beats strictly in that order, one burst at a time). An element at least as
wide as the bus is sent as consecutive full beats (all strobes set); narrower
elements are packed into lanes of a beat with only their bytes' strobes set,
a row possibly starting and ending mid-beat.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw import isa
from vdla.hw.config import HwConfig
from vdla.hw.counters import STATUS_BITS
from vdla.hw.layouts import (BURST_BEATS_BITS, MemWriteSignature, TokenSignature,
                             burst_beats_bits, instruction_layout, legal_burst, log2,
                             sram_read_signature)
from vdla.hw.token_queue import pop_token, push_token, take_instruction

__all__ = ["StoreUnit"]

ELEMENT_FIFO_DEPTH = 4
# Write bursts issued and not yet answered (with a write response) before the
# store waits: AXI masters bound their outstanding writes; 16 covers the
# response latency of `hw.config.MEMORY_SYSTEMS` with bursts of one beat.
WRITES_IN_FLIGHT = 16


class StoreUnit(wiring.Component):
    """The store module.

    Ports
    -----
    cmds : In(stream of instruction words)
    from_compute : In(token stream)   (compute->store queue)
    to_compute : Out(token stream)    (store->compute queue)
    out_read : In(SRAM read port signature)
    mem : Out(MemWriteSignature)
    busy, wait_token, wait_mem, idle : Out(1)
    retired : Out(STATUS_BITS)
    writes_pending : Out(1)
        Only with a write response: bursts issued and not yet answered.
    """

    def __init__(self, config: HwConfig):
        self.config = config
        super().__init__({
            "cmds": In(stream.Signature(HwConfig.INSN_BITS)),
            "from_compute": In(TokenSignature),
            "to_compute": Out(TokenSignature),
            "out_read": In(sram_read_signature(config, "out")),
            "mem": Out(MemWriteSignature(config)),
            "busy": Out(1), "wait_token": Out(1), "wait_mem": Out(1), "idle": Out(1),
            "retired": Out(STATUS_BITS),
            **({"writes_pending": Out(1)} if config.memory_system.write_response else {}),
        })

    def elaborate(self, platform):
        m = Module()
        config = self.config
        bus_bits = config.dram_bus_bits
        bus_bytes = bus_bits // 8
        element_bytes = config.element_bytes("out")
        element_bits = element_bytes * 8
        wide = element_bytes >= bus_bytes
        beats_per_element = element_bytes // bus_bytes if wide else 1
        lanes = 1 if wide else bus_bytes // element_bytes
        lane_bits = max(1, log2(lanes))

        layout = instruction_layout(config, isa.Opcode.STORE)
        word = Signal(HwConfig.INSN_BITS)
        insn = data.View(layout, word[:layout.size])

        # ---------------------------------------------------------- SRAM reader
        m.submodules.elements = elements = fifo.SyncFIFO(width=element_bits,
                                                         depth=ELEMENT_FIFO_DEPTH)
        # Entries still to read, y_size * x_size, counted as rows and entries of
        # the row (no multiplier: FPGAs with few DSP blocks need them elsewhere).
        # Sizes as wide as the ISA's, or (narrow_walkers) as out's entries need.
        size_bits = min(isa.SIZE_BITS, config.walker_bits)
        read_rows = Signal(size_bits)
        read_columns = Signal(size_bits)
        read_offset = Signal(min(isa.SRAM_ADDR_BITS, config.walker_bits))
        read_pending = Signal()         # a read issued last cycle: its data arrives now
        start_reader = Signal()
        with m.If(start_reader):
            m.d.sync += [read_rows.eq(Mux(insn.x_size == 0, 0, insn.y_size)),
                         read_columns.eq(insn.x_size), read_offset.eq(0)]
        room = elements.level + read_pending < ELEMENT_FIFO_DEPTH
        issue_read = (read_rows != 0) & room
        m.d.comb += [
            self.out_read.addr.eq(insn.sram_base + read_offset),
            self.out_read.en.eq(issue_read),
            elements.w_en.eq(read_pending),
            elements.w_data.eq(self.out_read.data),
        ]
        m.d.sync += read_pending.eq(issue_read)
        with m.If(issue_read):
            m.d.sync += read_offset.eq(read_offset + 1)
            with m.If(read_columns == 1):
                m.d.sync += [read_rows.eq(read_rows - 1), read_columns.eq(insn.x_size)]
            with m.Else():
                m.d.sync += read_columns.eq(read_columns - 1)

        # ---------------------------------------------------------- rows and beats
        rows_left = Signal(size_bits)
        row_addr = Signal(config.dram_addr_bits)   # DRAM element index of the row's first element
        row_beats = Signal(size_bits + log2(beats_per_element) + 1)   # beats of the row not yet requested
        req_addr = Signal(config.dram_addr_bits)
        burst = Signal(BURST_BEATS_BITS)
        beats_left = Signal(burst_beats_bits(config))   # beats of the current burst still to send
        part = Signal(range(beats_per_element))   # beat within a wide element
        lane = Signal(lane_bits)        # next lane of a narrow-element beat
        row_elements = Signal(size_bits)    # narrow: elements of the row not yet packed
        beat_data = Signal(bus_bits)
        beat_strb = Signal(bus_bytes)
        beat_full = Signal()            # narrow: the packed beat is ready to send

        m.d.comb += [
            burst.eq(legal_burst(config, row_beats, req_addr)),
            self.mem.req.payload.addr.eq(req_addr),
            self.mem.req.payload.beats.eq(burst),
        ]
        byte_addr = (row_addr << log2(element_bytes))[:config.dram_addr_bits]
        first_lane = row_addr[:lane_bits]

        retired = Signal(STATUS_BITS)
        m.d.comb += self.retired.eq(retired)
        responds = config.memory_system.write_response
        # A token may release a load of what this module stored: before pushing
        # one, wait for the responses of the bursts issued (DRAIN).
        push = "DRAIN" if responds else "PUSH"
        if responds:
            unanswered = Signal(range(WRITES_IN_FLIGHT + 1))
            issued = self.mem.req.valid & self.mem.req.ready
            m.d.comb += [self.mem.resp.ready.eq(1), self.writes_pending.eq(unanswered != 0)]
            m.d.sync += unanswered.eq(unanswered + issued - self.mem.resp.valid)
            room = unanswered != WRITES_IN_FLIGHT
        with m.FSM():
            take_instruction(m, self, word)
            with pop_token(m, self, insn.pop_prev, self.from_compute):
                with m.If(insn.opcode == isa.Opcode.STORE):
                    m.d.comb += start_reader.eq(1)
                    m.d.sync += [rows_left.eq(Mux(insn.x_size == 0, 0, insn.y_size)),
                                 row_addr.eq(insn.dram_base)]
                    m.next = "ROW"
                with m.Else():
                    m.next = push
            with m.State("ROW"):
                m.d.comb += self.busy.eq(1)
                with m.If(rows_left == 0):
                    m.next = push
                with m.Else():
                    if wide:
                        m.d.sync += [req_addr.eq(byte_addr),
                                     row_beats.eq(insn.x_size << log2(beats_per_element))]
                    else:
                        m.d.sync += [
                            req_addr.eq(Cat(Const(0, log2(bus_bytes)),
                                            byte_addr[log2(bus_bytes):])),
                            row_beats.eq((first_lane + insn.x_size + (lanes - 1)) >> log2(lanes)),
                            lane.eq(first_lane),
                            row_elements.eq(insn.x_size),
                        ]
                    m.d.sync += [rows_left.eq(rows_left - 1),
                                 row_addr.eq(row_addr + insn.x_stride)]
                    m.next = "REQUEST"
            with m.State("REQUEST"):
                m.d.comb += [self.busy.eq(1), self.mem.req.valid.eq(room if responds else 1),
                             self.wait_mem.eq(~self.mem.req.valid | ~self.mem.req.ready)]
                with m.If(self.mem.req.valid & self.mem.req.ready):
                    m.d.sync += [
                        beats_left.eq(burst),
                        row_beats.eq(row_beats - burst),
                        req_addr.eq(req_addr + (burst << log2(bus_bytes))),
                    ]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += self.busy.eq(1)
                sent = self.mem.data.valid & self.mem.data.ready
                if wide:
                    m.d.comb += [
                        self.mem.data.valid.eq(elements.r_rdy),
                        self.mem.data.payload.data.eq(
                            elements.r_data if beats_per_element == 1
                            else elements.r_data.word_select(part, bus_bits)),
                        self.mem.data.payload.strb.eq(Const(-1, bus_bytes)),
                    ]
                    with m.If(sent):
                        if beats_per_element == 1:
                            m.d.comb += elements.r_en.eq(1)
                        else:
                            m.d.sync += part.eq(part + 1)
                            with m.If(part == beats_per_element - 1):
                                m.d.comb += elements.r_en.eq(1)
                                m.d.sync += part.eq(0)
                else:
                    # Pack elements into the beat register until the lane or row
                    # runs out, then send it.
                    m.d.comb += [
                        self.mem.data.valid.eq(beat_full),
                        self.mem.data.payload.data.eq(beat_data),
                        self.mem.data.payload.strb.eq(beat_strb),
                    ]
                    with m.If(~beat_full & elements.r_rdy):
                        m.d.comb += elements.r_en.eq(1)
                        for index in range(lanes):
                            with m.If(lane == index):
                                m.d.sync += [
                                    beat_data.word_select(index, element_bits).eq(elements.r_data),
                                    beat_strb.word_select(index, element_bytes).eq(
                                        Const(-1, element_bytes)),
                                ]
                        m.d.sync += [lane.eq(lane + 1), row_elements.eq(row_elements - 1)]
                        with m.If((lane == lanes - 1) | (row_elements == 1)):
                            m.d.sync += beat_full.eq(1)
                    with m.If(sent):
                        m.d.sync += [beat_full.eq(0), beat_strb.eq(0)]
                m.d.comb += self.wait_mem.eq(self.mem.data.valid & ~self.mem.data.ready)
                with m.If(sent):
                    m.d.sync += beats_left.eq(beats_left - 1)
                    with m.If(beats_left == 1):
                        with m.If(row_beats == 0):
                            m.next = "ROW"
                        with m.Else():
                            m.next = "REQUEST"
            if responds:
                with m.State("DRAIN"):
                    with m.If(~insn.push_prev | (unanswered == 0)):
                        m.next = "PUSH"
                    with m.Else():
                        m.d.comb += self.wait_mem.eq(1)
            push_token(m, self, insn.push_prev, self.to_compute, retired)
        return m
