"""DRAM element reader: rows of elements in, burst reads out, elements back.

Dataflow: a row command ``{addr, count}`` (first DRAM element index, number of
elements) enters on ``cmd``. The request side turns it into burst read
requests on ``mem.req`` (bus-aligned byte addresses, bursts legal on the
config's memory system: `hw.layouts.legal_burst`) and, without waiting for
data, accepts the next row. The data side turns the beats arriving on
``mem.data`` back into whole elements on ``elements``, in order:

* an element at least as wide as a beat (element and bus widths are powers of
  two) spans ``element_bytes / bus_bytes`` consecutive beats, gathered little
  endian (first beat in the low bits);
* a narrower element is one lane of a beat: a row may start in the middle of
  a beat (the request starts at the aligned beat below) and the unused lanes
  before its first and after its last element are dropped. A small FIFO
  carries each row's first lane and count from the request side to the data
  side.

The data side always drains its beats as fast as ``elements`` takes them, and
users take elements unconditionally (into an SRAM or a FIFO whose space they
reserved), so a reader never holds the shared read port hostage.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.config import HwConfig
from vdla.hw import isa
from vdla.hw.layouts import (BURST_BEATS_BITS, MAX_BURST_BEATS, MemReadSignature, legal_burst,
                             log2, row_command_layout)

__all__ = ["ElementReader", "ElementReaderSignature"]


class ElementReaderSignature(wiring.Signature):
    """An `ElementReader`'s ports (described there), for elements of
    ``element_bytes`` bytes and rows of up to ``2 ** count_bits - 1`` of them."""

    def __init__(self, config: HwConfig, element_bytes: int, count_bits: int = isa.SIZE_BITS):
        log2(element_bytes)
        super().__init__({
            "cmd": In(stream.Signature(row_command_layout(count_bits))),
            "mem": Out(MemReadSignature(config.dram_bus_bits)),
            "elements": Out(stream.Signature(element_bytes * 8)),
            "outstanding": Out(32),
            "idle": Out(1),
        })


class ElementReader(wiring.Component):
    """Reads rows of ``element_bytes``-byte elements from DRAM.

    Parameters
    ----------
    config : HwConfig
    element_bytes : int
        Bytes per element (a power of two).
    count_bits : int
        Width of a row's element count.
    rows_ahead : int
        Rows whose requests may be issued before their data has arrived
        (only bounds the narrow-element row FIFO).
    take_while_full : bool
        Accept a beat in the cycle the held element is taken (``mem.data``'s
        ready follows ``elements``' ready). False: only once the element is
        gone, for a user that never has beats in flight while it holds an
        element (fetch with a one-instruction buffer): its consumer's ready
        then stays out of the memory's ready path.
    in_place : bool
        An element of several beats: write each beat into its place (the first
        in the low bits) as it arrives, instead of shifting the element down a
        beat at a time, so the first beat's bits hold their final value from
        the cycle after it arrived (`hw.fetch`'s registered dispatch decodes them).
    registered : bool
        Keep the next burst's length in a register (set with the beats left),
        so a request's length takes no compare, and (an element narrower than a
        beat) whether the held element is its row's last (set as the row starts
        and as the element before it is taken), so ``mem.data``'s ready takes
        no compare of the row's count (`hw.load` with ``registered_load_data``).

    Ports
    -----
    cmd : In(stream of {addr, count})
    mem : Out(MemReadSignature)
    elements : Out(stream of element bits)
    outstanding : Out(32)
        Beats requested (or about to be) whose data has not arrived yet.
    idle : Out(1)
        No row being issued and no data outstanding.
    """

    def __init__(self, config: HwConfig, element_bytes: int, *, count_bits: int = isa.SIZE_BITS,
                 rows_ahead: int = 4, take_while_full: bool = True, in_place: bool = False,
                 registered: bool = False):
        self.config = config
        self.registered = registered
        self.take_while_full = take_while_full
        self.in_place = in_place
        self.element_bytes = element_bytes
        self.count_bits = count_bits
        self.rows_ahead = rows_ahead
        # How elements lie in beats: the variant the element and bus widths choose.
        self.shape_kind = _shape_variant(config, element_bytes)
        super().__init__(ElementReaderSignature(config, element_bytes, count_bits))

    def elaborate(self, platform):
        m = Module()
        shape = self.shape_kind(self)
        issuing, beats_left, burst = self._requests(m, shape)
        beat_taken = self.mem.data.valid & self.mem.data.ready
        self._outstanding(m, issuing, beats_left, burst, beat_taken)
        shape.data_side(m, beat_taken)
        return m

    def _requests(self, m: Module, shape: "_ElementShape"):
        """The request side: each row's bursts, issued without waiting for data.
        Returns whether a row is being issued, its beats not yet requested and the
        next burst's length."""
        config = self.config
        beats_left = Signal(self.count_bits + log2(shape.beats_per_element) + 1)
        address = Signal(config.dram_addr_bits)   # wraps there (`HwConfig`)
        issuing = Signal()
        burst = Signal(BURST_BEATS_BITS)
        if not self.registered:   # else set with beats_left, below
            m.d.comb += burst.eq(legal_burst(config, beats_left, address))
        shape.add_row_fifo(m)
        cmd = self.cmd.payload
        byte_address = (cmd.addr << log2(self.element_bytes))[:config.dram_addr_bits]
        m.d.comb += [
            self.mem.req.valid.eq(issuing),
            self.mem.req.payload.addr.eq(address),
            self.mem.req.payload.beats.eq(burst),
        ]
        m.d.comb += self.cmd.ready.eq(shape.cmd_ready(~issuing))
        accepted = self.cmd.valid & self.cmd.ready
        with m.If(accepted & (cmd.count != 0)):
            m.d.sync += issuing.eq(1)
            row_address, row_beats = shape.row(m, cmd, byte_address)
            m.d.sync += [
                address.eq(row_address),
                beats_left.eq(row_beats),
            ]
            shape.queue_row(m, cmd)
            if self.registered:
                m.d.sync += burst.eq(legal_burst(config, row_beats, row_address))
        with m.If(self.mem.req.valid & self.mem.req.ready):
            next_address = (address + (burst << log2(config.dram_bus_bytes)))[:len(address)]
            m.d.sync += [
                address.eq(next_address),
                beats_left.eq(beats_left - burst),
            ]
            if self.registered:
                m.d.sync += burst.eq(legal_burst(config, beats_left - burst, next_address))
            with m.If(beats_left == burst):
                m.d.sync += issuing.eq(0)
        return issuing, beats_left, burst

    def _outstanding(self, m: Module, issuing, beats_left, burst, beat_taken):
        """Outstanding beats: the rest of the current row plus requested, unreceived
        ones. The arbiter (`hw.dram_arbiter`) keeps at most `dram_reads_in_flight`
        bursts outstanding, which bounds this count (with one burst to spare)."""
        in_flight = Signal(range((self.config.dram_reads_in_flight + 1) * MAX_BURST_BEATS + 1))
        requested = self.mem.req.valid & self.mem.req.ready
        m.d.sync += in_flight.eq(in_flight + Mux(requested, burst, 0) - beat_taken)
        m.d.comb += [
            self.outstanding.eq(in_flight + Mux(issuing, beats_left, 0)),
            self.idle.eq(~issuing & (in_flight == 0) & ~self.cmd.valid),
        ]


class _ElementShape:
    """How elements lie in beats, built into an `ElementReader`'s module: the variants
    `_WideElements` and `_NarrowElements`, chosen by the element and bus widths."""

    beats_per_element = 1
    lanes = 1

    def __init__(self, reader: ElementReader):
        self.reader = reader
        self.bus_bits = reader.config.dram_bus_bits

    def add_row_fifo(self, m: Module):
        """Add what carries a row from the request side to the data side: nothing."""

    def cmd_ready(self, free):
        """The command's ready, ``free`` being whether no row is being issued."""
        return free

    def row(self, m: Module, cmd, byte_address):
        """The accepted row's first request address and its beats."""
        raise NotImplementedError

    def queue_row(self, m: Module, cmd):
        """Statements that hand the accepted row to the data side: none."""

    def data_side(self, m: Module, beat_taken):
        """Turn the beats taken (``beat_taken``) into elements on ``elements``."""
        raise NotImplementedError


class _WideElements(_ElementShape):
    """Elements at least as wide as a beat: a row is ``count * beats_per_element``
    beats from its first element's byte address, and the data side gathers each
    element from its beats."""

    def __init__(self, reader):
        super().__init__(reader)
        self.beats_per_element = reader.element_bytes // reader.config.dram_bus_bytes

    def row(self, m, cmd, byte_address):
        return byte_address, cmd.count << log2(self.beats_per_element)

    def data_side(self, m: Module, beat_taken):
        """The element ``elements`` holds (``full``), gathered from its beats, little
        endian: with ``in_place`` each beat written in its place, else shifted in
        from the top."""
        reader, bus_bits, beats_per_element = self.reader, self.bus_bits, self.beats_per_element
        element = Signal(reader.element_bytes * 8)
        gathered = Signal(range(beats_per_element + 1))
        full = Signal()
        m.d.comb += [
            reader.elements.valid.eq(full),
            reader.elements.payload.eq(element),
            reader.mem.data.ready.eq(~full | reader.elements.ready if reader.take_while_full
                                     else ~full),
        ]
        with m.If(reader.elements.valid & reader.elements.ready):
            m.d.sync += full.eq(0)
        with m.If(beat_taken):
            if beats_per_element == 1:
                m.d.sync += [element.eq(reader.mem.data.payload), full.eq(1)]
            else:
                if reader.in_place:
                    m.d.sync += element.word_select(gathered, bus_bits).eq(
                        reader.mem.data.payload)
                else:
                    m.d.sync += element.eq(Cat(element[bus_bits:], reader.mem.data.payload))
                with m.If(gathered == beats_per_element - 1):
                    m.d.sync += [gathered.eq(0), full.eq(1)]
                with m.Else():
                    m.d.sync += gathered.eq(gathered + 1)


class _NarrowElements(_ElementShape):
    """Elements narrower than a beat: one lane each. A row's request starts at the
    aligned beat below its first element; a FIFO (``rows``) carries each row's
    first lane and count to the data side, which drops the lanes before the first
    and after the last element."""

    def __init__(self, reader):
        super().__init__(reader)
        self.lanes = reader.config.dram_bus_bytes // reader.element_bytes
        self.lane_bits = max(1, log2(self.lanes))

    def add_row_fifo(self, m):
        reader = self.reader
        m.submodules.rows = rows = fifo.SyncFIFO(
            width=self.lane_bits + reader.count_bits, depth=reader.rows_ahead)
        self.rows = rows

    def cmd_ready(self, free):
        return free & self.rows.w_rdy

    def row(self, m, cmd, byte_address):
        bus_bytes, lanes = self.reader.config.dram_bus_bytes, self.lanes
        self.first_lane = first_lane = cmd.addr[:self.lane_bits]
        row_beats = (first_lane + cmd.count + (lanes - 1)) >> log2(lanes)
        row_address = Cat(Const(0, log2(bus_bytes)), byte_address[log2(bus_bytes):])
        return row_address, row_beats

    def queue_row(self, m, cmd):
        m.d.comb += [
            self.rows.w_en.eq(1),
            self.rows.w_data.eq(Cat(self.first_lane, cmd.count)),
        ]

    def data_side(self, m, beat_taken):
        """The held beat's lanes offered one by one, from the row's first lane to its
        count's end; ``last_of_row`` is whether the offered element is its row's last."""
        reader, rows, lanes, lane_bits = self.reader, self.rows, self.lanes, self.lane_bits
        row_active = Signal()
        remaining = Signal(reader.count_bits)
        lane = Signal(lane_bits)
        beat = Signal(self.bus_bits)
        holding = Signal()
        taken = reader.elements.valid & reader.elements.ready
        last_of_row = remaining == 1
        if reader.registered:
            last_of_row = Signal(name="last_of_row")
            with m.If(~row_active & rows.r_rdy):
                m.d.sync += last_of_row.eq(rows.r_data[lane_bits:] == 1)
            with m.If(taken):
                m.d.sync += last_of_row.eq(remaining == 2)
        release = taken & ((lane == lanes - 1) | last_of_row)
        m.d.comb += [
            reader.elements.valid.eq(holding & row_active),
            reader.elements.payload.eq(beat.word_select(lane, reader.element_bytes * 8)),
            reader.mem.data.ready.eq(row_active & (~holding | release if reader.take_while_full
                                                   else ~holding)),
            rows.r_en.eq(~row_active),
        ]
        with m.If(~row_active & rows.r_rdy):
            m.d.sync += [
                row_active.eq(1),
                lane.eq(rows.r_data[:lane_bits]),
                remaining.eq(rows.r_data[lane_bits:]),
            ]
        with m.If(taken):
            m.d.sync += [lane.eq(lane + 1), remaining.eq(remaining - 1)]
            with m.If(last_of_row):
                m.d.sync += row_active.eq(0)
        with m.If(release):
            m.d.sync += holding.eq(0)
        with m.If(beat_taken):
            m.d.sync += [beat.eq(reader.mem.data.payload), holding.eq(1)]


def _shape_variant(config: HwConfig, element_bytes: int) -> type[_ElementShape]:
    """`_WideElements` for elements of a beat or more on ``config``'s bus, else
    `_NarrowElements`."""
    return _WideElements if element_bytes >= config.dram_bus_bytes else _NarrowElements
