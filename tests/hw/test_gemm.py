"""`hw.gemm.GemmCore` under the Amaranth simulator against a numpy matrix product."""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw.gemm import GemmCore
from vdla.sim.oracles import pack, unpack_signed
from tests.hw.amaranth_sim import TINY, run


@pytest.mark.parametrize("config", [TINY, TINY.replace(batch=2, block_in=8, block_out=4)],
                         ids=["tiny", "2x8x4"])
def test_gemm_core_matches_numpy(config):
    dut = GemmCore(config)
    rng = np.random.default_rng(1)
    b, bi, bo = config.batch, config.block_in, config.block_out
    cases = [(rng.integers(-128, 128, (b, bi)), rng.integers(-128, 128, (bo, bi))) for _ in range(30)]
    cases.append((np.full((b, bi), -128), np.full((bo, bi), -128)))   # largest positive sums
    cases.append((np.full((b, bi), -128), np.full((bo, bi), 127)))    # most negative sums

    async def testbench(ctx):
        for inp, wgt in cases:
            ctx.set(dut.inp, pack(inp.reshape(-1), 8))
            ctx.set(dut.wgt, pack(wgt.reshape(-1), 8))
            got = unpack_signed(ctx.get(dut.product), 32, b * bo).reshape(b, bo)
            np.testing.assert_array_equal(got, inp.astype(np.int64) @ wgt.astype(np.int64).T)

    run(dut, testbench)
