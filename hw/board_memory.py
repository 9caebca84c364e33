"""On-chip memory standing in for DRAM on a board: the accelerator's memory port
served from one block RAM, and a byte port for the host link.

The memory is ``memory_bytes`` deep in words of the DRAM bus width, with one
read port and one byte-enabled write port (what ECP5 and iCE40 block RAMs
offer). ``host_owns`` chooses who drives the ports: the host link between
programs, the accelerator while one runs; the two never use it at once, so no
arbitration is needed.

Accelerator side (the contract of `hw.accelerator`'s ``mem_*`` ports). A read
burst is taken when no other read burst is in progress; its beats leave at one
per cycle, the read port's enable dropping while ``rd_data.ready`` is low so
the word on its output is held (one cycle of latency, no skid buffer). A
write burst is taken when the previous one has had all its beats; each beat
is written with its byte strobes. Addresses wrap at the memory's size (the
host driver checks that a program fits).

Host side: ``host_addr`` (byte address), ``host_write`` with ``host_wdata``
writes one byte; ``host_read`` reads one, on ``host_rdata`` the next cycle.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.config import HwConfig
from vdla.hw.layouts import REQUEST_LAYOUT, log2, write_beat_layout

__all__ = ["OnChipMemory"]


class OnChipMemory(wiring.Component):
    """Block RAM behind the accelerator's DRAM port, with a host byte port."""

    def __init__(self, config: HwConfig, memory_bytes: int):
        if memory_bytes < config.dram_bus_bytes or memory_bytes & (memory_bytes - 1):
            raise ValueError(f"memory_bytes: a power of two of at least {config.dram_bus_bytes} "
                             f"bytes (one bus word), got {memory_bytes}")
        self.config = config
        self.memory_bytes = memory_bytes
        super().__init__({
            "host_owns": In(1),
            "host_addr": In(32),
            "host_write": In(1),
            "host_wdata": In(8),
            "host_read": In(1),
            "host_rdata": Out(8),
            "rd_req": In(stream.Signature(REQUEST_LAYOUT)),
            "rd_data": Out(stream.Signature(config.dram_bus_bits)),
            "wr_req": In(stream.Signature(REQUEST_LAYOUT)),
            "wr_data": In(stream.Signature(write_beat_layout(config))),
        })

    def elaborate(self, platform):
        m = Module()
        config = self.config
        bus_bytes = config.dram_bus_bytes
        depth = self.memory_bytes // bus_bytes
        word_shift = log2(bus_bytes)
        m.submodules.storage = storage = memory.Memory(shape=config.dram_bus_bits, depth=depth,
                                                       init=[])
        read = storage.read_port()
        write = storage.write_port(granularity=8)

        # ------------------------------------------------ accelerator reads
        read_word = Signal(32)
        reads_left = Signal(16)
        out_valid = Signal()
        issue = ~self.host_owns & (reads_left != 0) & (~out_valid | self.rd_data.ready)
        m.d.comb += [self.rd_req.ready.eq(~self.host_owns & (reads_left == 0)),
                     self.rd_data.valid.eq(out_valid), self.rd_data.payload.eq(read.data)]
        with m.If(self.rd_req.valid & self.rd_req.ready):
            m.d.sync += [read_word.eq(self.rd_req.payload.addr >> word_shift),
                         reads_left.eq(self.rd_req.payload.beats)]
        with m.Elif(issue):
            m.d.sync += [read_word.eq(read_word + 1), reads_left.eq(reads_left - 1)]
        with m.If(issue):
            m.d.sync += out_valid.eq(1)
        with m.Elif(self.rd_data.ready):
            m.d.sync += out_valid.eq(0)

        # ------------------------------------------------ accelerator writes
        write_word = Signal(32)
        writes_left = Signal(16)
        m.d.comb += [self.wr_req.ready.eq(~self.host_owns & (writes_left == 0)),
                     self.wr_data.ready.eq(~self.host_owns & (writes_left != 0))]
        beat = self.wr_data.valid & self.wr_data.ready
        with m.If(self.wr_req.valid & self.wr_req.ready):
            m.d.sync += [write_word.eq(self.wr_req.payload.addr >> word_shift),
                         writes_left.eq(self.wr_req.payload.beats)]
        with m.Elif(beat):
            m.d.sync += [write_word.eq(write_word + 1), writes_left.eq(writes_left - 1)]

        # ------------------------------------------------ host bytes
        host_word = self.host_addr >> word_shift
        host_lane = self.host_addr[:word_shift] if word_shift else 0
        read_lane = Signal(max(1, word_shift))
        with m.If(self.host_read):
            m.d.sync += read_lane.eq(host_lane)
        m.d.comb += self.host_rdata.eq(read.data.word_select(read_lane, 8) if word_shift
                                       else read.data)

        # ------------------------------------------------ port sharing
        m.d.comb += [
            read.addr.eq(Mux(self.host_owns, host_word, read_word)),
            read.en.eq(Mux(self.host_owns, self.host_read, issue)),
            write.addr.eq(Mux(self.host_owns, host_word, write_word)),
            write.data.eq(Mux(self.host_owns, self.host_wdata.replicate(bus_bytes),
                              self.wr_data.payload.data)),
            write.en.eq(Mux(self.host_owns, Mux(self.host_write, 1 << host_lane, 0),
                            Mux(beat, self.wr_data.payload.strb, 0))),
        ]
        return m
