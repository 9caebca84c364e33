"""Helpers to assemble DRAM images and instruction streams by hand for fsim tests.

Tests state what the program does with `hw.isa` instructions; these helpers only
place bytes and turn byte offsets into element addresses.
"""

from __future__ import annotations

import numpy as np

from vdla.hw.config import HwConfig, PRESETS
from vdla.hw import isa
from vdla.hw.isa import Finish, Load, MemType
from vdla.sim.fsim import FunctionalSimulator

TINY = PRESETS["tiny"]
# A batch of 2 and unequal blocks catch transposed or mixed-up element axes.
WIDE = HwConfig(batch=2, block_in=8, block_out=4, uop_buffer_bytes=1024, inp_buffer_bytes=1024,
                wgt_buffer_bytes=2048, acc_buffer_bytes=2048, dram_bus_bits=64,
                token_queue_depth=4, name="wide")
CONFIGS = [TINY, WIDE]


class Image:
    """A DRAM image filled region by region.

    Parameters
    ----------
    config : HwConfig
    size : int
        Bytes of DRAM.
    fill : int
        Byte every location starts as (non-zero catches stray writes).
    """

    def __init__(self, config: HwConfig, size: int = 1 << 16, fill: int = 0):
        self.config = config
        self.dram = np.full(size, fill, dtype=np.uint8)
        self.free = 0

    def alloc(self, nbytes: int) -> int:
        """Reserve ``nbytes`` at the next aligned offset; return the byte offset."""
        align = self.config.dram_alignment
        offset = -(-self.free // align) * align
        self.free = offset + nbytes
        assert self.free <= self.dram.size, "test image too small"
        return offset

    def put(self, data: np.ndarray) -> int:
        """Copy an array's bytes into a fresh region; return its byte offset."""
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        offset = self.alloc(raw.size)
        self.dram[offset:offset + raw.size] = raw
        return offset

    def element(self, offset: int, kind: str) -> int:
        """The element address of a byte offset, for ``dram_base``."""
        size = self.config.element_bytes(kind)
        assert offset % size == 0
        return offset // size

    def load_all(self, kind: str, data: np.ndarray, sram_base: int = 0, **flags) -> Load:
        """Place ``data`` (elements along axis 0) and return a LOAD of all of it."""
        count = len(data)
        return Load(memory_type=MemType[kind.upper()], sram_base=sram_base,
                    dram_base=self.element(self.put(data), kind), y_size=1, x_size=count,
                    x_stride=count, **flags)

    def load_uops(self, uops, **flags) -> Load:
        return self.load_all("uop", isa.encode_uops(uops, self.config), **flags)

    def write_program(self, instructions) -> tuple[int, int]:
        code = isa.encode_program(instructions, self.config)
        offset = self.put(code)
        return offset, len(instructions)

    def run(self, instructions, finish: bool = True, **options):
        """Encode ``instructions`` (plus a FINISH), run fsim and return its `RunResult`."""
        instructions = list(instructions) + ([Finish()] if finish else [])
        offset, count = self.write_program(instructions)
        return FunctionalSimulator(self.config, **options).run(self.dram, offset, count)

    def read(self, offset: int, kind: str, count: int) -> np.ndarray:
        """``count`` DRAM elements of ``kind`` from a byte offset, as typed arrays."""
        dtype = {"inp": np.int8, "wgt": np.int8, "out": np.int8, "acc": "<i4", "uop": "<u4"}[kind]
        size = self.config.element_bytes(kind)
        raw = self.dram[offset:offset + count * size]
        return raw.view(dtype).reshape((count, *self.config.element_shape(kind)))


def random_elements(rng: np.random.Generator, config: HwConfig, kind: str, count: int,
                    low: int | None = None, high: int | None = None) -> np.ndarray:
    """``count`` random elements of a memory kind in its dtype."""
    shape = (count, *config.element_shape(kind))
    if kind == "acc":
        low = -(1 << 31) if low is None else low
        high = (1 << 31) if high is None else high
        return rng.integers(low, high, shape, dtype=np.int64).astype(np.int32)
    if kind == "uop":
        return rng.integers(0, 1 << 32, (count,), dtype=np.uint64).astype(np.uint32)
    return rng.integers(-128, 128, shape, dtype=np.int8)
