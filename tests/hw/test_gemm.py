"""`hw.gemm.GemmCore` under the Amaranth simulator against a numpy matrix product."""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw.gemm import GemmCore
from vdla.testing.oracles import pack, unpack_signed
from tests.hw.amaranth_sim import TINY, run


@pytest.mark.parametrize("config", [
    TINY, TINY.replace(batch=2, block_in=8, block_out=4),
    TINY.replace(gemm_tree_stage=1), TINY.replace(block_in=16, block_out=2, gemm_tree_stage=1),
    TINY.replace(block_in=8, block_out=2, gemm_tree_stage=1),
    TINY.replace(block_in=1, block_out=2, gemm_tree_stage=1)],
    ids=["tiny", "2x8x4", "tiny-tree", "1x16x2-tree", "1x8x2-tree", "1x1x2-tree"])
def test_gemm_core_matches_numpy(config):
    dut = GemmCore(config)
    latency = dut.latency
    rng = np.random.default_rng(1)
    b, bi, bo = config.batch, config.block_in, config.block_out
    cases = [(rng.integers(-128, 128, (b, bi)), rng.integers(-128, 128, (bo, bi))) for _ in range(30)]
    cases.append((np.full((b, bi), -128), np.full((bo, bi), -128)))   # largest positive sums
    cases.append((np.full((b, bi), -128), np.full((bo, bi), 127)))    # most negative sums

    async def testbench(ctx):
        # A new operand pair every cycle; each product comes `latency` cycles later.
        for step in range(len(cases) + latency - 1):
            if step < len(cases):
                inp, wgt = cases[step]
                ctx.set(dut.inp, pack(inp.reshape(-1), 8))
                ctx.set(dut.wgt, pack(wgt.reshape(-1), 8))
            await ctx.tick()
            if step + 1 >= latency:
                inp, wgt = cases[step + 1 - latency]
                got = unpack_signed(ctx.get(dut.product), 32, b * bo).reshape(b, bo)
                np.testing.assert_array_equal(got, inp.astype(np.int64) @ wgt.astype(np.int64).T)

    run(dut, testbench)


@pytest.mark.parametrize("config", [TINY.replace(gemm_operand_stage=1, gemm_operand_copies=2),
                                    TINY.replace(batch=2, block_in=8, block_out=4,
                                                 gemm_operand_stage=1, gemm_operand_copies=4)],
                         ids=["tiny-2-copies", "2x8x4-4-copies"])
def test_each_output_row_reads_its_own_operand_copy(config):
    """With ``gemm_operand_copies`` the inp port holds one element per copy; row ``o`` multiplies
    copy ``o // (block_out / copies)``: given different copies, each row shows which it read."""
    dut = GemmCore(config)
    rng = np.random.default_rng(2)
    b, bi, bo, n = config.batch, config.block_in, config.block_out, config.gemm_operand_copies
    copies = rng.integers(-128, 128, (n, b, bi))
    wgt = rng.integers(-128, 128, (bo, bi))
    expected = np.stack([copies[o // (bo // n)].astype(np.int64) @ wgt[o].astype(np.int64)
                         for o in range(bo)], axis=1)

    async def testbench(ctx):
        ctx.set(dut.inp, pack(copies.reshape(-1), 8))
        ctx.set(dut.wgt, pack(wgt.reshape(-1), 8))
        for _ in range(dut.latency):
            await ctx.tick()
        got = unpack_signed(ctx.get(dut.product), 32, b * bo).reshape(b, bo)
        np.testing.assert_array_equal(got, expected)

    run(dut, testbench)
