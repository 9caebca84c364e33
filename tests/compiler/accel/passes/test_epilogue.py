"""Epilogue on the ALU: bias add, shift, clip (and relu) against the reference epilogue."""

import numpy as np
import pytest

from vdla.compiler import Conv2d, Schedule
from vdla.compiler.accel import ir
from vdla.compiler.accel.lower import lower
from vdla.compiler.ops import Epilogue
from vdla.compiler.accel.passes.epilogue import lower_epilogues
from vdla.hw import isa
from vdla.hw.config import PRESETS
from tests.compiler.accel.ir_interpreter import run_nest

TINY = PRESETS["tiny"]


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("bias, shift, relu", [(True, 3, True), (True, 0, False), (False, 7, False),
                                               (True, 45, True), (False, 0, True)])
def test_alu_sequence_matches_reference(bias, shift, relu, fused, rng):
    op = Conv2d(1, 4, 10, 4, 4, kernel=1, bias=bias, shift=shift, relu=relu)
    schedule = Schedule(tile_h=2, tile_w=4, tile_k=2, tile_c=1)
    function = lower(schedule.check(op.geometry(), TINY))
    lower_epilogues(function, fused=fused)
    tile = function.tiles[0]       # channel blocks 0..1 of rows 0..1
    if bias:
        function.buffer("bias").base = 100     # away from the tile (thread pass not run)
    sram = {"acc": np.zeros((TINY.depth("acc"), 1, 4), dtype=np.int64)}
    acc = rng.integers(-2 ** 20, 2 ** 20, size=(2, 8, 1, 4))
    sram["acc"][:16] = acc.reshape(16, 1, 4)
    bias_values = rng.integers(-5000, 5000, size=10)
    ops = []
    for stmt in tile.epilogue.body:
        if isinstance(stmt, ir.Copy):
            # The bias copy lands channel blocks of the bias into its region.
            blocks = np.zeros(12, dtype=np.int64)
            blocks[:10] = bias_values
            for i in range(stmt.extent[0]):
                sram["acc"][stmt.buffer.base + stmt.offset + i] = \
                    blocks.reshape(3, 1, 4)[stmt.start[0] + i]
            continue
        ops.append(ir.loop_nest(stmt)[1].op)
        run_nest(stmt, sram)
    if fused:
        assert ops == [isa.AluOp.REQUANT]      # the whole epilogue in one pass
    else:
        assert ops == ([isa.AluOp.ADD] if bias else []) + ([isa.AluOp.SHR] if shift else []) \
            + [isa.AluOp.MIN, isa.AluOp.MAX]
    # acc rows are (k block, position): channels 0..7 of the layer.
    got = sram["acc"][:16].reshape(2, 8, 4).transpose(0, 2, 1).reshape(8, 8)
    expected = Epilogue(bias, shift, relu).apply(
        acc.reshape(2, 8, 4).transpose(0, 2, 1).reshape(8, 8), bias_values[:8], channel_axis=0)
    assert np.array_equal(got.astype(np.int8), expected)
