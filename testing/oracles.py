"""Reference semantics the tests and testbenches check the accelerator against.

Each is written once, straight from the ISA's description in `vdla.hw.isa`
(int32 accumulators that wrap, shifts by the operand's low `isa.SHIFT_BITS`
bits, REQUANT's shift and relu in its immediate) with plain Python ints or
numpy int64, never with the code under test (`vdla.sim.fsim` included), and
imported by every test, cocotb bench and hand-built program that needs it
(as VTA's ``vta.testing.utils`` or ``amaranth/tests/utils.py`` do). It lives
in the package, not under ``tests/``, because the cocotb benches and the
hand-built programs that benchmarks run use it too.

* `wrap32`: two's-complement wrap to int32;
* `to_int8`: the low byte as int8 (what GEMM/ALU write to the out buffer);
* `requant`: the fused ALU REQUANT (``clip((a + bias) >> shift, lo, 127)``),
  and with ``even`` REQUANT_EVEN (the folded half's ties rounded to even);
* `alu`: every ALU op on int32 lanes;
* `pack` / `unpack_signed`: lanes to and from one little-endian bit vector.

Scalars (Python ints) give Python ints back, arrays give int64 arrays.
"""

from __future__ import annotations

import numpy as np

from vdla.hw import isa

__all__ = ["wrap32", "to_int8", "requant", "alu", "pack", "unpack_signed"]

_SHIFT_MASK = (1 << isa.SHIFT_BITS) - 1


def wrap32(value):
    """``value`` wrapped to int32 (two's complement), as int or int64 array."""
    if isinstance(value, (int, np.integer)):
        return ((int(value) + (1 << 31)) % (1 << 32)) - (1 << 31)
    return ((np.asarray(value, dtype=np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def to_int8(values) -> np.ndarray:
    """The low 8 bits of each value as int8."""
    return (((np.asarray(values, dtype=np.int64) & 0xFF) ^ 0x80) - 0x80).astype(np.int8)


def requant(acc, bias, imm: int, even: bool = False):
    """REQUANT of accumulators ``acc`` with ``bias``: the int32 add wraps, then an
    arithmetic shift by ``imm``'s shift bits and a clip to [-128, 127] ([0, 127]
    with the relu bit); the immediate's higher bits are ignored.

    With ``even`` (REQUANT_EVEN) and a shift ``s > 0``, the sum ``x`` holds the
    half step: the result is ``(x - 2**(s-1)) / 2**s`` rounded half to even
    (numpy's ``rint``, exact in float64 for int32 sums) before the clip."""
    low = 0 if imm & isa.REQUANT_RELU else -128
    shift = imm & _SHIFT_MASK
    if isinstance(acc, (int, np.integer)) and isinstance(bias, (int, np.integer)):
        return int(requant(np.array([acc]), np.array([bias]), imm, even)[0])
    total = wrap32(np.asarray(acc, dtype=np.int64) + np.asarray(bias, dtype=np.int64))
    if even and shift:
        rounded = np.rint((total - 2.0 ** (shift - 1)) / 2.0 ** shift).astype(np.int64)
    else:
        rounded = total >> shift
    return np.clip(rounded, low, 127)


def alu(op: isa.AluOp, a, b, imm: int = 0) -> np.ndarray:
    """ALU ``op`` on int32 lanes ``a`` (destination) and ``b`` (register or
    immediate operand), ``imm`` being REQUANT's immediate; int64 results, wrapped."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if op in (isa.AluOp.REQUANT, isa.AluOp.REQUANT_EVEN):
        return requant(a, b, imm, even=op == isa.AluOp.REQUANT_EVEN)
    if op == isa.AluOp.MIN:
        result = np.minimum(a, b)
    elif op == isa.AluOp.MAX:
        result = np.maximum(a, b)
    elif op == isa.AluOp.ADD:
        result = a + b
    elif op == isa.AluOp.SHR:
        result = a >> (b & _SHIFT_MASK)
    elif op == isa.AluOp.SHL:
        result = a << (b & _SHIFT_MASK)
    elif op == isa.AluOp.MUL:
        result = a * b
    else:
        raise AssertionError(f"no reference for ALU op {op!r}")
    return wrap32(result)


def pack(values, bits: int) -> int:
    """Little-endian packing of integers (any sign) into one ``bits``-per-lane word."""
    word = 0
    for index, value in enumerate(values):
        word |= (int(value) & ((1 << bits) - 1)) << (index * bits)
    return word


def unpack_signed(word: int, bits: int, count: int) -> np.ndarray:
    """``count`` signed ``bits``-wide lanes of ``word`` (lane 0 in the low bits)."""
    values = [(word >> (index * bits)) & ((1 << bits) - 1) for index in range(count)]
    return np.array([v - (1 << bits) if v >> (bits - 1) else v for v in values], dtype=np.int64)
