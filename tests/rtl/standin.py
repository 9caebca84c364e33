"""A stand-in for the accelerator top with the same ports, to test the RTL tier.

It checks the Verilator build, the C++ DRAM model and the binding without the
real chip. On ``start`` it copies ``insn_count`` 16-byte words from
``insn_addr`` to the bytes right after them (``insn_addr + 16 * insn_count``)
through two pipelined read requests (first half, second half) and one write
burst, then writes one extra beat after the copy: its low 32 bits hold the
cycles from the first read request's acceptance to its first data beat (the
memory's read latency as the design saw it), with only the low four byte
strobes set. ``insn_count == 0`` never finishes, to test the hang path.
Counters: ``cycles``, ``dram_read_beats`` and ``dram_write_beats`` count; the
others read zero. ``status_fetched`` is the read beats taken so far.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.back import verilog
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.config import HwConfig
from vdla.hw.counters import RTL_ACTIVITY, RTL_COUNTERS, RTL_STATUS

INSN_BYTES = 16


def request_layout() -> data.StructLayout:
    return data.StructLayout({"addr": 32, "beats": 16})


class StandIn(wiring.Component):
    def __init__(self, config: HwConfig):
        self.config = config
        bus = config.dram_bus_bits
        members = {
            "start": In(1), "insn_addr": In(32), "insn_count": In(32), "done": Out(1),
            "mem_rd_req": Out(stream.Signature(request_layout())),
            "mem_rd_data": In(stream.Signature(bus)),
            "mem_wr_req": Out(stream.Signature(request_layout())),
            "mem_wr_data": Out(stream.Signature(data.StructLayout({"data": bus,
                                                                   "strb": bus // 8}))),
        }
        if config.memory_system.write_response:   # taken, never waited for
            members["mem_wr_resp"] = In(stream.Signature(2))
        members.update({f"counter_{name}": Out(32) for name in RTL_COUNTERS})
        members.update({f"status_{name}": Out(16) for name in RTL_STATUS})
        members.update({f"activity_{name}": Out(2) for name in RTL_ACTIVITY})  # idle
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus_bytes = self.config.dram_bus_bytes
        m.submodules.buffer = buffer = fifo.SyncFIFOBuffered(width=self.config.dram_bus_bits,
                                                             depth=64)
        addr = Signal(32)
        total = Signal(16)            # beats to copy
        issued = Signal(2)            # read requests issued
        write_issued = Signal()
        written = Signal(16)
        read = Signal(16)
        record_req = Signal()         # the latency record's request went out
        record_sent = Signal()
        busy = Signal()
        timing = Signal()
        latency = Signal(32)
        cycles = Signal(32)
        read_beats = Signal(32)
        write_beats = Signal(32)
        hang = Signal()

        half = total >> 1
        m.d.comb += [
            self.mem_rd_req.payload.addr.eq(addr + Mux(issued == 1, half * bus_bytes, 0)),
            self.mem_rd_req.payload.beats.eq(
                Mux(issued == 0, half, total - half)),
            self.mem_rd_req.valid.eq(busy & (issued < 2) & ~hang),
            buffer.w_data.eq(self.mem_rd_data.payload),
            buffer.w_en.eq(self.mem_rd_data.valid),
            self.mem_rd_data.ready.eq(buffer.w_rdy),
        ]
        copy_dst = addr + total * bus_bytes
        with m.If(~write_issued):
            m.d.comb += [self.mem_wr_req.payload.addr.eq(copy_dst),
                         self.mem_wr_req.payload.beats.eq(total),
                         self.mem_wr_req.valid.eq(busy & ~hang)]
        with m.Else():
            m.d.comb += [self.mem_wr_req.payload.addr.eq(copy_dst + total * bus_bytes),
                         self.mem_wr_req.payload.beats.eq(1),
                         self.mem_wr_req.valid.eq(busy & (written == total) & ~record_req)]
        with m.If(written < total):
            m.d.comb += [self.mem_wr_data.payload.data.eq(buffer.r_data),
                         self.mem_wr_data.payload.strb.eq(-1),
                         self.mem_wr_data.valid.eq(write_issued & buffer.r_rdy),
                         buffer.r_en.eq(write_issued & self.mem_wr_data.ready)]
        with m.Else():
            m.d.comb += [self.mem_wr_data.payload.data.eq(latency),
                         self.mem_wr_data.payload.strb.eq(0xF),
                         self.mem_wr_data.valid.eq(busy & record_req & ~record_sent)]

        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(self.mem_rd_req.valid & self.mem_rd_req.ready):
            m.d.sync += issued.eq(issued + 1)
            with m.If(issued == 0):
                m.d.sync += [timing.eq(1), latency.eq(0)]
        with m.If(timing):
            m.d.sync += latency.eq(latency + 1)
        with m.If(self.mem_rd_data.valid & self.mem_rd_data.ready):
            m.d.sync += [read.eq(read + 1), read_beats.eq(read_beats + 1), timing.eq(0)]
        with m.If(self.mem_wr_req.valid & self.mem_wr_req.ready):
            with m.If(~write_issued):
                m.d.sync += write_issued.eq(1)
            with m.Else():
                m.d.sync += record_req.eq(1)
        with m.If(self.mem_wr_data.valid & self.mem_wr_data.ready):
            m.d.sync += write_beats.eq(write_beats + 1)
            with m.If(written < total):
                m.d.sync += written.eq(written + 1)
            with m.Else():
                m.d.sync += [record_sent.eq(1), busy.eq(0), self.done.eq(1)]

        with m.If(self.start):
            m.d.sync += [addr.eq(self.insn_addr), total.eq(self.insn_count * (INSN_BYTES // bus_bytes)),
                         hang.eq(self.insn_count == 0), busy.eq(1), self.done.eq(0),
                         issued.eq(0), write_issued.eq(0), written.eq(0), read.eq(0),
                         record_req.eq(0), record_sent.eq(0), timing.eq(0), cycles.eq(0),
                         read_beats.eq(0), write_beats.eq(0)]

        if self.config.memory_system.write_response:
            m.d.comb += self.mem_wr_resp.ready.eq(1)
        m.d.comb += [self.counter_cycles.eq(cycles),
                     self.counter_dram_read_beats.eq(read_beats),
                     self.counter_dram_write_beats.eq(write_beats),
                     self.status_fetched.eq(read),
                     self.status_cmds_load.eq(Cat(hang, busy))]
        return m


def standin_verilog(config: HwConfig) -> str:
    top = StandIn(config)
    return verilog.convert(top, name="standin_top")
