"""2D strided DRAM -> SRAM loads with zero padding, and the load module.

`LoadEngine` executes one LOAD at a time for a fixed set of memory kinds (the
load module uses it for inp and wgt, compute for uop and acc). When a command
is accepted on ``cmd`` it raises ``busy`` and runs two independent walkers:

* the row walker sends one row command ``{dram_base + y * x_stride, x_size}``
  per data row to the element reader of the memory kind (`hw.dma`), which
  issues full bursts for the row and streams its elements back;
* the SRAM walker visits the padded ``(y_pad_top + y_size + y_pad_bottom) x
  (x_pad_left + x_size + x_pad_right)`` rectangle in order, writing entry
  ``sram_base + n`` for the n-th position: a zero for a pad position (no DRAM
  traffic), otherwise the next element from the reader (waiting for it).

``busy`` drops the cycle after the last SRAM write. One SRAM write per cycle.
The engine keeps no copy of the instruction: ``cmd.payload`` must hold the
accepted LOAD until ``busy`` drops (both users run it from their own
instruction register, so a second 100-odd-bit copy would only cost flip-flops).
With ``HwConfig.registered_load_walk`` it does keep one (Yosys keeps the ~50
bits the walkers read), so a shared engine's payload multiplexer matters only as
it takes a LOAD, and it keeps the walk's flags in registers (`_RegisteredWalk`).
With ``HwConfig.registered_load_data`` as well, it decodes the memory kind as it
takes the LOAD and steps those flags by down-counters (`_CountedWalk`,
`_WalkAxis`), and its readers keep their burst lengths and a row's last element
in registers (`hw.dma`). The SRAM walk's variants are classes the engine chooses
once (`_walk_variant`); without either switch it compares counters with the
LOAD's bounds (`_ComparedWalk`).

An engine runs one LOAD at a time, so kinds whose elements have the same
size can share one element reader: with ``HwConfig.shared_load_engine`` they
do (`reader_groups`), and one `SharedLoadEngine` in the accelerator serves the
load module's and compute's LOADs in turn, each unit offering its LOAD through
an `EnginePortSignature` port. A unit holding the engine needs nothing but
DRAM to finish its LOAD, so taking turns cannot deadlock.

`LoadUnit` is the load module: it takes instructions from its command queue
in order, pops the compute->load token first if the instruction asks
(``pop_next``), runs inp/wgt LOADs on its engine, and pushes a load->compute
token (``push_next``) once the last SRAM write is done. Load has no previous
module, so ``pop_prev``/``push_prev`` are ignored, and a LOAD of another memory
type only moves tokens.
"""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from vdla.hw import isa
from vdla.hw.config import HwConfig
from vdla.hw.counters import STATUS_BITS
from vdla.hw.dma import ElementReader
from vdla.hw.layouts import (MemReadSignature, TokenSignature, instruction_layout,
                        sram_write_signature)
from vdla.hw.token_queue import pop_token, push_token, take_instruction

__all__ = ["LoadEngine", "LoadUnit", "SharedLoadEngine", "EnginePortSignature",
           "padded_nonempty", "reader_groups", "run_load"]


def reader_groups(config: HwConfig, kinds) -> dict[str, tuple[str, ...]]:
    """The element readers of an engine for ``kinds``: ``{port kind: kinds it reads}``.

    One reader per kind; with ``config.shared_load_engine`` one per element size
    (named for its first kind), as only one LOAD runs at a time.
    """
    if not config.shared_load_engine:
        return {kind: (kind,) for kind in kinds}
    groups: dict[int, list[str]] = {}
    for kind in kinds:
        groups.setdefault(config.element_bytes(kind), []).append(kind)
    return {members[0]: tuple(members) for members in groups.values()}


def load_ports(config: HwConfig, kinds) -> dict:
    """A DRAM read port ``mem_<kind>`` per element reader (`reader_groups`) and an
    SRAM write port ``sram_<kind>`` per memory kind."""
    ports = {}
    groups = reader_groups(config, kinds)
    for kind in kinds:
        if kind in groups:
            ports[f"mem_{kind}"] = Out(MemReadSignature(config.dram_bus_bits))
        ports[f"sram_{kind}"] = In(sram_write_signature(config, kind))
    return ports


class EnginePortSignature(wiring.Signature):
    """A unit's side of a `SharedLoadEngine`: it offers a LOAD on ``cmd`` (and holds
    it while ``busy``), ``busy`` and ``waiting`` as `LoadEngine`'s, for its own LOAD
    (with ``registered_load_walk`` also ``nonempty``, as `LoadEngine`'s)."""

    def __init__(self, config: HwConfig):
        members = {
            "cmd": Out(stream.Signature(instruction_layout(config, isa.Opcode.LOAD))),
            "busy": In(1),
            "waiting": In(1),
        }
        if config.registered_load_walk:
            members["nonempty"] = Out(1)
        super().__init__(members)


class LoadEngineSignature(wiring.Signature):
    """A `LoadEngine`'s ports (described there) for the memory kinds ``kinds``."""

    def __init__(self, config: HwConfig, kinds):
        members = {
            "cmd": In(stream.Signature(instruction_layout(config, isa.Opcode.LOAD))),
            "busy": Out(1),
            "waiting": Out(1),
        }
        if config.registered_load_walk:
            members["nonempty"] = In(1)
        super().__init__(members | load_ports(config, kinds))


def padded_nonempty(insn) -> Value:
    """Whether a LOAD ``insn`` (a view of the LOAD layout) has a non-empty padded
    rectangle: a row and a column, padding or data (which fields are zero, no sum)."""
    return (Cat(insn.y_pad_top, insn.y_size, insn.y_pad_bottom).any()
            & Cat(insn.x_pad_left, insn.x_size, insn.x_pad_right).any())


class LoadEngine(wiring.Component):
    """Padded 2D loads into the SRAMs of ``kinds``.

    Ports
    -----
    cmd : In(stream of the LOAD instruction layout)
    mem_<kind> : Out(MemReadSignature) for each element reader (`reader_groups`)
    sram_<kind> : In(SRAM write port signature) for each kind
    busy : Out(1)
    waiting : Out(1)
        Busy and waiting for DRAM data.
    nonempty : In(1)
        With ``registered_load_walk``: `padded_nonempty` of the offered LOAD, from
        a register of the caller (so taking a LOAD decodes none of its fields).
    """

    def __init__(self, config: HwConfig, kinds: tuple[str, ...]):
        self.config = config
        self.kinds = tuple(kinds)
        # The SRAM walk's variant, by the switches (`_ComparedWalk` and its subclasses).
        self.walk_kind = _walk_variant(config)
        super().__init__(LoadEngineSignature(config, self.kinds))

    def elaborate(self, platform):
        m = Module()
        cmd = self.cmd.payload
        accepted = self.cmd.valid & self.cmd.ready
        insn = self._held_load(m, cmd, accepted)
        busy = Signal()
        readers = self._readers(m)
        selected, reading = self._decode(m, cmd, insn, accepted)
        rect, rows_left, row_addr = self._take(m, cmd, accepted, busy)
        self._row_walker(m, readers, reading, insn, busy, rows_left, row_addr)
        walk = self.walk_kind(m, self.config, self.kinds, cmd, insn, accepted, rect)
        self._sram_walker(m, walk, readers, selected, reading, busy)
        return m

    def _held_load(self, m: Module, cmd, accepted):
        """The LOAD the walkers read: with ``registered_load_walk`` the engine's own copy
        (Yosys keeps the fields the walkers read), else ``cmd``, which the caller holds
        while busy (module docstring)."""
        if not self.config.registered_load_walk:
            return cmd
        insn = Signal(self.cmd.payload.shape(), name="insn")
        with m.If(accepted):
            m.d.sync += insn.eq(cmd)
        return insn

    def _readers(self, m: Module) -> dict:
        """An `ElementReader` per reader group (`reader_groups`), on its DRAM port."""
        config = self.config
        readers = {}
        for kind in reader_groups(config, self.kinds):
            readers[kind] = reader = ElementReader(config, config.element_bytes(kind),
                                                   count_bits=min(isa.SIZE_BITS,
                                                                  config.walker_bits),
                                                   registered=bool(config.registered_load_data))
            m.submodules[f"reader_{kind}"] = reader
            connect(m, reader.mem, flipped(getattr(self, f"mem_{kind}")))
        return readers

    def _decode(self, m: Module, cmd, insn, accepted):
        """The LOAD's memory kind (``selected``, per kind) and reader (``reading``, per
        reader: one of its kinds is selected); with ``registered_load_data`` decoded
        into registers as the LOAD is taken."""
        tight = bool(self.config.registered_load_data)
        selected = {kind: Signal(name=f"is_{kind}") for kind in self.kinds}
        decode, domain = (cmd, m.d.sync) if tight else (insn, m.d.comb)
        for kind in self.kinds:
            with m.If(accepted) if tight else nullcontext():
                domain += selected[kind].eq(decode.memory_type == isa.MemType[kind.upper()])
        reading = {}
        for group, kinds in reader_groups(self.config, self.kinds).items():
            reading[group] = selected[group] if len(kinds) == 1 else Signal(name=f"is_{group}_size")
            if len(kinds) > 1:
                with m.If(accepted) if tight else nullcontext():
                    domain += reading[group].eq(Cat(*(
                        decode.memory_type == isa.MemType[kind.upper()] if tight else selected[kind]
                        for kind in kinds)).any())
        return selected, reading

    def _take(self, m: Module, cmd, accepted, busy):
        """Taking a LOAD: the padded rectangle's bounds, computed once per instruction,
        the walk's position and the row walker's first row; ``busy`` unless the
        rectangle is empty. Returns the walk's `_Rectangle`, the data rows still to
        request and the next row's DRAM element index."""
        config = self.config
        padded_bits = config.walker_bits     # a size plus two pads, or (narrow) an SRAM's entries
        rows_total = Signal(padded_bits)
        cols_total = Signal(padded_bits)
        y_end = Signal(padded_bits)
        x_end = Signal(padded_bits)
        row = Signal(padded_bits)
        col = Signal(padded_bits)
        offset = Signal(min(isa.SRAM_ADDR_BITS, padded_bits))
        rows_left = Signal(min(isa.SIZE_BITS, padded_bits))
        row_addr = Signal(config.dram_addr_bits)

        m.d.comb += [self.cmd.ready.eq(~busy), self.busy.eq(busy)]
        with m.If(accepted):
            padded_rows = cmd.y_pad_top + cmd.y_size + cmd.y_pad_bottom
            padded_cols = cmd.x_pad_left + cmd.x_size + cmd.x_pad_right
            m.d.sync += [
                rows_total.eq(padded_rows),
                cols_total.eq(padded_cols),
                y_end.eq(cmd.y_pad_top + cmd.y_size),
                x_end.eq(cmd.x_pad_left + cmd.x_size),
                row.eq(0), col.eq(0), offset.eq(0),
                rows_left.eq(cmd.y_size),
                row_addr.eq(cmd.dram_base),
            ]
            if config.registered_load_walk:
                # Nothing to do for an empty rectangle (the caller's register says).
                m.d.sync += busy.eq(self.nonempty)
            else:
                # Nothing to do for an empty rectangle.
                m.d.sync += busy.eq((padded_rows != 0) & (padded_cols != 0))
            with m.If(cmd.x_size == 0):
                m.d.sync += rows_left.eq(0)
        return (_Rectangle(row, col, offset, rows_total, cols_total, y_end, x_end),
                rows_left, row_addr)

    def _row_walker(self, m: Module, readers, reading, insn, busy, rows_left, row_addr):
        """One row command per data row to the LOAD's reader; with
        ``registered_load_data`` whether rows remain is a register."""
        tight = self.config.registered_load_data
        rows_pending = rows_left != 0
        if tight:
            rows_pending = Signal(name="rows_pending")
            cmd = self.cmd.payload
            with m.If(self.cmd.valid & self.cmd.ready):
                m.d.sync += rows_pending.eq((cmd.y_size != 0) & (cmd.x_size != 0))
        for kind, reader in readers.items():
            m.d.comb += [
                reader.cmd.valid.eq(busy & reading[kind] & rows_pending),
                reader.cmd.payload.addr.eq(row_addr),
                reader.cmd.payload.count.eq(insn.x_size),
            ]
            with m.If(reader.cmd.valid & reader.cmd.ready):
                m.d.sync += [rows_left.eq(rows_left - 1), row_addr.eq(row_addr + insn.x_stride)]
                if tight:
                    m.d.sync += rows_pending.eq(rows_left != 1)

    def _sram_walker(self, m: Module, walk: "_ComparedWalk", readers, selected, reading, busy):
        """One SRAM write per position of the walk: a zero for padding, else the next
        element of the LOAD's reader (waiting for it); ``busy`` drops after the last."""
        groups = reader_groups(self.config, self.kinds)
        reader_of = {kind: group for group, kinds in groups.items() for kind in kinds}
        is_data, address = walk.is_data, walk.address
        element_valid = Signal()
        for kind, reader in readers.items():
            with m.If(reading[kind]):
                m.d.comb += element_valid.eq(reader.elements.valid)
        write = busy & (~is_data | element_valid)
        for kind in self.kinds:
            port, reader = getattr(self, f"sram_{kind}"), readers[reader_of[kind]]
            if self.config.registered_load_data:
                port = self._registered_write(m, kind, port)
            m.d.comb += [
                port.en.eq(write & selected[kind]),
                port.addr.eq(address),
                port.data.eq(reader.elements.payload),
            ]
            if kind in groups:
                m.d.comb += reader.elements.ready.eq(busy & reading[kind] & is_data)
            with m.If(~is_data):
                m.d.comb += port.data.eq(0)
        m.d.comb += self.waiting.eq(busy & is_data & ~element_valid)
        with m.If(write):
            m.d.sync += walk.advance()
            with m.If(walk.at_last_col):
                m.d.sync += walk.next_row()
                with m.If(walk.at_last_row):
                    m.d.sync += busy.eq(0)
            with m.Else():
                m.d.sync += walk.next_col()

    def _registered_write(self, m: Module, kind: str, written):
        """``registered_load_data``: the port the walk drives for the SRAM write port
        ``written``, which takes its write a cycle later, from registers: block RAMs
        lie far apart, so their ports take no logic after the walk's. Whoever reads
        the SRAM waits on the engine going idle, a cycle or more before its first
        read. Address and data need no reset (nothing is written without ``en``), so
        the restart's net, which reaches every reset, does not reach them."""
        port = sram_write_signature(self.config, kind).flip().create()
        held = {name: Signal.like(getattr(written, name), name=f"{kind}_write_{name}",
                                  reset_less=True) for name in ("addr", "data")}
        m.d.sync += [written.en.eq(port.en), held["addr"].eq(port.addr),
                     held["data"].eq(port.data)]
        m.d.comb += [written.addr.eq(held["addr"]), written.data.eq(held["data"])]
        return port


@dataclasses.dataclass(frozen=True)
class _Rectangle:
    """The engine's walk position and the padded rectangle's bounds (its registers)."""
    row: Signal
    col: Signal
    offset: Signal
    rows_total: Signal
    cols_total: Signal
    y_end: Signal
    x_end: Signal


def _walk_variant(config: HwConfig) -> type["_ComparedWalk"]:
    """The SRAM walk ``config``'s switches choose (``registered_load_walk``,
    ``registered_load_data``)."""
    if config.registered_load_data:
        return _CountedWalk
    return _RegisteredWalk if config.registered_load_walk else _ComparedWalk


class _ComparedWalk:
    """The SRAM walk as counters (`_Rectangle`), compared with the LOAD's bounds every
    cycle: whether the position is a data entry and whether it is the last column /
    row (`is_data`, `at_last_col`, `at_last_row`), and the entry's `address`.

    Built inside `LoadEngine.elaborate`; `advance`, `next_row` and `next_col` are
    the statements of a write, of one at the last column and of one elsewhere.
    """

    def __init__(self, m, config, kinds, cmd, insn, accepted, rect: _Rectangle):
        self.rect = rect
        self.at_last_col = rect.col == rect.cols_total - 1
        self.at_last_row = rect.row == rect.rows_total - 1
        self.is_data = ((rect.row >= insn.y_pad_top) & (rect.row < rect.y_end)
                        & (rect.col >= insn.x_pad_left) & (rect.col < rect.x_end))
        self.address = insn.sram_base + rect.offset

    def advance(self) -> list:
        return [self.rect.offset.eq(self.rect.offset + 1)]

    def next_row(self) -> list:
        return [self.rect.col.eq(0), self.rect.row.eq(self.rect.row + 1)]

    def next_col(self) -> list:
        return [self.rect.col.eq(self.rect.col + 1)]


class _RegisteredWalk(_ComparedWalk):
    """``registered_load_walk``: whether (row, col) is a data entry and whether it is
    the last column / row, kept in registers for the next position as the walk
    moves (the first position's from which fields are zero or one, no sum), and the
    SRAM address counted from the LOAD's base: the data back-pressure (the readers'
    ``elements.ready``) and the walk's steps start at flip-flops."""

    def __init__(self, m, config, kinds, cmd, insn, accepted, rect: _Rectangle):
        self.rect, self.insn = rect, insn
        row_in, col_in, col_in_first = Signal(), Signal(), Signal()
        row_last, col_last = Signal(), Signal()
        address = Signal(max(config.index_bits(kind) for kind in kinds))
        self.flags = row_in, col_in, col_in_first, row_last, col_last
        self.is_data, self.address = row_in & col_in, address
        self.at_last_col, self.at_last_row = col_last, row_last
        with m.If(accepted):
            first_col = (cmd.x_pad_left == 0) & (cmd.x_size != 0)
            m.d.sync += [row_in.eq((cmd.y_pad_top == 0) & (cmd.y_size != 0)),
                         col_in.eq(first_col), col_in_first.eq(first_col),
                         row_last.eq(_sum_is_one(cmd.y_pad_top, cmd.y_size, cmd.y_pad_bottom)),
                         col_last.eq(_sum_is_one(cmd.x_pad_left, cmd.x_size, cmd.x_pad_right)),
                         address.eq(cmd.sram_base)]

    def advance(self) -> list:
        return [self.address.eq(self.address + 1)]

    def next_row(self) -> list:
        rect, insn = self.rect, self.insn
        row_in, col_in, col_in_first, row_last, col_last = self.flags
        following = rect.row + 1
        return super().next_row() + [
            col_in.eq(col_in_first),
            row_in.eq((following >= insn.y_pad_top) & (following < rect.y_end)),
            col_last.eq(rect.cols_total == 1), row_last.eq(rect.row + 2 == rect.rows_total)]

    def next_col(self) -> list:
        rect, insn = self.rect, self.insn
        row_in, col_in, col_in_first, row_last, col_last = self.flags
        following = rect.col + 1
        return super().next_col() + [
            col_in.eq((following >= insn.x_pad_left) & (following < rect.x_end)),
            col_last.eq(rect.col + 2 == rect.cols_total)]


class _CountedWalk(_ComparedWalk):
    """``registered_load_data``: the registered walk's flags stepped by down-counters
    (`_WalkAxis`), the first column's flags in registers too, for each row's start;
    the `_Rectangle`'s position counters (row, col, offset) go unread."""

    def __init__(self, m, config, kinds, cmd, insn, accepted, rect: _Rectangle):
        self.rect, self.insn = rect, insn
        self.rows_axis = rows_axis = _WalkAxis(config.walker_bits, "row")
        self.cols_axis = cols_axis = _WalkAxis(config.walker_bits, "col")
        col_in_first, one_col = Signal(), Signal()
        self.col_in_first, self.one_col = col_in_first, one_col
        self.address = address = Signal(max(config.index_bits(kind) for kind in kinds))
        self.is_data = rows_axis.inside & cols_axis.inside
        self.at_last_col, self.at_last_row = cols_axis.last, rows_axis.last
        with m.If(accepted):
            padded_rows = cmd.y_pad_top + cmd.y_size + cmd.y_pad_bottom
            padded_cols = cmd.x_pad_left + cmd.x_size + cmd.x_pad_right
            first_col = (cmd.x_pad_left == 0) & (cmd.x_size != 0)
            single_col = _sum_is_one(cmd.x_pad_left, cmd.x_size, cmd.x_pad_right, flat=True)
            m.d.sync += rows_axis.start(
                cmd.y_pad_top, cmd.y_pad_top + cmd.y_size, padded_rows,
                (cmd.y_pad_top == 0) & (cmd.y_size != 0),
                _sum_is_one(cmd.y_pad_top, cmd.y_size, cmd.y_pad_bottom, flat=True))
            m.d.sync += cols_axis.start(cmd.x_pad_left, cmd.x_pad_left + cmd.x_size,
                                        padded_cols, first_col, single_col)
            m.d.sync += [col_in_first.eq(first_col), one_col.eq(single_col),
                         address.eq(cmd.sram_base)]

    def advance(self) -> list:
        return [self.address.eq(self.address + 1)]

    def next_row(self) -> list:
        return self.rows_axis.step() + self.cols_axis.start(
            self.insn.x_pad_left, self.rect.x_end, self.rect.cols_total, self.col_in_first,
            self.one_col)

    def next_col(self) -> list:
        return self.cols_axis.step()


class _WalkAxis:
    """One axis (rows or columns) of the load walk with ``registered_load_data``.

    Registers say whether the position is in the axis's data range (``inside``)
    and whether it is the axis's last (``last``); three down-counters to the
    data range's start and end and to the axis's end give the next position's
    flags from compares with constants only (no sum, no compare of two counters).
    """

    def __init__(self, bits: int, name: str):
        self.inside, self.last = Signal(name=f"{name}_in"), Signal(name=f"{name}_last")
        self.to_start, self.to_end, self.to_go = (Signal(bits, name=f"{name}_to_{what}")
                                                  for what in ("start", "end", "go"))

    def start(self, start, end, total, inside, last) -> list:
        """Statements that put the walk on position 0 of ``total`` positions whose data
        range is ``[start, end)``; ``inside`` and ``last`` are position 0's flags."""
        return [self.to_start.eq(start), self.to_end.eq(end), self.to_go.eq(total),
                self.inside.eq(inside), self.last.eq(last)]

    def step(self) -> list:
        """Statements that move the walk from position p to p + 1 (the counters hold
        start - p, end - p and total - p)."""
        return [self.to_start.eq(self.to_start - 1), self.to_end.eq(self.to_end - 1),
                self.to_go.eq(self.to_go - 1),
                self.inside.eq((self.inside | (self.to_start == 1)) & (self.to_end != 1)),
                self.last.eq(self.to_go == 2)]


def _sum_is_one(*fields, flat: bool = False):
    """Whether unsigned ``fields`` add up to 1: one of them is 1, the others 0.

    ``flat``: written as "no bit above bit 0 is set, and exactly one bit 0 is": one
    wide NOR beside a three-input term, which Yosys maps shallower.
    """
    if flat:
        high = Cat(*(field[1:] for field in fields))
        lows = [field[0] for field in fields]
        exactly_one = Cat(*(low & ~Cat(*lows[:index], *lows[index + 1:]).any()
                            for index, low in enumerate(lows))).any()
        return ~high.any() & exactly_one
    terms = []
    for index, field in enumerate(fields):
        others = Cat(*(other for position, other in enumerate(fields) if position != index))
        terms.append((field == 1) & (others == 0))
    return Cat(*terms).any()


def run_load(m: Module, engine, unit, start: str, wait: str, then: str, only_if=None):
    """Emit, inside the caller's FSM, the states that run one LOAD on ``engine``.

    In ``start`` the engine is offered the LOAD on ``cmd`` (whose payload the
    caller drives); once it takes it, ``wait`` waits for its last SRAM
    write, then goes to ``then``. ``unit.busy`` is high in both states and
    ``unit.wait_mem`` while the engine waits for DRAM data.

    Parameters
    ----------
    m : Module
        The caller's module, inside its ``with m.FSM()``.
    engine
        A `LoadEngine`, or a unit's `EnginePortSignature` port.
    unit
        The calling component (``busy`` and ``wait_mem`` outputs).
    start, wait, then : str
        State names.
    only_if : Value, optional
        When given and low in ``start``, the LOAD is not run: ``start`` goes
        straight to ``then`` (after one busy cycle).
    """
    with m.State(start):
        run = 1 if only_if is None else only_if
        m.d.comb += [unit.busy.eq(1), engine.cmd.valid.eq(run)]
        if only_if is None:
            with m.If(engine.cmd.ready):
                m.next = wait
        else:
            with m.If(~only_if):
                m.next = then
            with m.Elif(engine.cmd.ready):
                m.next = wait
    with m.State(wait):
        m.d.comb += [unit.busy.eq(1), unit.wait_mem.eq(engine.waiting)]
        with m.If(~engine.busy):
            m.next = then


class SharedLoadEngine(wiring.Component):
    """One `LoadEngine` for every memory kind, taken in turn by ``clients`` units.

    Each client offers a LOAD on its `EnginePortSignature` port; when the engine
    is free it takes one (round robin between clients offering at once), and
    that client owns it, its ``busy`` and ``waiting`` and the LOAD it must hold,
    until the last SRAM write.

    Ports
    -----
    clients : array of In(EnginePortSignature)
    mem_<kind> : Out(MemReadSignature) for each element reader (`reader_groups`)
    sram_<kind> : In(SRAM write port signature) for inp, wgt, uop and acc
    """

    KINDS = ("inp", "wgt", "uop", "acc")

    def __init__(self, config: HwConfig, clients: int = 2):
        self.config = config
        self.n_clients = clients
        super().__init__({"clients": In(EnginePortSignature(config)).array(clients)}
                         | load_ports(config, self.KINDS))

    def elaborate(self, platform):
        m = Module()
        config = self.config
        m.submodules.engine = engine = LoadEngine(config, self.KINDS)
        for name in load_ports(config, self.KINDS):
            connect(m, getattr(engine, name), flipped(getattr(self, name)))

        n = self.n_clients
        owner, last, pick = Signal(range(n)), Signal(range(n)), Signal(range(n))
        # Round robin: the lowest offering client above `last`, else the lowest.
        for i in reversed(range(n)):
            with m.If(self.clients[i].cmd.valid):
                m.d.comb += [pick.eq(i), engine.cmd.valid.eq(1)]
        for i in reversed(range(n)):
            with m.If(self.clients[i].cmd.valid & (last < i)):
                m.d.comb += pick.eq(i)
        # The LOAD being taken, then the owner's while the engine runs it (with
        # `registered_load_walk` the engine reads it only as it takes it).
        current = pick if self.config.registered_load_walk else Mux(engine.busy, owner, pick)
        for i, client in enumerate(self.clients):
            with m.If(current == i):
                m.d.comb += engine.cmd.payload.eq(client.cmd.payload)
                if self.config.registered_load_walk:
                    m.d.comb += engine.nonempty.eq(client.nonempty)
            m.d.comb += [client.cmd.ready.eq(engine.cmd.ready & (pick == i)),
                         client.busy.eq(engine.busy & (owner == i)),
                         client.waiting.eq(engine.waiting & (owner == i))]
        with m.If(engine.cmd.valid & engine.cmd.ready):
            m.d.sync += [owner.eq(pick), last.eq(pick)]
        return m


class _OwnEngine:
    """The load module's LOADs on a `LoadEngine` of its own (a submodule), whose DRAM
    read and SRAM write ports are the module's; `members` are the ports, `build`
    returns the engine."""

    @staticmethod
    def members(config: HwConfig) -> dict:
        return load_ports(config, LoadUnit.KINDS)

    @staticmethod
    def build(m: Module, unit: "LoadUnit"):
        m.submodules.engine = engine = LoadEngine(unit.config, unit.KINDS)
        for name in load_ports(unit.config, unit.KINDS):
            connect(m, getattr(engine, name), flipped(getattr(unit, name)))
        return engine


class _SharedEngine(_OwnEngine):
    """``shared_load_engine``: the load module's LOADs offered on ``engine`` to the
    accelerator's `SharedLoadEngine`."""

    @staticmethod
    def members(config):
        return {"engine": Out(EnginePortSignature(config))}

    @staticmethod
    def build(m, unit):
        return unit.engine


class LoadUnitSignature(wiring.Signature):
    """The load module's ports, described in `LoadUnit`; its LOAD ports are those of
    the variant ``config.shared_load_engine`` chooses (`_OwnEngine`, `_SharedEngine`)."""

    def __init__(self, config: HwConfig):
        super().__init__({
            "cmds": In(stream.Signature(HwConfig.INSN_BITS)),
            "from_compute": In(TokenSignature),
            "to_compute": Out(TokenSignature),
            "busy": Out(1), "wait_token": Out(1), "wait_mem": Out(1), "idle": Out(1),
            "retired": Out(STATUS_BITS),
        } | _engine_variant(config).members(config))


def _engine_variant(config: HwConfig) -> type[_OwnEngine]:
    return _SharedEngine if config.shared_load_engine else _OwnEngine


class LoadUnit(wiring.Component):
    """The load module: inp and wgt LOADs from its command queue.

    Ports
    -----
    cmds : In(stream of instruction words)
    from_compute : In(token stream)    (compute->load queue)
    to_compute : Out(token stream)     (load->compute queue)
    mem_inp, mem_wgt : Out(MemReadSignature)
    sram_inp, sram_wgt : In(SRAM write port signature)
        Without ``shared_load_engine``; with it, instead:
    engine : Out(EnginePortSignature)
        Its LOADs, to the accelerator's `SharedLoadEngine`.
    busy, wait_token, wait_mem : Out(1)   (counter events)
    idle : Out(1)                         (no instruction in progress)
    retired : Out(STATUS_BITS)
    """

    KINDS = ("inp", "wgt")

    def __init__(self, config: HwConfig):
        self.config = config
        self.engine_kind = _engine_variant(config)
        super().__init__(LoadUnitSignature(config))

    def elaborate(self, platform):
        m = Module()
        config = self.config
        layout = instruction_layout(config, isa.Opcode.LOAD)
        engine = self.engine_kind.build(m, self)

        word = Signal(HwConfig.INSN_BITS)
        insn = data.View(layout, word[:layout.size])

        def is_ours(load):
            return (load.memory_type == isa.MemType.INP) | (load.memory_type == isa.MemType.WGT)

        ours = is_ours(insn)
        retired = Signal(STATUS_BITS)
        m.d.comb += [self.retired.eq(retired), engine.cmd.payload.eq(insn)]
        if config.registered_load_walk:
            # Whether the LOAD is ours and non-empty, decoded as the word is taken:
            # offering it to the engine decodes nothing.
            incoming = data.View(layout, self.cmds.payload[:layout.size])
            ours, nonempty = Signal(name="ours"), Signal(name="nonempty")
            with m.If(self.cmds.valid & self.cmds.ready):
                m.d.sync += [ours.eq(is_ours(incoming)), nonempty.eq(padded_nonempty(incoming))]
            m.d.comb += engine.nonempty.eq(nonempty)

        with m.FSM():
            take_instruction(m, self, word)
            with pop_token(m, self, insn.pop_next, self.from_compute):
                m.next = "START"
            run_load(m, engine, self, "START", "WAIT", then="PUSH", only_if=ours)
            push_token(m, self, insn.push_next, self.to_compute, retired)
        return m
