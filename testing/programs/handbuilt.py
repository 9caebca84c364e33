"""Small hand-built programs for the RTL tests and benchmark, with numpy references.

Each builder returns a `BuiltProgram`: a DRAM image with instructions at byte
0, micro-ops and data after them, and the numpy reference of its output
region. They are written straight from `hw.isa` (no compiler), so they test
the chip and the simulators independently of the compiler. All work for any
`HwConfig` that has room for their buffers.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vdla.hw.config import HwConfig
from vdla.hw import isa
from vdla.hw.isa import REQUANT_OPS, Alu, AluOp, Finish, Gemm, Load, MemType, Store, Uop
from vdla.ints import round_up
from vdla.testing import oracles

__all__ = ["BuiltProgram", "ImageBuilder", "gemm_program", "alu_program",
           "double_buffer_program", "deadlock_program", "PROGRAMS"]


@dataclasses.dataclass
class BuiltProgram:
    """A DRAM image ready to run and what its output region must hold."""

    name: str
    dram: np.ndarray
    insn_offset: int
    insn_count: int
    instructions: list
    out_offset: int
    expected_out: np.ndarray | None  # int8, the packed out elements in DRAM order

    def out_bytes(self, dram: np.ndarray) -> np.ndarray:
        return dram[self.out_offset:self.out_offset + self.expected_out.size].view(np.int8)


class ImageBuilder:
    """Lays out regions in a DRAM image, each aligned to ``config.dram_alignment``."""

    def __init__(self, config: HwConfig, max_instructions: int = 256):
        self.config = config
        self.chunks: list[tuple[int, bytes]] = []
        self.next = self._align(max_instructions * isa.INSN_BYTES)
        self.max_instructions = max_instructions

    def _align(self, offset: int) -> int:
        return round_up(offset, self.config.dram_alignment)

    def place(self, kind: str, data: np.ndarray | bytes, elements: int | None = None) -> tuple[int, int]:
        """Put ``data`` (or reserve ``elements``) in DRAM; returns (byte offset, element base)."""
        raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data or b"")
        size = elements * self.config.element_bytes(kind) if elements is not None else len(raw)
        offset = self.next
        if raw:
            self.chunks.append((offset, raw))
        self.next = self._align(offset + max(size, 1))
        return offset, offset // self.config.element_bytes(kind)

    def uops(self, uops: list[Uop]) -> int:
        return self.place("uop", isa.encode_uops(uops, self.config).astype("<u4"))[1]

    def image(self, instructions: list, slack: int = 256) -> tuple[np.ndarray, int]:
        if len(instructions) > self.max_instructions:
            raise ValueError(f"{len(instructions)} instructions exceed the reserved "
                             f"{self.max_instructions}")
        dram = np.zeros(self._align(self.next + slack), dtype=np.uint8)
        code = isa.encode_program(instructions, self.config)
        dram[:code.size] = code
        for offset, raw in self.chunks:
            dram[offset:offset + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        return dram, len(instructions)


def _random_int8(rng, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)


def _row_load(memory_type: MemType, dram_base: int, count: int, sram_base: int = 0,
              **tokens) -> Load:
    """A LOAD of ``count`` consecutive elements (one row, no padding)."""
    return Load(memory_type=memory_type, sram_base=sram_base, dram_base=dram_base, y_size=1,
                x_size=count, x_stride=count, **tokens)


def gemm_program(config: HwConfig, m: int = 3, n: int = 2, k: int = 2, seed: int = 0) -> BuiltProgram:
    """``out[m, n] = sum_k inp[m, k] @ wgt[n, k].T`` with a zero-padded input load.

    The input tile is loaded with one zero row on top and one zero element on
    the left of every row, so the GEMM's source indices skip the padding; the
    store writes rows with a gap (``x_stride > x_size``) to check the strobes.
    """
    rng = np.random.default_rng(seed)
    b, bi, bo = config.batch, config.block_in, config.block_out
    inp = _random_int8(rng, (m * k, b, bi))
    wgt = _random_int8(rng, (n * k, bo, bi))
    builder = ImageBuilder(config)
    _, inp_base = builder.place("inp", inp)
    _, wgt_base = builder.place("wgt", wgt)
    row = k + 1  # padded input row: one zero element, then k elements
    uops = [Uop(dst=0, src=row + 1 + kk, wgt=kk) for kk in range(k)] + [Uop(dst=0, src=0, wgt=0)]
    uop_base = builder.uops(uops)
    out_stride = n + 1
    out_offset, out_base = builder.place("out", None, elements=m * out_stride)
    program = [
        _row_load(MemType.UOP, uop_base, len(uops)),
        _row_load(MemType.WGT, wgt_base, n * k),
        Load(memory_type=MemType.INP, sram_base=0, dram_base=inp_base, y_size=m, x_size=k,
             x_stride=k, y_pad_top=1, x_pad_left=1, push_next=True),
        Gemm(reset=True, uop_begin=k, uop_end=k + 1, iter_out=m, iter_in=n,
             dst_factor_out=n, dst_factor_in=1),
        Gemm(pop_prev=True, push_next=True, uop_begin=0, uop_end=k, iter_out=m, iter_in=n,
             dst_factor_out=n, dst_factor_in=1, src_factor_out=row, src_factor_in=0,
             wgt_factor_out=0, wgt_factor_in=k),
        Store(pop_prev=True, push_prev=True, memory_type=MemType.OUT, sram_base=0,
              dram_base=out_base, y_size=m, x_size=n, x_stride=out_stride),
        Finish(pop_next=True),
    ]
    dram, count = builder.image(program)
    acc = np.einsum("mkbi,nkoi->mnbo", inp.reshape(m, k, b, bi).astype(np.int64),
                    wgt.reshape(n, k, bo, bi).astype(np.int64))
    out = np.zeros((m, out_stride, b, bo), dtype=np.int8)
    out[:, :n] = (acc & 0xFF).astype(np.uint8).view(np.int8)
    return BuiltProgram("gemm", dram, 0, count, program, out_offset, out.reshape(-1))


def alu_program(config: HwConfig, seed: int = 1) -> BuiltProgram:
    """A chain of ALU ops (register and immediate, every opcode) on padded acc tiles."""
    rng = np.random.default_rng(seed)
    b, bo = config.batch, config.block_out
    tile = rng.integers(-(1 << 31), 1 << 31, size=(4, b, bo), dtype=np.int64).astype(np.int32)
    tile[0] = rng.integers(-300, 300, size=(b, bo))  # small values too, for the clamps
    other = rng.integers(-(1 << 20), 1 << 20, size=(16, b, bo), dtype=np.int64).astype(np.int32)
    builder = ImageBuilder(config)
    _, tile_base = builder.place("acc", tile)
    _, other_base = builder.place("acc", other)
    uop_base = builder.uops([Uop(dst=0, src=16, wgt=0)])
    out_offset, out_base = builder.place("out", None, elements=4 * 5)
    loops = dict(uop_begin=0, uop_end=1, iter_out=4, iter_in=4, dst_factor_out=4,
                 dst_factor_in=1, src_factor_out=4, src_factor_in=1)
    steps = [(AluOp.ADD, False, 0), (AluOp.MUL, True, 3), (AluOp.SHR, True, 2),
             (AluOp.MAX, True, -1000), (AluOp.MIN, True, 1000), (AluOp.ADD, True, -7),
             (AluOp.SHL, True, 1), (AluOp.MUL, False, 0), (AluOp.SHR, True, 33)]
    program = [
        _row_load(MemType.UOP, uop_base, 1),
        # 2x2 data, one zero row/element on every side: a 4x4 tile in acc[0:16].
        Load(memory_type=MemType.ACC, sram_base=0, dram_base=tile_base, y_size=2, x_size=2,
             x_stride=2, y_pad_top=1, y_pad_bottom=1, x_pad_left=1, x_pad_right=1),
        _row_load(MemType.ACC, other_base, 16, sram_base=16),
    ]
    for index, (op, use_imm, imm) in enumerate(steps):
        last = index == len(steps) - 1
        program.append(Alu(alu_op=op, use_imm=use_imm, imm=imm, push_next=last, **loops))
    program += [
        Store(pop_prev=True, push_prev=True, memory_type=MemType.OUT, sram_base=0,
              dram_base=out_base, y_size=4, x_size=4, x_stride=5),
        Finish(pop_next=True),
    ]
    dram, count = builder.image(program)

    acc = np.zeros((4, 4, b, bo), dtype=np.int64)
    acc[1:3, 1:3] = tile.reshape(2, 2, b, bo)
    acc = acc.reshape(16, b, bo)
    operand = other.astype(np.int64)

    for op, use_imm, imm in steps:
        # An immediate is the operand; REQUANT's is its shift and relu, with no bias.
        rhs = np.int64(0 if op in REQUANT_OPS else imm) if use_imm else operand
        acc = oracles.alu(op, acc, rhs, imm)
    out = np.zeros((4, 5, b, bo), dtype=np.int8)
    out[:, :4] = oracles.to_int8(acc.reshape(4, 4, b, bo))
    return BuiltProgram("alu", dram, 0, count, program, out_offset, out.reshape(-1))


def double_buffer_program(config: HwConfig, tiles: int = 6, m: int = 2, n: int = 2, k: int = 2,
                          seed: int = 2) -> BuiltProgram:
    """Tiles of a GEMM through two input and two output buffers: all four token queues.

    Load refills input buffer ``t % 2`` once compute has freed it
    (compute->load), compute rewrites acc/out buffer ``t % 2`` once store has
    drained it (store->compute); pushes and pops balance exactly. Each buffer
    has its own micro-ops (the ISA has no per-instruction base index).
    """
    rng = np.random.default_rng(seed)
    b, bi, bo = config.batch, config.block_in, config.block_out
    inp = _random_int8(rng, (tiles, m * k, b, bi))
    wgt = _random_int8(rng, (n * k, bo, bi))
    builder = ImageBuilder(config, max_instructions=4 * tiles + 4)
    _, inp_base = builder.place("inp", inp)
    _, wgt_base = builder.place("wgt", wgt)
    inp_tile, acc_tile = m * k, m * n
    uops, ranges = [], []
    for buffer in range(2):
        begin = len(uops)
        uops += [Uop(dst=buffer * acc_tile, src=buffer * inp_tile + kk, wgt=kk) for kk in range(k)]
        uops.append(Uop(dst=buffer * acc_tile, src=0, wgt=0))
        ranges.append((begin, begin + k))
    uop_base = builder.uops(uops)
    out_offset, out_base = builder.place("out", None, elements=tiles * acc_tile)
    program = [
        _row_load(MemType.UOP, uop_base, len(uops)),
        _row_load(MemType.WGT, wgt_base, n * k),
    ]
    loops = dict(iter_out=m, iter_in=n, dst_factor_out=n, dst_factor_in=1)
    # In stream order, as a compiler would emit them: load t, compute t, store t.
    for t in range(tiles):
        buffer = t % 2
        begin, end = ranges[buffer]
        program += [
            _row_load(MemType.INP, inp_base + t * inp_tile, inp_tile, sram_base=buffer * inp_tile,
                      pop_next=t >= 2, push_next=True),
            Gemm(reset=True, uop_begin=end, uop_end=end + 1, pop_next=t >= 2, **loops),
            Gemm(pop_prev=True, push_prev=t < tiles - 2, push_next=True, uop_begin=begin,
                 uop_end=end, src_factor_out=k, src_factor_in=0, wgt_factor_out=0,
                 wgt_factor_in=k, **loops),
            Store(pop_prev=True, push_prev=t < tiles - 2, memory_type=MemType.OUT,
                  sram_base=buffer * acc_tile, dram_base=out_base + t * acc_tile,
                  y_size=1, x_size=acc_tile, x_stride=acc_tile),
        ]
    program.append(Finish())
    dram, count = builder.image(program)
    acc = np.einsum("tmkbi,nkoi->tmnbo", inp.reshape(tiles, m, k, b, bi).astype(np.int64),
                    wgt.reshape(n, k, bo, bi).astype(np.int64))
    out = (acc & 0xFF).astype(np.uint8).view(np.int8)
    return BuiltProgram("double_buffer", dram, 0, count, program, out_offset, out.reshape(-1))


PROGRAMS = {"gemm": gemm_program, "alu": alu_program, "double_buffer": double_buffer_program}


def deadlock_program(config: HwConfig) -> BuiltProgram:
    """Compute pops a load->compute token that load never pushes."""
    builder = ImageBuilder(config)
    uop_base = builder.uops([Uop(dst=0, src=0, wgt=0)])
    program = [
        _row_load(MemType.UOP, uop_base, 1),
        Gemm(pop_prev=True, uop_begin=0, uop_end=1),
        Finish(),
    ]
    dram, count = builder.image(program)
    return BuiltProgram("deadlock", dram, 0, count, program, 0, None)
