"""On-chip memory standing in for DRAM on a board: the accelerator's memory port
served from block RAM, and a byte port for the host link.

The memory is ``memory_bytes`` deep in words of the DRAM bus width, of one of
the `MEMORY_KINDS`: ``"bram"``, one memory with one read port and one
byte-enabled write port (what ECP5 and iCE40 block RAMs offer) as deep as the
whole memory, which Yosys slices by bits: on ECP5, 128 KiB on a 64-bit bus are
64 DP16KD of 16K x 1, each holding one bit of every word, so a word is read
from all of them at once and no multiplexer gathers it from banks (banks with
their own output registers and a read multiplexer after them cost far more
logic and flip-flops); ``"spram"``,
banks of `SPRAM_WORDS` words with one port shared by reads and byte-enabled
writes (the iCE40 UP5K's four 16K x 16 single-port RAMs, SB_SPRAM256KA, side
by side to the bus width): there a write takes the port and an accelerator
read waits for the next cycle. Reads are pipelined (`read_latency`): the RAM
reads, then the addressed bank's word is registered.
``host_owns`` chooses who drives the ports: the host link between programs,
the accelerator while one runs; the two never use them at once, so no
arbitration is needed.

Accelerator side (the contract of `hw.accelerator`'s ``mem_*`` ports). A read
burst is taken when no other read burst is in progress; its beats leave at one
per cycle through the read pipeline and a small FIFO. A write burst is taken
when the previous one has had all its beats; each beat is written with its
byte strobes, into the block RAM the cycle after it is accepted (a read of
the same word issued in that cycle sees the old data: the accelerator never
does that, a store and a later load are ordered by dependency tokens across
many cycles). Addresses wrap at the memory's size (the host driver checks that
a program fits).

Host side: ``host_addr`` (byte address), ``host_write`` with ``host_wdata``
writes one byte; ``host_read`` reads one, on ``host_rdata`` `read_latency`
cycles later (not in the cycle after a ``host_write``, whose byte then takes a
single-port bank's port: the host link never does that).
"""

from __future__ import annotations

from typing import NamedTuple

from amaranth import Array, Cat, Module, Mux, Signal, Value
from amaranth.lib import memory, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from vdla.hw.banked_memory import NO_RW_CHECK
from vdla.hw.config import HwConfig
from vdla.hw.layouts import REQUEST_LAYOUT, burst_beats_bits, log2, write_beat_layout

__all__ = ["OnChipMemory", "memory_ports", "read_latency", "MEMORY_KINDS"]

# Words per single-port bank: one iCE40 SB_SPRAM256KA deep (16K x 16).
SPRAM_WORDS = 16 * 1024
MEMORY_KINDS = ("bram", "spram")


def memory_ports(config: HwConfig, host_busy: bool = False) -> dict:
    """The ports of a board's memory: the host's byte port (``host_busy`` when its
    accesses can wait) and the accelerator's DRAM read and write streams."""
    return {
        "host_owns": In(1),
        "host_addr": In(32),
        "host_write": In(1),
        "host_wdata": In(8),
        "host_read": In(1),
        "host_rdata": Out(8),
        **({"host_busy": Out(1)} if host_busy else {}),
        "rd_req": In(stream.Signature(REQUEST_LAYOUT)),
        "rd_data": Out(stream.Signature(config.dram_bus_bits)),
        "wr_req": In(stream.Signature(REQUEST_LAYOUT)),
        "wr_data": In(stream.Signature(write_beat_layout(config))),
    }


def read_latency(kind: str) -> int:
    """Cycles from a read's address to its word in the last pipeline register:
    the RAM's read, then the word register (the same for every kind)."""
    if kind not in MEMORY_KINDS:
        raise ValueError(f"kind: one of {', '.join(MEMORY_KINDS)}, got {kind!r}")
    return 2


class _BlockRamFifo(SyncFIFOBuffered):
    """`SyncFIFOBuffered` with its storage in a block RAM: Yosys keeps a memory of a
    few words in flip-flops, which a part whose block RAMs outnumber its logic (the
    iCE40 UP5K) can spare less. No entry is read in the cycle it is written (the
    FIFO reads its storage only when it holds a word not yet read, which is never
    the entry it writes), so a collision is don't-care (`NO_RW_CHECK`)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.submodules.storage.attrs.update({"ram_style": "block", NO_RW_CHECK: 1})
        return m


class _Ports(NamedTuple):
    """What the RAM's ports see this cycle, from the host or the accelerator."""

    read_word: Signal       # the accelerator's next read word
    write_word: Signal      # the accelerator's next write word
    read_address: Value
    write_address: Value
    host_lane: Value | int  # the host's byte in its word
    beat: Value             # an accelerator write beat is taken
    write_data: Value
    write_strobes: Value


class OnChipMemory(wiring.Component):
    """Block RAM behind the accelerator's DRAM port, with a host byte port.

    Parameters
    ----------
    config : HwConfig
    memory_bytes : int
        A power of two, at most ``2 ** config.dram_addr_bits``.
    kind : str
        One of `MEMORY_KINDS` (module docstring).
    """

    def __init__(self, config: HwConfig, memory_bytes: int, kind: str = "bram"):
        if memory_bytes < config.dram_bus_bytes or memory_bytes & (memory_bytes - 1):
            raise ValueError(f"memory_bytes: a power of two of at least {config.dram_bus_bytes} "
                             f"bytes (one bus word), got {memory_bytes}")
        if memory_bytes > 1 << config.dram_addr_bits:
            raise ValueError(f"memory_bytes: {memory_bytes} bytes is more than the config's "
                             f"{config.dram_addr_bits}-bit DRAM addresses reach")
        if kind not in MEMORY_KINDS:
            raise ValueError(f"kind: one of {', '.join(MEMORY_KINDS)}, got {kind!r}")
        self.config = config
        self.memory_bytes = memory_bytes
        self.kind = kind
        super().__init__(memory_ports(config))

    def elaborate(self, platform):
        m = Module()
        depth = self.memory_bytes // self.config.dram_bus_bytes
        banks, bank_bits = self._banks(m, depth)
        ports = self._ports(depth)
        word, writing = self._read_pipeline(m, banks, bank_bits, ports)
        self._accelerator_reads(m, ports.read_word, word, writing)
        self._accelerator_writes(m, ports.write_word, ports.beat)
        # The addressed byte of the pipeline's word, `latency` cycles after
        # `host_read` (the host link holds `host_addr` meanwhile).
        m.d.comb += self.host_rdata.eq(word.word_select(ports.host_lane, 8)
                                       if log2(self.config.dram_bus_bytes) else word)
        return m

    def _banks(self, m: Module, depth: int) -> tuple[list, int]:
        """The memory's banks, each with its read port and byte-enabled write port,
        and the address bits of a bank: one bank as deep as the memory, or
        single-port banks of at most `SPRAM_WORDS` words."""
        bank_words = min(depth, SPRAM_WORDS) if self.kind == "spram" else depth
        banks = []
        for index in range(depth // bank_words):
            bank = memory.Memory(shape=self.config.dram_bus_bits, depth=bank_words, init=[])
            m.submodules[f"bank{index}"] = bank
            banks.append((bank.read_port(), bank.write_port(granularity=8)))
        return banks, log2(bank_words)

    def _ports(self, depth: int) -> _Ports:
        """Who drives the ports this cycle: the host between programs, else the
        accelerator."""
        bus_bytes = self.config.dram_bus_bytes
        word_shift = log2(bus_bytes)
        word_bits = max(1, log2(depth))   # addresses wrap at the memory's size
        read_word = Signal(word_bits)
        write_word = Signal(word_bits)
        host_word = (self.host_addr >> word_shift)[:word_bits]
        host_lane = self.host_addr[:word_shift] if word_shift else 0
        beat = self.wr_data.valid & self.wr_data.ready
        return _Ports(
            read_word=read_word, write_word=write_word,
            read_address=Mux(self.host_owns, host_word, read_word),
            write_address=Mux(self.host_owns, host_word, write_word),
            host_lane=host_lane, beat=beat,
            write_data=Mux(self.host_owns, self.host_wdata.replicate(bus_bytes),
                           self.wr_data.payload.data),
            write_strobes=Mux(self.host_owns, Mux(self.host_write, 1 << host_lane, 0),
                              Mux(beat, self.wr_data.payload.strb, 0)))

    def _read_pipeline(self, m: Module, banks: list, bank_bits: int, ports: _Ports):
        """Cycle 1: every bank reads. Cycle 2: the addressed bank's word is
        registered. Writes reach the banks one cycle after they are accepted, from
        registers: the address and data fan out to every bank from one flip-flop
        each. Returns the registered word and whether a write takes a single-port
        bank's port this cycle."""
        config = self.config
        single_port = self.kind == "spram"
        index_bits = max(1, log2(len(banks)))
        bank_select = ports.read_address[bank_bits:bank_bits + index_bits]
        write_bank = ports.write_address[bank_bits:bank_bits + index_bits]
        read_bank = Signal(range(len(banks)))
        word = Signal(config.dram_bus_bits)
        stored_address = Signal(bank_bits)
        stored_data = Signal(config.dram_bus_bits)
        m.d.sync += [stored_address.eq(ports.write_address[:bank_bits]),
                     stored_data.eq(ports.write_data)]
        writing = Signal()   # a write reaches a bank this cycle
        bank_strobes = []
        for index, (read, write) in enumerate(banks):
            strobes = Signal(config.dram_bus_bytes, name=f"bank{index}_strobes")
            bank_strobes.append(strobes)
            m.d.sync += strobes.eq(Mux(write_bank == index, ports.write_strobes, 0)
                                   if len(banks) > 1 else ports.write_strobes)
            m.d.comb += [read.addr.eq(ports.read_address[:bank_bits]),
                         write.addr.eq(stored_address),
                         write.data.eq(stored_data), write.en.eq(strobes)]
            if single_port:
                # One address for both ports (Yosys then maps them to one RAM
                # port): a write has it, the read is not enabled meanwhile (its
                # data holds, as the SPRAM's does).
                shared = Signal(bank_bits, name=f"bank{index}_address")
                m.d.comb += [shared.eq(Mux(strobes != 0, stored_address,
                                           ports.read_address[:bank_bits])),
                             read.addr.eq(shared), write.addr.eq(shared),
                             read.en.eq(strobes == 0)]
        m.d.comb += writing.eq(Cat(bank_strobes).any() if single_port else 0)
        m.d.sync += [read_bank.eq(bank_select if len(banks) > 1 else 0),
                     word.eq(Array(read.data for read, _ in banks)[read_bank])]
        return word, writing

    def _accelerator_reads(self, m: Module, read_word: Signal, word: Signal, writing):
        """Read bursts through the pipeline into a small FIFO towards the
        accelerator, so that backpressure needs no hold logic on the RAM; the FIFO
        is deep enough to keep one beat per cycle flowing with `read_latency` reads
        in the pipeline. Beside single-port RAMs (the UP5K) its words are in a
        block RAM (`_BlockRamFifo`), not in flip-flops."""
        config = self.config
        latency = read_latency(self.kind)
        fifo_depth = latency + 1
        fifo_kind = _BlockRamFifo if self.kind == "spram" else SyncFIFOBuffered
        m.submodules.read_fifo = read_fifo = fifo_kind(width=config.dram_bus_bits,
                                                       depth=fifo_depth)
        reads_left = Signal(burst_beats_bits(config))
        in_pipeline = Signal(latency)  # one bit per stage holding an accelerator read
        room = read_fifo.level + sum(bit.as_unsigned() for bit in in_pipeline) < fifo_depth
        issue = ~self.host_owns & (reads_left != 0) & room & ~writing
        m.d.comb += self.rd_req.ready.eq(~self.host_owns & (reads_left == 0))
        with m.If(self.rd_req.valid & self.rd_req.ready):
            m.d.sync += [read_word.eq(self.rd_req.payload.addr >> log2(config.dram_bus_bytes)),
                         reads_left.eq(self.rd_req.payload.beats)]
        with m.Elif(issue):
            m.d.sync += [read_word.eq(read_word + 1), reads_left.eq(reads_left - 1)]
        m.d.sync += in_pipeline.eq(Cat(issue, in_pipeline[:-1]))
        m.d.comb += [read_fifo.w_data.eq(word), read_fifo.w_en.eq(in_pipeline[-1]),
                     self.rd_data.valid.eq(read_fifo.r_rdy),
                     self.rd_data.payload.eq(read_fifo.r_data),
                     read_fifo.r_en.eq(self.rd_data.ready)]

    def _accelerator_writes(self, m: Module, write_word: Signal, beat):
        """Write bursts: each beat to the next word, with its strobes."""
        word_shift = log2(self.config.dram_bus_bytes)
        writes_left = Signal(burst_beats_bits(self.config))
        m.d.comb += [self.wr_req.ready.eq(~self.host_owns & (writes_left == 0)),
                     self.wr_data.ready.eq(~self.host_owns & (writes_left != 0))]
        with m.If(self.wr_req.valid & self.wr_req.ready):
            m.d.sync += [write_word.eq(self.wr_req.payload.addr >> word_shift),
                         writes_left.eq(self.wr_req.payload.beats)]
        with m.Elif(beat):
            m.d.sync += [write_word.eq(write_word + 1), writes_left.eq(writes_left - 1)]
