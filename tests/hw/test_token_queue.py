"""`hw.token_queue.TokenQueue` under the Amaranth simulator against a counting model."""

from __future__ import annotations

import numpy as np

from vdla.hw.token_queue import TokenQueue
from tests.hw.amaranth_sim import run


def test_token_queue_counts_and_limits():
    depth = 3
    dut = TokenQueue(depth)
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
