"""The fetch module: reads the instruction stream and dispatches it in order.

On ``go`` it starts reading ``insn_count`` instructions (``INSN_BYTES`` each)
from byte address ``insn_addr`` through an `ElementReader`, in chunks of at
most `fetch_chunk` instructions (one burst each). A chunk is only requested
when the instruction buffer has room for it and for everything still in
flight, so fetch always drains its read data and never blocks the shared read
port (a buffer of one is the reader's element register). The dispatcher pops
the buffer in order and pushes each instruction into
one of three command queues (depth ``config.cmd_queue_depth``; with depth 0
straight to its module), stalling while the target queue is full (the module
busy):

* LOAD of inp or wgt -> ``load_cmds``
* STORE -> ``store_cmds``
* everything else (LOAD of uop or acc, GEMM, ALU, FINISH) -> ``compute_cmds``

Every instruction is dispatched, FINISH included (loads and stores may follow
FINISH in the stream; compute stops at FINISH). ``complete`` rises once all
``insn_count`` instructions are dispatched, ``idle`` when no read is
outstanding.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw import isa
from vdla.hw.config import HwConfig
from vdla.hw.counters import STATUS_BITS
from vdla.hw.dma import ElementReader
from vdla.hw.layouts import MemReadSignature, instruction_layout, log2

__all__ = ["Fetch", "FETCH_CHUNK", "fetch_chunk"]

FETCH_CHUNK = 8      # instructions per read burst, at most


def fetch_chunk(config: HwConfig) -> int:
    """Instructions per read burst: `FETCH_CHUNK`, or half the buffer if that is less
    (so one chunk is read while the other drains; a buffer of one takes one)."""
    return max(1, min(FETCH_CHUNK, config.fetch_buffer_depth // 2))


class _Direct:
    """A module's command stream seen through a FIFO's write side (``w_data``,
    ``w_en``, ``w_rdy``), for ``cmd_queue_depth`` 0: offering is ``valid``."""

    def __init__(self, stream_port):
        self.w_data, self.w_en, self.w_rdy = (stream_port.payload, stream_port.valid,
                                              stream_port.ready)


class _HeldElement:
    """The reader's element stream seen through a FIFO's read side (``r_data``,
    ``r_rdy``, ``r_en``, ``level``), for ``fetch_buffer_depth`` 1: the reader
    holds each instruction in its own register until it is taken, so a
    one-entry FIFO would only copy it (128 flip-flops)."""

    level = 0

    def __init__(self, elements):
        self.r_data, self.r_rdy, self.r_en = elements.payload, elements.valid, elements.ready


class Fetch(wiring.Component):
    """Instruction fetch and dispatch.

    Ports
    -----
    go : In(1)
        One-cycle pulse: start fetching from ``insn_addr`` (stable meanwhile).
    insn_addr, insn_count : In(32)
    mem : Out(MemReadSignature)
    load_cmds, compute_cmds, store_cmds : Out(stream of instruction words)
    complete : Out(1)
        Every instruction dispatched.
    idle : Out(1)
        No instruction read outstanding.
    fetched : Out(STATUS_BITS)
        Instructions read from DRAM so far (with a buffer of one: taken from the reader).
    load_level, compute_level, store_level : Out(STATUS_BITS)
        Command queue occupancies.
    """

    def __init__(self, config: HwConfig):
        self.config = config
        # With `registered_dispatch` every queue offers its head from a register.
        self.queue_kind = fifo.SyncFIFOBuffered if config.registered_dispatch else fifo.SyncFIFO
        insn = stream.Signature(HwConfig.INSN_BITS)
        super().__init__({
            "go": In(1),
            "insn_addr": In(32),
            "insn_count": In(32),
            "mem": Out(MemReadSignature(config.dram_bus_bits)),
            "load_cmds": Out(insn),
            "compute_cmds": Out(insn),
            "store_cmds": Out(insn),
            "complete": Out(1),
            "idle": Out(1),
            "fetched": Out(STATUS_BITS),
            "load_level": Out(STATUS_BITS),
            "compute_level": Out(STATUS_BITS),
            "store_level": Out(STATUS_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        reader = self._reader(m)
        buffer = self._buffer(m, reader)
        queues = self._queues(m)
        in_flight, fetched, undispatched = self._requests(m, reader, buffer)
        complete = self._dispatch(m, buffer, queues, undispatched)
        m.d.comb += [
            self.complete.eq(complete),
            self.idle.eq((in_flight == 0) & reader.idle),
            self.fetched.eq(fetched),
        ]
        return m

    def _reader(self, m: Module) -> ElementReader:
        """The instruction reader on the DRAM port. A one-instruction buffer requests
        the next instruction only once the held one is taken, so no beat waits while
        it is held (`ElementReader`)."""
        config = self.config
        m.submodules.reader = reader = ElementReader(config, isa.INSN_BYTES,
                                                     take_while_full=config.fetch_buffer_depth > 1,
                                                     in_place=config.decodes_in_place)
        wiring.connect(m, reader.mem, wiring.flipped(self.mem))
        return reader

    def _buffer(self, m: Module, reader: ElementReader):
        """The instruction buffer (a FIFO's read side): `_HeldElement` for a buffer of one."""
        config = self.config
        if config.fetch_buffer_depth == 1:
            return _HeldElement(reader.elements)
        m.submodules.buffer = buffer = self.queue_kind(width=HwConfig.INSN_BITS,
                                                       depth=config.fetch_buffer_depth)
        m.d.comb += [buffer.w_data.eq(reader.elements.payload),
                     buffer.w_en.eq(reader.elements.valid),
                     reader.elements.ready.eq(buffer.w_rdy)]
        return buffer

    def _queues(self, m: Module) -> dict:
        """Each module's command queue (a FIFO's write side), or `_Direct` without."""
        config = self.config
        queues = {}
        for name in isa.MODULES:
            output = getattr(self, f"{name}_cmds")
            if config.cmd_queue_depth == 0:
                # No queue: the dispatcher drives the module's stream itself.
                queues[name] = _Direct(output)
                continue
            queues[name] = queue = self.queue_kind(width=HwConfig.INSN_BITS,
                                                   depth=config.cmd_queue_depth)
            m.submodules[f"{name}_queue"] = queue
            wiring.connect(m, queue.r_stream, wiring.flipped(output))
            m.d.comb += getattr(self, f"{name}_level").eq(queue.level)
        return queues

    def _requests(self, m: Module, reader: ElementReader, buffer):
        """Chunks of instructions requested while the buffer has room for them and for
        everything in flight. Returns the instructions in flight, the count of those
        fetched and the count of those not yet dispatched."""
        config = self.config
        buffer_depth, most = config.fetch_buffer_depth, fetch_chunk(config)
        remaining = Signal(config.insn_count_bits)      # instructions not yet requested
        # DRAM element index of the next one
        next_index = Signal(config.dram_addr_bits - log2(isa.INSN_BYTES))
        in_flight = Signal(range(buffer_depth + 1))   # requested, not yet buffered (taken)
        fetched = Signal(STATUS_BITS)   # wraps, as the status output does
        undispatched = Signal(config.insn_count_bits)   # instructions not yet dispatched
        chunk = Signal(range(most + 1))
        m.d.comb += chunk.eq(Mux(remaining > most, most, remaining))
        with m.If(self.go):
            m.d.sync += [
                remaining.eq(self.insn_count),
                undispatched.eq(self.insn_count),
                next_index.eq(self.insn_addr >> log2(isa.INSN_BYTES)),
            ]
        wants = (remaining != 0) & (buffer.level + in_flight + chunk <= buffer_depth)
        if config.registered_control:
            # Decided from the last cycle's counts, and not right after a request
            # (whose chunk they do not count yet): since only a request shrinks the
            # room, the decision is never too eager, and the request path holds no
            # adder or comparator.
            wanted, just_requested = Signal(), Signal()
            m.d.sync += wanted.eq(wants)
            wants = wanted & ~just_requested
        m.d.comb += [
            reader.cmd.valid.eq(wants),
            reader.cmd.payload.addr.eq(next_index),
            reader.cmd.payload.count.eq(chunk),
        ]
        requested = reader.cmd.valid & reader.cmd.ready
        if config.registered_control:
            m.d.sync += just_requested.eq(requested)
        arrived = reader.elements.valid & reader.elements.ready   # buffered (depth 1: taken)
        with m.If(requested):
            m.d.sync += [remaining.eq(remaining - chunk), next_index.eq(next_index + chunk)]
        m.d.sync += in_flight.eq(in_flight + Mux(requested, chunk, 0) - arrived)
        with m.If(arrived):
            m.d.sync += fetched.eq(fetched + 1)
        return in_flight, fetched, undispatched

    def _dispatch(self, m: Module, buffer, queues: dict, undispatched):
        """The buffer's head into its module's queue; returns whether every instruction
        has been dispatched."""
        config = self.config
        layout = instruction_layout(config, isa.Opcode.LOAD)
        head = data.View(layout, buffer.r_data[:layout.size])
        to_load = (head.opcode == isa.Opcode.LOAD) & (
            (head.memory_type == isa.MemType.INP) | (head.memory_type == isa.MemType.WGT))
        to_store = head.opcode == isa.Opcode.STORE
        if config.decodes_in_place:
            # The reader writes an instruction's first beat (opcode, memory type) in
            # place a cycle or more before it offers the instruction, and holds it
            # until taken: the destination decoded into registers every cycle is the
            # offered instruction's (`HwConfig.registered_dispatch`).
            decoded_load, decoded_store = Signal(), Signal()
            m.d.sync += [decoded_load.eq(to_load), decoded_store.eq(to_store)]
            to_load, to_store = decoded_load, decoded_store
        to_compute = ~to_load & ~to_store
        target_ready = Mux(to_load, queues["load"].w_rdy,
                           Mux(to_store, queues["store"].w_rdy, queues["compute"].w_rdy))
        dispatch = buffer.r_rdy & target_ready
        for name, chosen in (("load", to_load), ("store", to_store), ("compute", to_compute)):
            m.d.comb += [queues[name].w_data.eq(buffer.r_data),
                         queues[name].w_en.eq(buffer.r_rdy & chosen)]
        m.d.comb += buffer.r_en.eq(dispatch)
        if config.registered_dispatch:
            # Counted a cycle later, from a register: a dispatch (the end of a long
            # path through compute's issue) enables one flip-flop, not the counter.
            dispatched = Signal()
            m.d.sync += dispatched.eq(dispatch)
            with m.If(dispatched):
                m.d.sync += undispatched.eq(undispatched - 1)
            return Mux(dispatched, undispatched == 1, undispatched == 0)
        with m.If(dispatch):
            m.d.sync += undispatched.eq(undispatched - 1)
        return undispatched == 0
