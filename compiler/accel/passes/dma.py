"""DMA injection: logical tensor copies become 2D strided LOAD/STORE instructions.

A `ir.Copy` names a box of a DRAM tensor's blocked element grid. The box's
axes are merged from the inside out while they are contiguous in DRAM and
unpadded, so a copy becomes as few 2D transfers as the ISA allows:

* the innermost merged axis is ``x`` (contiguous elements, ``x_size``);
* the next one is ``y`` (``y_size`` rows ``x_stride`` elements apart);
* any remaining outer axes become separate instructions.

Parts of the box outside the tensor are zero padding, folded into the load's
``y_pad_*`` / ``x_pad_*`` fields (so they may only occur on the two innermost
axes and be at most 15 wide -- the operator checks that). A box that holds no
data on one of those axes (a tile whose window sees only padding) becomes a
LOAD of size 0 there: all zeros, no DRAM read. A transfer lands
row-major from ``sram_base``, matching the tile layouts of `compiler.accel.lower`.

The pass also elides a load whose exact data is already resident in the same
SRAM range (a weight tile reused by the next tile on the same thread, the
whole bias after its first load). Only loads write the inp and wgt buffers, and
compute never writes the bias region, so residency is tracked per SRAM range
and dropped when another transfer (or a compute write) overlaps it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

from vdla.compiler.accel import ir
from vdla.compiler.errors import CompileError
from vdla.hw import isa
from vdla.hw.isa import MemType

__all__ = ["inject_dma", "lower_copy"]

MAX_SIZE = (1 << isa.SIZE_BITS) - 1
MAX_PAD = (1 << isa.PAD_BITS) - 1
_MEMORY = {"inp": MemType.INP, "wgt": MemType.WGT, "acc": MemType.ACC, "out": MemType.OUT}


@dataclasses.dataclass
class _Axis:
    size: int           # elements of data along the axis
    stride: int         # DRAM elements between neighbours
    before: int = 0     # zero padding before
    after: int = 0      # zero padding after

    @property
    def padded(self) -> int:
        return self.before + self.size + self.after

    @property
    def unpadded(self) -> bool:
        return self.before == 0 and self.after == 0


def lower_copy(copy: ir.Copy) -> list[ir.Insn]:
    """The LOAD/STORE instructions of one copy (``dram_base`` relative to its tensor).

    Raises
    ------
    CompileError
        If padding falls on an outer axis or exceeds the pad fields, or a size
        does not fit its 16-bit field.
    """
    grid, start, extent = copy.grid, copy.start, copy.extent
    strides = copy.strides or [math.prod(grid[i + 1:]) for i in range(len(grid))]
    axes, base = [], 0
    for axis, (size, first, count, stride) in enumerate(zip(grid, start, extent, strides)):
        low, high = max(first, 0), min(first + count, size)
        padding = axis >= len(grid) - 2 and copy.direction == "load" and copy.strides is None
        if high <= low and not padding:
            raise CompileError(f"copy of {copy.tensor}: axis {axis} holds no data "
                               f"(box {first}..{first + count} of {size})")
        if high <= low:
            # A window that sees only padding (a pad at least the kernel's extent):
            # the LOAD writes zeros and reads no DRAM (size 0 on this axis).
            low = high = 0
            before, after = count, 0
        else:
            before, after = low - first, first + count - high
        if (before or after) and (axis < len(grid) - 2 or copy.strides is not None):
            raise CompileError(f"copy of {copy.tensor}: padding on outer axis {axis}"
                               if copy.strides is None else
                               f"copy of {copy.tensor}: padding in a strided view")
        if before > MAX_PAD or after > MAX_PAD:
            raise CompileError(f"copy of {copy.tensor}: padding {max(before, after)} exceeds the "
                               f"{isa.PAD_BITS}-bit pad fields")
        if (before or after) and copy.direction == "store":
            raise CompileError(f"store to {copy.tensor}: stores take no padding")
        base += low * stride
        axes.append(_Axis(high - low, stride, before, after))
    # Single-element unpadded axes cost nothing; dropping them lets their
    # neighbours merge (the innermost axis stays: it must be contiguous).
    axes = [a for a in axes[:-1] if a.size > 1 or not a.unpadded] + axes[-1:]
    if axes[-1].stride != 1:
        if not axes[-1].unpadded:
            raise CompileError(f"copy of {copy.tensor}: innermost axis is not contiguous")
        axes.append(_Axis(1, 1))    # strided elements: rows of one element each
    x = axes.pop()
    while axes and _mergeable(axes[-1], x):
        outer = axes.pop()
        x = _Axis(outer.size * x.size, x.stride)
    y = axes.pop() if axes else _Axis(1, x.size)
    while axes and _mergeable(axes[-1], y):
        outer = axes.pop()
        y = _Axis(outer.size * y.size, y.stride)
    if y.stride > MAX_SIZE and y.size > 1:
        if not y.unpadded:
            raise CompileError(f"copy of {copy.tensor}: row stride {y.stride} exceeds the "
                               f"{isa.SIZE_BITS}-bit x_stride field")
        axes.append(y)      # one transfer per row instead
        y = _Axis(1, x.size)
    if x.stride != 1:
        raise CompileError(f"copy of {copy.tensor}: innermost axis is not contiguous")
    if x.padded > MAX_SIZE or y.padded > MAX_SIZE:
        raise CompileError(f"copy of {copy.tensor}: {y.size}x{x.size} transfer exceeds the "
                           f"{isa.SIZE_BITS}-bit size fields")
    memory = _MEMORY[copy.memory]
    kind = isa.Load if copy.direction == "load" else isa.Store
    block = y.padded * x.padded
    sram = copy.buffer.base + copy.offset
    instructions = []
    for position, index in enumerate(itertools.product(*(range(a.size) for a in axes))):
        dram = base + sum(i * a.stride for i, a in zip(index, axes))
        instructions.append(ir.Insn(kind(
            memory_type=memory, sram_base=sram + position * block, dram_base=dram,
            y_size=y.size, x_size=x.size, x_stride=min(y.stride, MAX_SIZE) if y.size > 1
            else min(x.size, MAX_SIZE),
            y_pad_top=y.before, y_pad_bottom=y.after, x_pad_left=x.before,
            x_pad_right=x.after), tensor=copy.tensor))
    return instructions


def _mergeable(outer: _Axis, inner: _Axis) -> bool:
    return (outer.unpadded and inner.unpadded and outer.stride == inner.stride * inner.size
            and outer.size * inner.size <= MAX_SIZE)


def inject_dma(function: ir.Function, elide: bool = True) -> ir.Function:
    """Replace every `ir.Copy` by LOAD/STORE instructions, eliding resident reloads."""
    resident = {scope: [] for scope in ("inp", "wgt", "acc")}
    stats = {"loads": 0, "stores": 0, "elided_loads": 0, "load_bytes": 0, "store_bytes": 0}
    config = function.config
    for stage in function.all_stages():
        body = []
        for stmt in stage.body:
            if isinstance(stmt, (ir.Gemm, ir.Alu, ir.Loop)):
                _invalidate_compute_writes(stmt, resident)
            if not isinstance(stmt, ir.Copy):
                body.append(stmt)
                continue
            for insn in lower_copy(stmt):
                instruction = insn.instruction
                entries = instruction.padded_y * instruction.padded_x
                nbytes = instruction.y_size * instruction.x_size * config.element_bytes(stmt.memory)
                if stmt.direction == "store":
                    stats["stores"] += 1
                    stats["store_bytes"] += nbytes
                    body.append(insn)
                    continue
                key = (insn.tensor, instruction)
                span = (instruction.sram_base, instruction.sram_base + entries)
                ranges = resident[stmt.memory]
                if elide and (span, key) in ranges:
                    stats["elided_loads"] += 1
                    continue
                ranges[:] = [(s, k) for s, k in ranges if s[1] <= span[0] or s[0] >= span[1]]
                ranges.append((span, key))
                stats["loads"] += 1
                stats["load_bytes"] += nbytes
                body.append(insn)
        stage.body = body
    function.stats["dma"] = stats
    return function


def _invalidate_compute_writes(stmt, resident) -> None:
    """Compute writes acc entries: forget resident data in the buffer it writes."""
    if not resident["acc"]:
        return
    for node in ir.walk([stmt]):
        if isinstance(node, (ir.Gemm, ir.Alu)):
            buffer = node.dst.buffer
            span = (buffer.base, buffer.base + buffer.entries)
            resident["acc"][:] = [(s, k) for s, k in resident["acc"]
                                  if s[1] <= span[0] or s[0] >= span[1]]
