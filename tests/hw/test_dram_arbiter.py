"""`hw.dram_arbiter`'s arbiters under the Amaranth simulator with a stalling DRAM model."""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw.dram_arbiter import DramArbiter, SkidDramArbiter, arbiter_variant
from vdla.hw.layouts import MAX_BURST_BEATS
from tests.hw.amaranth_sim import TINY, run
from tests.hw.dram_model import DramModel


@pytest.mark.parametrize("config", [
    TINY, TINY.replace(narrow_walkers=1, name="tiny-narrow"),
    TINY.replace(registered_load_walk=1, registered_load_data=1, name="tiny-skid")],
    ids=lambda c: c.name)
def test_arbiter_routes_data_in_order_under_stalls(config):
    """Bursts of 1 to 8 beats and one of `MAX_BURST_BEATS` (with ``narrow_walkers`` the
    order FIFO holds a burst's last beat index, 8 bits for 256 beats)."""
    clients = 3
    dut = arbiter_variant(config)(config, clients)
    rng = np.random.default_rng(5)
    dram = rng.integers(0, 256, 8192, dtype=np.uint8)
    memory = DramModel(dram, config.dram_bus_bits, latency=6, stall=0.3, seed=3)
    bus = config.dram_bus_bytes
    requests = {c: [(int(rng.integers(0, 1000)) * bus, int(rng.integers(1, 9))) for _ in range(6)]
                for c in range(clients)}
    requests[0].insert(2, (64 * bus, MAX_BURST_BEATS))
    received = {c: [] for c in range(clients)}
    done = set()

    def client(c):
        async def process(ctx):
            port = dut.readers[c]
            expected_beats = sum(beats for _, beats in requests[c])
            queue = list(requests[c])
            while len(received[c]) < expected_beats:
                if queue and not ctx.get(port.req.valid):
                    addr, beats = queue[0]
                    ctx.set(port.req.payload, {"addr": addr, "beats": beats})
                    ctx.set(port.req.valid, 1)
                ctx.set(port.data.ready, int(rng.random() < 0.7))
                req_valid, req_ready, data_valid, data_ready, data = (await ctx.tick().sample(
                    port.req.valid, port.req.ready, port.data.valid, port.data.ready,
                    port.data.payload))[2:]
                if req_valid and req_ready:
                    queue.pop(0)
                    ctx.set(port.req.valid, 0)
                if data_valid and data_ready:
                    received[c].append(int(data))
            done.add(c)
        return process

    run(dut, *[client(c) for c in range(clients)],
        processes=[memory.process(dut.mem_rd_req, dut.mem_rd_data)])
    assert done == set(range(clients))
    for c in range(clients):
        expected = [memory.beat(addr + i * bus) for addr, beats in requests[c] for i in range(beats)]
        assert received[c] == expected, f"client {c}"
    # Every request went out exactly once, in some interleaving.
    assert sorted(memory.read_requests) == sorted(r for c in requests for r in requests[c])


def test_arbiter_variant_is_chosen_by_the_config():
    assert arbiter_variant(TINY) is DramArbiter
    assert arbiter_variant(TINY.replace(registered_load_walk=1, registered_load_data=1)) \
        is SkidDramArbiter
