"""DMA injection: copies become 2D loads/stores with padding in the pad fields."""

import math

import numpy as np
import pytest

from vdla.compiler import CompileError, Conv2d, Schedule
from vdla.compiler.accel import ir
from vdla.compiler.accel.lower import lower
from vdla.compiler.accel.passes.dma import inject_dma, lower_copy
from vdla.compiler.accel.passes.epilogue import lower_epilogues
from vdla.compiler.accel.passes.tensorize import tensorize
from vdla.compiler.accel.passes.virtual_threads import assign_virtual_threads
from vdla.hw import isa
from vdla.hw.config import PRESETS


def _execute(instructions, grid, sram_size):
    """Run LOADs by the ISA's semantics on a DRAM whose element i holds value i + 1."""
    dram = np.arange(1, math.prod(grid) + 1)
    sram = np.full(sram_size, -1)
    for insn in instructions:
        i = insn.instruction
        block = np.zeros((i.padded_y, i.padded_x), dtype=np.int64)
        for y in range(i.y_size):
            row = dram[i.dram_base + y * i.x_stride:i.dram_base + y * i.x_stride + i.x_size]
            block[i.y_pad_top + y, i.x_pad_left:i.x_pad_left + i.x_size] = row
        sram[i.sram_base:i.sram_base + block.size] = block.reshape(-1)
    return sram


def _expected(grid, start, extent):
    """The box, zero outside the grid, row-major (what the tile layouts expect)."""
    values = np.arange(1, math.prod(grid) + 1).reshape(grid)
    padded = np.pad(values, [(max(0, -s), max(0, s + e - g)) for g, s, e in zip(grid, start, extent)])
    # Shift the box into padded coordinates.
    offsets = [s + max(0, -s) for s in start]
    box = padded[tuple(slice(o, o + e) for o, e in zip(offsets, extent))]
    return box.reshape(-1)


CASES = [
    # activation tile with padding on every side of rows and columns
    ((2, 3, 5, 6), (1, 0, -1, -2), (1, 3, 7, 9)),
    # interior tile, partial rows and columns: one load per (batch, channel) plane
    ((2, 3, 8, 8), (0, 1, 2, 3), (2, 2, 3, 4)),
    # full-width rows: rows and columns merge, channels become y
    ((1, 4, 6, 5), (0, 1, 2, 0), (1, 3, 3, 5)),
    # whole tensor: a single contiguous transfer
    ((2, 3, 4, 4), (0, 0, 0, 0), (2, 3, 4, 4)),
    # weights: kernel and channels merge, output channels become y
    ((4, 5, 3, 3), (1, 1, 0, 0), (2, 3, 3, 3)),
]


@pytest.mark.parametrize("grid, start, extent", CASES)
def test_load_lands_the_padded_box(grid, start, extent):
    buffer = ir.Buffer("t", "inp", math.prod(extent) + 8, base=5)
    copy = ir.Copy("load", "data", grid, start, extent, "inp", buffer, offset=3)
    instructions = lower_copy(copy)
    sram = _execute(instructions, grid, buffer.base + buffer.entries + 3)
    got = sram[8:8 + math.prod(extent)]
    assert np.array_equal(got, _expected(grid, start, extent))
    assert all(isinstance(i.instruction, isa.Load) for i in instructions)


def test_merging_gives_few_transfers():
    counts = [len(lower_copy(ir.Copy("load", "data", g, s, e, "inp", ir.Buffer("t", "inp", 10 ** 4))))
              for g, s, e in CASES]
    assert counts == [3, 4, 1, 1, 1]


def test_padding_on_outer_axis_is_rejected():
    copy = ir.Copy("load", "data", (2, 3, 4, 4), (0, -1, 0, 0), (1, 2, 4, 4), "inp",
                   ir.Buffer("t", "inp", 100))
    with pytest.raises(CompileError, match="outer axis"):
        lower_copy(copy)


def test_store_rows_strided():
    buffer = ir.Buffer("acc", "acc", 64, base=16)
    copy = ir.Copy("store", "out", (1, 4, 6, 6), (0, 1, 2, 0), (1, 2, 2, 6), "out", buffer)
    (insn,) = [i.instruction for i in lower_copy(copy)]
    assert isinstance(insn, isa.Store) and insn.memory_type == isa.MemType.OUT
    # Rows 2..3 of channels 1..2 are two runs of 12 elements, 36 apart.
    assert (insn.y_size, insn.x_size, insn.x_stride) == (2, 12, 36)
    assert insn.dram_base == 1 * 36 + 2 * 6 and insn.sram_base == 16


def test_resident_weights_are_not_reloaded():
    """Tiles that only differ in rows reuse their thread's weight tile."""
    op = Conv2d(1, 8, 8, 12, 12, kernel=3, padding=1)
    schedule = Schedule(tile_h=2, tile_w=12, tile_k=2, tile_c=2, virtual_threads=2)
    function = lower(schedule.check(op.geometry(), PRESETS["tiny"]))
    for run in (tensorize, lower_epilogues, assign_virtual_threads, inject_dma):
        run(function)
    loads = [s.instruction for st in function.stages for s in st.body
             if isinstance(s, ir.Insn) and isinstance(s.instruction, isa.Load)]
    weights = [load for load in loads if load.memory_type == isa.MemType.WGT]
    assert len(weights) == 2      # once per thread slot
    assert function.stats["dma"]["elided_loads"] == 6 - 2


# Wide input elements (4 images x 16 channels = 8 beats at 64 bits): skipping
# columns saves more than the extra bursts cost.
WIDE = PRESETS["default"].replace(batch=4, name="batch4")


@pytest.mark.parametrize("config", [PRESETS["default"], WIDE], ids=lambda c: c.name)
@pytest.mark.parametrize("kernel, stride", [(1, 2), ((1, 2), (2, 3))])
def test_kernel_narrower_than_stride_loads_only_used_inputs(config, kernel, stride):
    """Only the input rows (and, where cheaper, columns) some output reads are loaded."""
    from vdla.compiler import compile_op
    op = Conv2d(config.batch, 32, 16, 12, 12, kernel=kernel, stride=stride)
    program = compile_op(op, config)
    plan_compact = program.metadata["tiling"]["compact"]
    kh, kw = op.kernel
    sh, sw = op.stride
    assert plan_compact == [True, config is WIDE and kernel == 1]
    cols = op.out_width * kw if plan_compact[1] else (op.out_width - 1) * sw + kw
    used = 2 * op.out_height * kh * cols       # channel blocks x rows read x columns
    inp_loads = [i for i in program.instructions
                 if isinstance(i, isa.Load) and i.memory_type == isa.MemType.INP]
    assert sum(i.y_size * i.x_size for i in inp_loads) == used
    if plan_compact[1]:
        assert all(i.x_stride == sw and i.x_size == kw for i in inp_loads if i.y_size > 1)
    else:
        # A LOAD's rows are input rows ``sh`` apart, or channel planes where a tile
        # holds one row of each (the DMA merges the planes into one transfer).
        assert all(i.x_stride in (sh * op.width, op.height * op.width)
                   for i in inp_loads if i.y_size > 1)


def test_strided_view_copy_lands_row_major():
    grid = (2, 12, 9, 2)           # (c, output rows, output cols, kernel cols) of a view
    strides = (200, 20, 2, 1)      # DRAM: 10x20 channel planes, stride-2 columns
    buffer = ir.Buffer("t", "inp", 2 * 3 * 4 * 2)
    copy = ir.Copy("load", "data", grid, (0, 1, 2, 0), (2, 3, 4, 2), "inp", buffer,
                   strides=strides)
    instructions = lower_copy(copy)
    sram = np.full(buffer.entries, -1)
    dram = np.arange(1, 1000)
    for insn in instructions:
        i = insn.instruction
        for y in range(i.y_size):
            row = dram[i.dram_base + y * i.x_stride:i.dram_base + y * i.x_stride + i.x_size]
            sram[i.sram_base + y * i.x_size:i.sram_base + (y + 1) * i.x_size] = row
    expected = [1 + c * 200 + r * 20 + w * 2 + x for c in range(2) for r in range(1, 4)
                for w in range(2, 6) for x in range(2)]
    assert sram.tolist() == expected
