"""The single DRAM port, shared by the fetch, load, compute and store modules.

Reads: each client offers burst requests on its ``req`` stream. The arbiter
grants one client at a time, round robin starting after the last granted one,
forwards that request to ``mem_rd_req`` and records ``(client, beats)`` (with
``HwConfig.narrow_walkers``, the index of its last beat: no subtraction on the
data side) in an order FIFO (up to ``config.dram_reads_in_flight`` bursts
outstanding, so request latency overlaps with data). Data beats arrive in
request order on ``mem_rd_data``; the head of the order FIFO says which client
they belong to, and the beat is passed to that client's ``data`` stream (its
ready back-pressures the memory).
Every client drains its data unconditionally (see `hw.dma`), so a burst
waiting at the head never blocks forever. `SkidDramArbiter`, the variant
``HwConfig.registered_load_data`` chooses (`arbiter_variant`), keeps a beat its
client does not take at once in a one-beat register, so the port's ``ready`` is
a flip-flop.

Writes: only the store module writes, so its request and data streams pass
straight through to ``mem_wr_req`` / ``mem_wr_data``, and the write responses
(a memory system with them) from ``mem_wr_resp`` back to it.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.config import HwConfig
from vdla.hw.layouts import (BURST_BEATS_BITS, MAX_BURST_BEATS, MemReadSignature,
                             MemWriteSignature, dram_port_members)

__all__ = ["DramArbiter", "DramArbiterSignature", "SkidDramArbiter", "arbiter_variant"]


def arbiter_variant(config: HwConfig) -> type["DramArbiter"]:
    """The arbiter class ``config``'s switches choose (``registered_load_data``)."""
    return SkidDramArbiter if config.registered_load_data else DramArbiter


class DramArbiterSignature(wiring.Signature):
    """A `DramArbiter`'s ports (described there) for ``readers`` read clients."""

    def __init__(self, config: HwConfig, readers: int):
        members = {
            "readers": In(MemReadSignature(config.dram_bus_bits)).array(readers),
            "writer": In(MemWriteSignature(config)),
            **dram_port_members(config),
            "read_beats": Out(1),
            "write_beats": Out(1),
        }
        super().__init__(members)


class DramArbiter(wiring.Component):
    """Round-robin read arbiter over ``readers`` clients plus a write pass-through.

    Ports
    -----
    readers : array of In(MemReadSignature)
    writer : In(MemWriteSignature)
    mem_rd_req, mem_rd_data, mem_wr_req, mem_wr_data : the DRAM port
    mem_wr_resp : In(stream), only with a write response (`HwConfig.memory_system`)
    read_beats, write_beats : Out(1)
        Pulses on each data beat transferred (for the counters).
    """

    def __init__(self, config: HwConfig, readers: int):
        self.config = config
        self.n_readers = readers
        super().__init__(DramArbiterSignature(config, readers))

    def elaborate(self, platform):
        m = Module()
        n = self.n_readers
        id_bits = max(1, (n - 1).bit_length())
        # The order FIFO keeps each burst's beat count, or (`narrow_walkers`) the index
        # of its last beat, which the data side compares without a subtraction.
        narrow = bool(self.config.narrow_walkers)
        beats_bits = (MAX_BURST_BEATS - 1).bit_length() if narrow else BURST_BEATS_BITS
        m.submodules.order = order = fifo.SyncFIFO(width=id_bits + beats_bits,
                                                depth=self.config.dram_reads_in_flight)
        self._requests(m, order, id_bits, beats_bits)
        beat = self._read_data(m, order, id_bits, beats_bits)
        self._writes(m)
        m.d.comb += [
            self.read_beats.eq(beat),
            self.write_beats.eq(self.mem_wr_data.valid & self.mem_wr_data.ready),
        ]
        return m

    def _requests(self, m: Module, order, id_bits: int, beats_bits: int):
        """One client granted at a time, round robin; its request forwarded to
        ``mem_rd_req`` while the order FIFO has room, and recorded there."""
        n = self.n_readers
        narrow = bool(self.config.narrow_walkers)
        granted = Signal()            # a client is connected to mem_rd_req
        owner = Signal(range(n))
        last = Signal(range(n))
        pick = Signal(range(n))
        any_valid = Signal()
        # Round robin: the lowest requesting index above `last`, else the lowest overall.
        for i in reversed(range(n)):
            with m.If(self.readers[i].req.valid):
                m.d.comb += [pick.eq(i), any_valid.eq(1)]
        for i in reversed(range(n)):
            with m.If(self.readers[i].req.valid & (last < i)):
                m.d.comb += pick.eq(i)
        with m.If(~granted & any_valid):
            m.d.sync += [granted.eq(1), owner.eq(pick)]

        for i in range(n):
            with m.If(granted & (owner == i)):
                m.d.comb += [
                    self.mem_rd_req.valid.eq(self.readers[i].req.valid & order.w_rdy),
                    self.mem_rd_req.payload.eq(self.readers[i].req.payload),
                    self.readers[i].req.ready.eq(self.mem_rd_req.ready & order.w_rdy),
                ]
        beats = self.mem_rd_req.payload.beats
        with m.If(self.mem_rd_req.valid & self.mem_rd_req.ready):
            m.d.comb += [
                order.w_en.eq(1),
                order.w_data.eq(owner | ((beats - 1)[:beats_bits] if narrow else beats) << id_bits),
            ]
            m.d.sync += [granted.eq(0), last.eq(owner)]

    def _read_data(self, m: Module, order, id_bits: int, beats_bits: int):
        """Each beat to the client at the order FIFO's head, popped after its burst's
        last beat; returns whether a beat is taken from the port."""
        head_owner = order.r_data[:id_bits]
        head_beats = order.r_data[id_bits:]
        head_last = head_beats if self.config.narrow_walkers else head_beats - 1
        received = Signal(beats_bits)
        self._route_read_data(m, order, head_owner)
        beat = self.mem_rd_data.valid & self.mem_rd_data.ready
        with m.If(beat):
            with m.If(received == head_last):
                m.d.sync += received.eq(0)
                m.d.comb += order.r_en.eq(1)
            with m.Else():
                m.d.sync += received.eq(received + 1)
        return beat

    def _writes(self, m: Module):
        """The store's write streams straight through, and the write responses back."""
        for port, client in ((self.mem_wr_req, self.writer.req),
                             (self.mem_wr_data, self.writer.data)):
            m.d.comb += [port.valid.eq(client.valid), port.payload.eq(client.payload),
                         client.ready.eq(port.ready)]
        if self.config.memory_system.write_response:
            m.d.comb += [self.writer.resp.valid.eq(self.mem_wr_resp.valid),
                         self.writer.resp.payload.eq(self.mem_wr_resp.payload),
                         self.mem_wr_resp.ready.eq(self.writer.resp.ready)]

    def _route_read_data(self, m, order, head_owner):
        """The port's read data straight to the client at the order FIFO's head."""
        for i in range(self.n_readers):
            m.d.comb += self.readers[i].data.payload.eq(self.mem_rd_data.payload)
            with m.If(order.r_rdy & (head_owner == i)):
                m.d.comb += [
                    self.readers[i].data.valid.eq(self.mem_rd_data.valid),
                    self.mem_rd_data.ready.eq(self.readers[i].data.ready),
                ]


class SkidDramArbiter(DramArbiter):
    """`DramArbiter` whose read data passes a one-beat register (``registered_load_data``)."""

    def _route_read_data(self, m, order, head_owner):
        """The port's read data through a one-beat register.

        The port's ``ready`` is "the register is empty" (and a burst is expected): a
        beat its client does not take in the cycle it arrives waits in the register,
        with its client, and the client takes it from there. Each client sees its
        beats at the cycles it would have without the register (the port's next
        beat waits the cycle the held one is taken); only the port sees a beat
        taken a cycle early, so the order FIFO may free an entry earlier.
        """
        held = Signal()
        held_beat = Signal(self.config.dram_bus_bits)
        held_owner = Signal.like(head_owner)
        owner = Mux(held, held_owner, head_owner)
        valid = held | (order.r_rdy & self.mem_rd_data.valid)
        taken = Signal()
        for i in range(self.n_readers):
            client = self.readers[i].data
            m.d.comb += client.payload.eq(Mux(held, held_beat, self.mem_rd_data.payload))
            with m.If(owner == i):
                m.d.comb += [client.valid.eq(valid), taken.eq(client.ready)]
        m.d.comb += self.mem_rd_data.ready.eq(~held & order.r_rdy)
        with m.If(held):
            with m.If(taken):
                m.d.sync += held.eq(0)
        with m.Elif(self.mem_rd_data.valid & self.mem_rd_data.ready & ~taken):
            m.d.sync += [held.eq(1), held_beat.eq(self.mem_rd_data.payload),
                         held_owner.eq(head_owner)]
