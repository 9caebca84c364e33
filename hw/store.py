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

__all__ = ["StoreUnit", "StoreSignature"]

ELEMENT_FIFO_DEPTH = 4
# Write bursts issued and not yet answered (with a write response) before the
# store waits: AXI masters bound their outstanding writes; 16 covers the
# response latency of `hw.config.MEMORY_SYSTEMS` with bursts of one beat.
WRITES_IN_FLIGHT = 16


class _NoResponses:
    """A memory without write responses: a STORE is done once its last beat is
    accepted, so its token is pushed then (`push`: the state after its last beat)."""

    members: dict = {}
    push = "PUSH"

    def __init__(self, m: Module, store: "StoreUnit"):
        pass

    def request_valid(self):
        """When a burst request may be offered."""
        return 1

    def drain_state(self, m: Module, insn):
        pass


class _Responses(_NoResponses):
    """Write responses (`HwConfig.memory_system`): a token may release a load of what
    this module stored, so before pushing one the store waits (``DRAIN``) for the
    responses of the bursts it issued; it issues a burst only while fewer than
    `WRITES_IN_FLIGHT` are unanswered."""

    members = {"writes_pending": Out(1)}
    push = "DRAIN"

    def __init__(self, m, store):
        unanswered = Signal(range(WRITES_IN_FLIGHT + 1))
        self.unanswered = unanswered
        self.store = store
        issued = store.mem.req.valid & store.mem.req.ready
        m.d.comb += [store.mem.resp.ready.eq(1), store.writes_pending.eq(unanswered != 0)]
        m.d.sync += unanswered.eq(unanswered + issued - store.mem.resp.valid)

    def request_valid(self):
        return self.unanswered != WRITES_IN_FLIGHT

    def drain_state(self, m, insn):
        with m.State("DRAIN"):
            with m.If(~insn.push_prev | (self.unanswered == 0)):
                m.next = "PUSH"
            with m.Else():
                m.d.comb += self.store.wait_mem.eq(1)


def _responses_variant(config: HwConfig) -> type[_NoResponses]:
    return _Responses if config.memory_system.write_response else _NoResponses


class StoreSignature(wiring.Signature):
    """The store module's ports, described in `StoreUnit` (``writes_pending`` only
    with a write response)."""

    def __init__(self, config: HwConfig):
        super().__init__({
            "cmds": In(stream.Signature(HwConfig.INSN_BITS)),
            "from_compute": In(TokenSignature),
            "to_compute": Out(TokenSignature),
            "out_read": In(sram_read_signature(config, "out")),
            "mem": Out(MemWriteSignature(config)),
            "busy": Out(1), "wait_token": Out(1), "wait_mem": Out(1), "idle": Out(1),
            "retired": Out(STATUS_BITS),
            **_responses_variant(config).members,
        })


class _SramReader:
    """The STORE's out entries read in order into the ``elements`` FIFO, built into the
    store's module: one synchronous read per cycle, issued only when the FIFO has
    room for its data. ``start`` (a pulse) starts it on the STORE in ``insn``.

    The entries still to read, ``y_size * x_size``, are counted as rows and entries
    of the row (no multiplier: FPGAs with few DSP blocks need them elsewhere), as
    wide as the ISA's sizes or (narrow_walkers) as out's entries need.
    """

    def __init__(self, m: Module, store: "StoreUnit", insn, size_bits: int):
        config = store.config
        m.submodules.elements = elements = fifo.SyncFIFO(width=config.element_bytes("out") * 8,
                                                         depth=ELEMENT_FIFO_DEPTH)
        self.elements = elements
        read_rows = Signal(size_bits)
        read_columns = Signal(size_bits)
        read_offset = Signal(min(isa.SRAM_ADDR_BITS, config.walker_bits))
        read_pending = Signal()         # a read issued last cycle: its data arrives now
        start_reader = Signal()
        self.start = start_reader
        with m.If(start_reader):
            m.d.sync += [read_rows.eq(Mux(insn.x_size == 0, 0, insn.y_size)),
                         read_columns.eq(insn.x_size), read_offset.eq(0)]
        room = elements.level + read_pending < ELEMENT_FIFO_DEPTH
        issue_read = (read_rows != 0) & room
        m.d.comb += [
            store.out_read.addr.eq(insn.sram_base + read_offset),
            store.out_read.en.eq(issue_read),
            elements.w_en.eq(read_pending),
            elements.w_data.eq(store.out_read.data),
        ]
        m.d.sync += read_pending.eq(issue_read)
        with m.If(issue_read):
            m.d.sync += read_offset.eq(read_offset + 1)
            with m.If(read_columns == 1):
                m.d.sync += [read_rows.eq(read_rows - 1), read_columns.eq(insn.x_size)]
            with m.Else():
                m.d.sync += read_columns.eq(read_columns - 1)


class _Beats:
    """The beat side, built into the store's module: for each row the bus-aligned byte
    address and number of beats (``ROW``), for each burst (`hw.layouts.legal_burst`)
    its request (``REQUEST``) and then exactly that many beats (``DATA``), one burst
    at a time. The variants put the ``elements`` into beats: `_WideBeats`,
    `_NarrowBeats` (chosen by `beats_variant`).
    """

    beats_per_element = 1   # beats of an element at least as wide as the bus
    lanes = 1               # elements of a beat, narrower elements

    def __init__(self, m: Module, store: "StoreUnit", insn, elements, size_bits: int):
        config = store.config
        self.store, self.insn, self.elements = store, insn, elements
        self.bus_bits = bus_bits = config.dram_bus_bits
        self.bus_bytes = bus_bits // 8
        self.element_bytes = config.element_bytes("out")
        rows_left = Signal(size_bits)
        row_addr = Signal(config.dram_addr_bits)   # DRAM element index of the row's first element
        # Beats of the row not yet requested.
        row_beats = Signal(size_bits + log2(self.beats_per_element) + 1)
        req_addr = Signal(config.dram_addr_bits)
        burst = Signal(BURST_BEATS_BITS)
        beats_left = Signal(burst_beats_bits(config))   # beats of the current burst still to send
        self.rows_left, self.row_addr, self.row_beats = rows_left, row_addr, row_beats
        self.req_addr, self.burst, self.beats_left = req_addr, burst, beats_left
        m.d.comb += [
            burst.eq(legal_burst(config, row_beats, req_addr)),
            store.mem.req.payload.addr.eq(req_addr),
            store.mem.req.payload.beats.eq(burst),
        ]
        self.byte_addr = (row_addr << log2(self.element_bytes))[:config.dram_addr_bits]

    def start(self) -> list:
        """The statements that start the STORE in ``insn`` on its first row."""
        insn = self.insn
        return [self.rows_left.eq(Mux(insn.x_size == 0, 0, insn.y_size)),
                self.row_addr.eq(insn.dram_base)]

    def states(self, m: Module, responses: _NoResponses):
        """``ROW``, ``REQUEST`` and ``DATA``; after the last row, ``responses.push``."""
        store, insn = self.store, self.insn
        rows_left, row_addr, row_beats = self.rows_left, self.row_addr, self.row_beats
        with m.State("ROW"):
            m.d.comb += store.busy.eq(1)
            with m.If(rows_left == 0):
                m.next = responses.push
            with m.Else():
                m.d.sync += self._row_start()
                m.d.sync += [rows_left.eq(rows_left - 1),
                             row_addr.eq(row_addr + insn.x_stride)]
                m.next = "REQUEST"
        with m.State("REQUEST"):
            request = store.mem.req
            m.d.comb += [store.busy.eq(1), request.valid.eq(responses.request_valid()),
                         store.wait_mem.eq(~request.valid | ~request.ready)]
            with m.If(request.valid & request.ready):
                m.d.sync += [
                    self.beats_left.eq(self.burst),
                    row_beats.eq(row_beats - self.burst),
                    self.req_addr.eq(self.req_addr + (self.burst << log2(self.bus_bytes))),
                ]
                m.next = "DATA"
        with m.State("DATA"):
            self._data_state(m)

    def _data_state(self, m: Module):
        store, beat = self.store, self.store.mem.data
        m.d.comb += store.busy.eq(1)
        sent = beat.valid & beat.ready
        self._send(m, sent)
        m.d.comb += store.wait_mem.eq(beat.valid & ~beat.ready)
        with m.If(sent):
            m.d.sync += self.beats_left.eq(self.beats_left - 1)
            with m.If(self.beats_left == 1):
                with m.If(self.row_beats == 0):
                    m.next = "ROW"
                with m.Else():
                    m.next = "REQUEST"

    def _row_start(self) -> list:
        """The statements that start a row: its first request's address and its beats."""
        raise NotImplementedError

    def _send(self, m: Module, sent):
        """Offer the beats of ``elements`` on ``mem.data`` (``sent``: one is taken)."""
        raise NotImplementedError


class _WideBeats(_Beats):
    """An element at least as wide as the bus: sent as consecutive full beats (all
    strobes set), ``part`` counting the beats of the element."""

    def __init__(self, m, store, insn, elements, size_bits):
        self.beats_per_element = store.config.element_bytes("out") // store.config.dram_bus_bytes
        super().__init__(m, store, insn, elements, size_bits)
        part = Signal(range(self.beats_per_element))   # beat within the element
        self.part = part

    def _row_start(self):
        return [self.req_addr.eq(self.byte_addr),
                self.row_beats.eq(self.insn.x_size << log2(self.beats_per_element))]

    def _send(self, m, sent):
        beat, elements, part = self.store.mem.data, self.elements, self.part
        m.d.comb += [
            beat.valid.eq(elements.r_rdy),
            beat.payload.data.eq(elements.r_data if self.beats_per_element == 1
                                 else elements.r_data.word_select(part, self.bus_bits)),
            beat.payload.strb.eq(Const(-1, self.bus_bytes)),
        ]
        with m.If(sent):
            if self.beats_per_element == 1:
                m.d.comb += elements.r_en.eq(1)
            else:
                m.d.sync += part.eq(part + 1)
                with m.If(part == self.beats_per_element - 1):
                    m.d.comb += elements.r_en.eq(1)
                    m.d.sync += part.eq(0)


class _NarrowBeats(_Beats):
    """Elements narrower than the bus: packed into the lanes of a beat register
    (``beat_data``, ``beat_strb``) with only their bytes' strobes set, a row possibly
    starting and ending mid-beat; the beat is sent once its last lane or the row's
    last element is in (``beat_full``)."""

    def __init__(self, m, store, insn, elements, size_bits):
        config = store.config
        self.lanes = config.dram_bus_bytes // config.element_bytes("out")
        super().__init__(m, store, insn, elements, size_bits)
        self.lane_bits = lane_bits = max(1, log2(self.lanes))
        lane = Signal(lane_bits)             # next lane of the beat
        row_elements = Signal(size_bits)     # elements of the row not yet packed
        beat_data = Signal(self.bus_bits)
        beat_strb = Signal(self.bus_bytes)
        beat_full = Signal()                 # the packed beat is ready to send
        self.lane, self.row_elements = lane, row_elements
        self.beat_data, self.beat_strb, self.beat_full = beat_data, beat_strb, beat_full

    def _row_start(self):
        first_lane = self.row_addr[:self.lane_bits]
        bus_bytes, lanes, x_size = self.bus_bytes, self.lanes, self.insn.x_size
        return [
            self.req_addr.eq(Cat(Const(0, log2(bus_bytes)), self.byte_addr[log2(bus_bytes):])),
            self.row_beats.eq((first_lane + x_size + (lanes - 1)) >> log2(lanes)),
            self.lane.eq(first_lane),
            self.row_elements.eq(x_size),
        ]

    def _send(self, m, sent):
        beat, elements, lane, lanes = self.store.mem.data, self.elements, self.lane, self.lanes
        element_bytes = self.element_bytes
        m.d.comb += [
            beat.valid.eq(self.beat_full),
            beat.payload.data.eq(self.beat_data),
            beat.payload.strb.eq(self.beat_strb),
        ]
        with m.If(~self.beat_full & elements.r_rdy):
            m.d.comb += elements.r_en.eq(1)
            for index in range(lanes):
                with m.If(lane == index):
                    m.d.sync += [
                        self.beat_data.word_select(index, element_bytes * 8).eq(elements.r_data),
                        self.beat_strb.word_select(index, element_bytes).eq(
                            Const(-1, element_bytes)),
                    ]
            m.d.sync += [lane.eq(lane + 1), self.row_elements.eq(self.row_elements - 1)]
            with m.If((lane == lanes - 1) | (self.row_elements == 1)):
                m.d.sync += self.beat_full.eq(1)
        with m.If(sent):
            m.d.sync += [self.beat_full.eq(0), self.beat_strb.eq(0)]


def beats_variant(config: HwConfig) -> type[_Beats]:
    """The beat side for ``config``'s out elements and bus: `_WideBeats` when an
    element is at least as wide as the bus, else `_NarrowBeats`."""
    return _WideBeats if config.element_bytes("out") >= config.dram_bus_bytes else _NarrowBeats


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
        # The variants the config chooses.
        self.beats_kind = beats_variant(config)
        self.responses_kind = _responses_variant(config)
        super().__init__(StoreSignature(config))

    def elaborate(self, platform):
        m = Module()
        config = self.config
        layout = instruction_layout(config, isa.Opcode.STORE)
        word = Signal(HwConfig.INSN_BITS)
        insn = data.View(layout, word[:layout.size])
        size_bits = min(isa.SIZE_BITS, config.walker_bits)
        reader = _SramReader(m, self, insn, size_bits)
        beats = self.beats_kind(m, self, insn, reader.elements, size_bits)
        retired = Signal(STATUS_BITS)
        m.d.comb += self.retired.eq(retired)
        responses = self.responses_kind(m, self)
        with m.FSM():
            take_instruction(m, self, word)
            with pop_token(m, self, insn.pop_prev, self.from_compute):
                with m.If(insn.opcode == isa.Opcode.STORE):
                    m.d.comb += reader.start.eq(1)
                    m.d.sync += beats.start()
                    m.next = "ROW"
                with m.Else():
                    m.next = responses.push
            beats.states(m, responses)
            responses.drain_state(m, insn)
            push_token(m, self, insn.push_prev, self.to_compute, retired)
        return m
