"""A memory split into block-RAM-sized banks, each with one read and one write port.

FPGA block RAMs have at most two ports (iCE40: one read, one write), so a
buffer that several units use at once is split into ``banks`` equal banks by
the high bits of the address (bank ``b`` holds entries ``[b * depth / banks,
(b + 1) * depth / banks)``), and every bank is a plain 1-read 1-write memory
(``Memory`` with one read and one write port, which yosys maps to one block
RAM each).

`BankedMemory` offers any number of logical read and write ports, each
routed every cycle to the bank its address selects. Logical ports must not
use the same bank's port in the same cycle: the caller guarantees that (for
acc and out, the ISA's bank rule in `hw.isa` and the compute pipelines'
pacing do); where two do anyway, the lower-numbered port wins. A read's data
comes from the bank that port last read (its bank choice is registered with
the read), valid the cycle after the read as for any synchronous SRAM port,
and held while that bank is not read again. Reads are not transparent.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import Out

__all__ = ["BankedMemory", "NO_RW_CHECK", "collision_attrs"]

# Yosys's name for "this memory's same-entry read and write in one cycle are
# don't-care"; `hw.generate.mark_collision_dont_care` applies it to the read ports.
NO_RW_CHECK = "no_rw_check"


def collision_attrs(config) -> dict:
    """Attributes of a buffer's `Memory` (an `HwConfig` ``config``): `NO_RW_CHECK`
    under ``config.ram_collision_dont_care``, else none."""
    return {NO_RW_CHECK: 1} if config.ram_collision_dont_care else {}


class BankedMemory(wiring.Component):
    """``banks`` 1R1W memories behind ``read_ports`` and ``write_ports`` logical ports.

    Parameters
    ----------
    width, depth : int
        Bits per entry and entries in all (``depth`` a multiple of ``banks``).
    banks : int
        A power of two.
    read_ports, write_ports : int
    attrs : dict, optional
        Attributes of every bank's `Memory` (e.g. `hw.generate.collision_attrs`).

    Ports
    -----
    read : array of Out(memory.ReadPort.Signature)
    write : array of Out(memory.WritePort.Signature)
    """

    def __init__(self, width: int, depth: int, banks: int, read_ports: int, write_ports: int,
                 attrs: dict | None = None):
        if banks < 1 or banks & (banks - 1) or depth % banks:
            raise ValueError(f"banks must be a power of two dividing depth {depth}, got {banks}")
        self.width, self.depth, self.banks = width, depth, banks
        self.attrs = dict(attrs or {})
        self.addr_width = max(1, (depth - 1).bit_length())
        super().__init__({
            "read": Out(memory.ReadPort.Signature(addr_width=self.addr_width,
                                                  shape=width)).array(read_ports),
            "write": Out(memory.WritePort.Signature(addr_width=self.addr_width,
                                                    shape=width)).array(write_ports),
        })

    def bank_of(self, addr):
        """The bank an address selects (its high bits)."""
        bank_bits = (self.banks - 1).bit_length()
        return addr[self.addr_width - bank_bits:] if bank_bits else 0

    def elaborate(self, platform):
        m = Module()
        rows = self.depth // self.banks
        row_bits = max(1, (rows - 1).bit_length())
        bank_data = []
        for bank in range(self.banks):
            mem = memory.Memory(shape=self.width, depth=rows, init=[], attrs=self.attrs)
            m.submodules[f"bank{bank}"] = mem
            read, write = mem.read_port(transparent_for=()), mem.write_port()
            bank_data.append(read.data)
            # Lower-numbered logical ports win: the last assignment in an If
            # chain built in reverse order takes effect.
            for port in reversed(self.read):
                with m.If(port.en & (self.bank_of(port.addr) == bank)):
                    m.d.comb += [read.en.eq(1), read.addr.eq(port.addr[:row_bits])]
            for port in reversed(self.write):
                with m.If(port.en & (self.bank_of(port.addr) == bank)):
                    m.d.comb += [write.en.eq(1), write.addr.eq(port.addr[:row_bits]),
                                 write.data.eq(port.data)]
        for port in self.read:
            chosen = Signal(range(self.banks))
            with m.If(port.en):
                m.d.sync += chosen.eq(self.bank_of(port.addr))
            data = bank_data[0]
            for bank in range(1, self.banks):
                data = Mux(chosen == bank, bank_data[bank], data)
            m.d.comb += port.data.eq(data)
        return m
