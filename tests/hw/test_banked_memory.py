"""`hw.banked_memory.BankedMemory` alone, in Amaranth's simulator, against a Python dict."""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw.banked_memory import BankedMemory
from tests.hw.amaranth_sim import run
from tests.hw.unelaborated import built


def test_logical_ports_reach_the_bank_their_address_selects():
    """Two writers and two readers on different banks every cycle: each read returns
    the latest value written to its address (not the same cycle's: no transparency)."""
    depth, banks, rows = 32, 4, 8
    dut = BankedMemory(width=16, depth=depth, banks=banks, read_ports=2, write_ports=2)
    rng = np.random.default_rng(5)
    model = {}
    checked = {"reads": 0}

    async def testbench(ctx):
        for _ in range(300):
            # Four distinct banks for the four ports this cycle.
            order = rng.permutation(banks)
            writes = [(int(order[p]) * rows + int(rng.integers(rows)), int(rng.integers(1 << 16)),
                       bool(rng.random() < 0.8)) for p in range(2)]
            reads = [(int(order[2 + p]) * rows + int(rng.integers(rows)), bool(rng.random() < 0.8))
                     for p in range(2)]
            for port, (addr, data, en) in zip(dut.write, writes):
                ctx.set(port.addr, addr)
                ctx.set(port.data, data)
                ctx.set(port.en, en)
            for port, (addr, en) in zip(dut.read, reads):
                ctx.set(port.addr, addr)
                ctx.set(port.en, en)
            snapshot = dict(model)
            await ctx.tick()
            for p, (addr, en) in enumerate(reads):
                if en:
                    assert ctx.get(dut.read[p].data) == snapshot.get(addr, 0), (p, addr)
                    checked["reads"] += 1
            for addr, data, en in writes:
                if en:
                    model[addr] = data

    run(dut, testbench)
    assert checked["reads"] > 400   # 2 ports x 300 cycles x 0.8


def test_lower_numbered_port_wins_a_shared_bank():
    dut = BankedMemory(width=8, depth=16, banks=2, read_ports=1, write_ports=2)

    async def testbench(ctx):
        for port, (addr, data) in zip(dut.write, ((3, 11), (5, 22))):   # both bank 0
            ctx.set(port.addr, addr)
            ctx.set(port.data, data)
            ctx.set(port.en, 1)
        await ctx.tick()
        for port in dut.write:
            ctx.set(port.en, 0)
        for addr, want in ((3, 11), (5, 0)):
            ctx.set(dut.read[0].addr, addr)
            ctx.set(dut.read[0].en, 1)
            await ctx.tick()
            assert ctx.get(dut.read[0].data) == want

    run(dut, testbench)


@pytest.mark.parametrize("depth, banks", [(16, 3), (12, 8), (10, 4)])
def test_banks_must_be_a_power_of_two_dividing_the_depth(depth, banks):
    with pytest.raises(ValueError, match=f"banks must be a power of two dividing depth {depth}"):
        built(BankedMemory, width=8, depth=depth, banks=banks, read_ports=1, write_ports=1)
