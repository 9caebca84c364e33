"""Amaranth layouts and signatures derived from `HwConfig` and `hw.isa`.

The RTL never restates a field position or width: instruction and micro-op
layouts are built here from `hw.isa.formats` / `hw.isa.uop_fields` (fields are
packed from bit 0 upwards, exactly as `data.StructLayout` places members), and
the memory-port and SRAM-port signatures shared by the blocks are defined once.

Memory ports (`MemReadSignature`, `MemWriteSignature`) follow the top-level
contract: a read is a burst request ``{addr, beats}`` (byte address aligned to
the bus) answered by ``beats`` data beats in request order; a write is a burst
request followed by ``beats`` beats of ``{data, strb}``, and (a memory system
with a write response, `HwConfig.memory_system`) one response per burst on
``resp``, in request order, once its data is visible to reads. All are
`amaranth.lib.stream` handshakes (a transfer happens when valid and ready are
both high; valid, once raised, stays up with a stable payload until taken).
"""

from __future__ import annotations

from amaranth import Mux, signed, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw import isa
from vdla.hw.config import HwConfig

__all__ = [
    "REQUEST_LAYOUT", "BURST_BEATS_BITS", "MAX_BURST_BEATS", "burst_beats_bits", "legal_burst",
    "instruction_layout", "uop_layout",
    "MemReadSignature", "MemWriteSignature", "write_beat_layout", "row_command_layout",
    "sram_read_signature", "sram_write_signature", "TokenSignature",
    "WriteResponseSignature", "log2",
]

# A burst request on the DRAM port: byte address and number of beats (>= 1).
BURST_BEATS_BITS = 16
REQUEST_LAYOUT = data.StructLayout({"addr": HwConfig.DRAM_ADDR_BITS, "beats": BURST_BEATS_BITS})

# Longest burst a block issues. Long enough to amortise the read latency, short
# enough that one client cannot hold the shared port for long.
MAX_BURST_BEATS = 256


def burst_beats_bits(config: HwConfig) -> int:
    """Bits a burst's beat count is kept in by the blocks that count down a burst's
    beats (the store, a board's memory): a request's ``beats`` field, or with
    ``config.narrow_walkers`` enough for `MAX_BURST_BEATS`, the longest burst any
    block issues."""
    return MAX_BURST_BEATS.bit_length() if config.narrow_walkers else BURST_BEATS_BITS


def legal_burst(config: HwConfig, beats, addr):
    """The first burst of a transfer of ``beats`` beats from byte ``addr``, in beats.

    At most `MAX_BURST_BEATS` and the memory system's ``max_burst_beats``, and
    (its ``boundary_bytes``) ending at the next boundary, so every request a
    block issues is legal on the bus (AXI: no burst crosses 4 KB). An
    Amaranth expression of ``beats`` (a count) and ``addr`` (bus aligned).
    """
    rules = config.memory_system
    limit = min(MAX_BURST_BEATS, rules.max_burst_beats)
    burst = Mux(beats > limit, limit, beats)
    if rules.boundary_bytes:
        bus_bits = log2(config.dram_bus_bytes)
        boundary_bits = log2(rules.boundary_bytes)
        # Beats from addr to the boundary: the boundary's beats less addr's offset in it.
        to_boundary = (1 << (boundary_bits - bus_bits)) - addr[bus_bits:boundary_bits]
        burst = Mux(burst > to_boundary, to_boundary, burst)
    return burst


def log2(value: int) -> int:
    """Exact base-2 logarithm of a power of two."""
    assert value > 0 and value & (value - 1) == 0, value
    return value.bit_length() - 1


def _field_shape(field: isa.Field):
    return signed(field.bits) if field.signed else unsigned(field.bits)


def instruction_layout(config: HwConfig, opcode: isa.Opcode) -> data.StructLayout:
    """The layout of one instruction format, built from `hw.isa.formats`."""
    fields = isa.formats(config)[opcode]
    layout = data.StructLayout({field.name: _field_shape(field) for field in fields})
    # StructLayout packs members in order from bit 0: check it agrees with the ISA.
    for name, (lsb, bits) in isa.field_offsets(fields).items():
        assert layout[name].offset == lsb and layout[name].width == bits, name
    return layout


def uop_layout(config: HwConfig) -> data.StructLayout:
    """The micro-op layout (``dst``, ``src``, ``wgt``), built from `hw.isa.uop_fields`."""
    fields = isa.uop_fields(config)
    layout = data.StructLayout({field.name: _field_shape(field) for field in fields})
    for name, (lsb, bits) in isa.field_offsets(fields).items():
        assert layout[name].offset == lsb and layout[name].width == bits, name
    return layout


def write_beat_layout(config: HwConfig) -> data.StructLayout:
    """One write data beat: ``data`` (bus bits) then ``strb`` (one bit per byte)."""
    return data.StructLayout({"data": config.dram_bus_bits, "strb": config.dram_bus_bytes})


def row_command_layout(count_bits: int = isa.SIZE_BITS) -> data.StructLayout:
    """One row for an element reader: first DRAM element index and element count."""
    return data.StructLayout({"addr": HwConfig.DRAM_ADDR_BITS, "count": count_bits})


class MemReadSignature(wiring.Signature):
    """A client's side of the read port: ``req`` out, ``data`` in."""

    def __init__(self, bus_bits: int):
        super().__init__({
            "req": Out(stream.Signature(REQUEST_LAYOUT)),
            "data": In(stream.Signature(bus_bits)),
        })


class MemWriteSignature(wiring.Signature):
    """A client's side of the write port: ``req`` then ``data`` beats, both out;
    with a write response (``config.memory_system.write_response``) one
    ``resp`` in per burst, once its data is visible."""

    def __init__(self, config: HwConfig):
        members = {
            "req": Out(stream.Signature(REQUEST_LAYOUT)),
            "data": Out(stream.Signature(write_beat_layout(config))),
        }
        if config.memory_system.write_response:
            members["resp"] = In(WriteResponseSignature)
        super().__init__(members)


def dram_port_members(config: HwConfig) -> dict[str, wiring.Member]:
    """The memory port as its master (the accelerator, the DRAM arbiter) declares it:
    ``mem_rd_req`` out, ``mem_rd_data`` in, ``mem_wr_req`` and ``mem_wr_data`` out,
    and with a write response (``config.memory_system.write_response``)
    ``mem_wr_resp`` in, in that order (the order of the top's ports)."""
    members = {
        "mem_rd_req": Out(stream.Signature(REQUEST_LAYOUT)),
        "mem_rd_data": In(stream.Signature(config.dram_bus_bits)),
        "mem_wr_req": Out(stream.Signature(REQUEST_LAYOUT)),
        "mem_wr_data": Out(stream.Signature(write_beat_layout(config))),
    }
    if config.memory_system.write_response:
        members["mem_wr_resp"] = In(WriteResponseSignature)
    return members


def sram_read_signature(config: HwConfig, kind: str) -> wiring.Signature:
    """A synchronous SRAM read port as its user sees it (use with ``In(...)``)."""
    return memory.ReadPort.Signature(addr_width=config.index_bits(kind),
                                     shape=config.element_bytes(kind) * 8)


def sram_write_signature(config: HwConfig, kind: str) -> wiring.Signature:
    """An SRAM write port as its user sees it (use with ``In(...)``)."""
    return memory.WritePort.Signature(addr_width=config.index_bits(kind),
                                      shape=config.element_bytes(kind) * 8)


# A write burst's response: AXI's BRESP (0 OKAY; the store takes every response
# as done, it has no error path). Two bits, not none: a top-level port of no
# bits would be written ``[-1:0]``, which Verilog reads as two.
WriteResponseSignature = stream.Signature(2)

# A dependency token carries no data: a stream whose payload is empty.
TokenSignature = stream.Signature(0)
