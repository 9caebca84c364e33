"""`hw.token_queue.TokenQueue` under the Amaranth simulator against a counting model."""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw.token_queue import TokenQueue
from tests.hw.amaranth_sim import run


@pytest.mark.parametrize("registered_valid", [False, True], ids=["comparator", "register"])
def test_token_queue_counts_and_limits(registered_valid):
    """With ``registered_valid`` (`HwConfig.registered_dispatch`) the same behaviour."""
    depth = 3
    dut = TokenQueue(depth, registered_valid=registered_valid)
    rng = np.random.default_rng(0)

    async def testbench(ctx):
        model = 0
        for _ in range(300):
            push, pop = int(rng.random() < 0.6), int(rng.random() < 0.4)
            ctx.set(dut.push.valid, push)
            ctx.set(dut.pop.ready, pop)
            assert ctx.get(dut.count) == model
            assert ctx.get(dut.push.ready) == (model < depth)
            assert ctx.get(dut.pop.valid) == (model > 0)
            model += (push and model < depth) - (pop and model > 0)
            await ctx.tick()
        assert ctx.get(dut.count) == model

    run(dut, testbench)
