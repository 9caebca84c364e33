"""Tensorize: scalar MAC nests become GEMM intrinsics with the right indices."""

import numpy as np
import pytest

from vdla.compiler import Conv2d, CompileError, Schedule
from vdla.compiler.accel import ir
from vdla.compiler.accel.lower import lower
from vdla.compiler.accel.passes.tensorize import tensorize, tensorize_stmt
from vdla.hw.config import PRESETS
from tests.compiler.accel.ir_interpreter import new_sram, run_nest

TINY = PRESETS["tiny"]


def _first_mac_nest(op, schedule, config):
    function = lower(schedule.check(op.geometry(), config))
    compute = function.tiles[0].steps[0][1]
    nests = [s for s in compute.body if isinstance(ir.loop_nest(s)[1], ir.Mac)]
    assert len(nests) == 1
    return function, nests[0]


@pytest.mark.parametrize("stride, kernel", [(1, 3), (2, 3), (3, (2, 1))])
def test_gemm_uops_match_scalar_and_numpy(stride, kernel):
    op = Conv2d(1, 8, 8, 9, 9, kernel=kernel, stride=stride)
    schedule = Schedule(tile_h=2, tile_w=3, tile_k=2, tile_c=2)
    function, mac_nest = _first_mac_nest(op, schedule, TINY)
    gemm_nest = tensorize_stmt(mac_nest, TINY)
    loops, leaf = ir.loop_nest(gemm_nest)
    assert isinstance(leaf, ir.Gemm)
    assert [loop.var for loop in loops] == ["b", "k", "oh", "ow", "c", "kh", "kw"]

    scalar, tensor = new_sram(TINY), new_sram(TINY)
    run_nest(mac_nest, scalar)
    run_nest(gemm_nest, tensor)
    assert np.array_equal(scalar["acc"], tensor["acc"])

    # Direct numpy formulation on the tile's SRAM contents.
    kh, kw = op.kernel
    # A kernel narrower than the stride (unpadded) keeps only the used rows/columns.
    step_h, step_w = (k if compact else stride for k, compact in zip((kh, kw),
                                                                   function.plan.compact))
    # Rows are always compacted when the kernel is narrower (columns only when cheaper).
    assert function.plan.compact[0] == (kh < stride)
    rows, cols = (2 - 1) * step_h + kh, (3 - 1) * step_w + kw
    inp = tensor["inp"][:2 * rows * cols].reshape(2, rows, cols, 1, 4)
    wgt = tensor["wgt"][:2 * 2 * kh * kw].reshape(2, 2, kh, kw, 4, 4)
    expected = np.zeros((2, 2, 3, 1, 4), dtype=np.int64)
    for dy in range(kh):
        for dx in range(kw):
            window = inp[:, dy:dy + step_h * 1 + 1:step_h, dx:dx + step_w * 2 + 1:step_w]
            expected += np.einsum("cyxbi,kcoi->kyxbo", window, wgt[:, :, dy, dx])
    assert np.array_equal(tensor["acc"][:12].reshape(2, 2, 3, 1, 4), expected)


def test_pass_replaces_every_mac():
    op = Conv2d(2, 6, 5, 7, 7, kernel=3, padding=1)
    schedule = Schedule(tile_h=3, tile_w=7, tile_k=1, tile_c=1)
    function = lower(schedule.check(op.geometry(), TINY))
    tensorize(function)
    leaves = [ir.loop_nest(s)[1] for st in function.all_stages() for s in st.body
              if isinstance(s, ir.Loop)]
    assert not any(isinstance(leaf, ir.Mac) for leaf in leaves)
    assert function.stats["tensorize"]["gemm_nests"] == sum(len(t.steps) for t in function.tiles)


def test_wrong_block_is_rejected():
    op = Conv2d(1, 8, 8, 5, 5, kernel=3)
    _, mac_nest = _first_mac_nest(op, Schedule(tile_h=1, tile_w=1), TINY)
    with pytest.raises(CompileError, match="not the GEMM block"):
        tensorize_stmt(mac_nest, PRESETS["default"])
