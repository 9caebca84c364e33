"""`hw.dma.ElementReader` alone, under the Amaranth simulator, against numpy.

Rows ``{addr, count}`` (element indices) go in on ``cmd``; the elements that
come out on ``elements`` must be DRAM's elements ``addr .. addr + count - 1`` of
every row, in order, whatever the memory's latency and stalls and the
consumer's back-pressure. Every request the reader issues must be legal on the
config's memory system (`hw.layouts.legal_burst`): at most `MAX_BURST_BEATS`
beats, bus aligned (`DramModel` checks that), and on AXI never across 4 KB.
Each element shape is exercised: wider than a beat (shifted in, or written in
place), one beat, and narrower than a beat (lanes, with and without the
registered last-of-row flag).
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw.dma import ElementReader, _NarrowElements, _WideElements, _shape_variant
from vdla.hw.layouts import MAX_BURST_BEATS
from tests.hw.amaranth_sim import TINY, run
from tests.hw.dram_model import DramModel

AXI = TINY.replace(memory="axi4", name="tiny-axi4")           # 32-bit bus, 4 KB boundary
WIDE_BUS = TINY.replace(dram_bus_bits=64, name="tiny64")

# (config, element bytes, ElementReader options)
CASES = {
    "one-beat": (TINY, 4, {}),
    "four-beats-shifted": (TINY, 16, {}),
    "four-beats-in-place": (TINY, 16, {"in_place": True}),
    "four-beats-one-at-a-time": (TINY, 16, {"take_while_full": False}),
    "two-lanes": (WIDE_BUS, 4, {}),
    "eight-lanes-registered": (WIDE_BUS, 1, {"registered": True}),
    "eight-lanes-one-at-a-time": (WIDE_BUS, 1, {"take_while_full": False, "registered": True}),
    "axi-boundary": (AXI, 8, {"registered": True}),
}


def _rows(rng, element_bytes, elements, count):
    """Random rows inside ``elements`` elements: empty ones, and ones long enough to
    need several bursts or to cross a 4 KB boundary."""
    rows = []
    for _ in range(count):
        length = int(rng.choice([0, 1, 3, 7, 40, MAX_BURST_BEATS + 9]))
        length = min(length, elements - 1)
        rows.append((int(rng.integers(0, elements - length)), length))
    rows.append(((4096 - 3 * element_bytes) // element_bytes, 6))   # across a 4 KB boundary
    return rows


async def _until(ctx, condition, limit=20_000):
    """Tick until ``condition()`` holds, at most ``limit`` cycles."""
    for _ in range(limit):
        if condition():
            return
        await ctx.tick()
    raise AssertionError(f"still waiting after {limit} cycles")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("stall", [0.0, 0.3])
def test_element_reader_returns_every_row_in_order(case, stall):
    config, element_bytes, options = CASES[case]
    rng = np.random.default_rng([len(case), int(stall * 10)])
    elements = 8192 // element_bytes
    dram = rng.integers(0, 256, elements * element_bytes, dtype=np.uint8)
    rows = _rows(rng, element_bytes, elements, 10)
    expected = [int.from_bytes(dram[e * element_bytes:(e + 1) * element_bytes].tobytes(), "little")
                for addr, count in rows for e in range(addr, addr + count)]
    dut = ElementReader(config, element_bytes, **options)
    memory = DramModel(dram, config.dram_bus_bits, latency=3, stall=stall, seed=2)
    received = []

    async def send_rows(ctx):
        for addr, count in rows:
            # As the DRAM arbiter does (`hw.dram_arbiter`), bound the beats in flight,
            # which the reader counts in `dram_reads_in_flight + 1` bursts' worth.
            await _until(ctx, lambda: ctx.get(dut.outstanding) <= 2 * MAX_BURST_BEATS)
            ctx.set(dut.cmd.payload.addr, addr)
            ctx.set(dut.cmd.payload.count, count)
            ctx.set(dut.cmd.valid, 1)
            for _ in range(20_000):
                _, _, taken = await ctx.tick().sample(dut.cmd.ready)
                if taken:
                    break
            else:
                raise AssertionError(f"row {addr, count} never taken")
            ctx.set(dut.cmd.valid, 0)
        await _until(ctx, lambda: len(received) >= len(expected))
        await ctx.tick()
        assert ctx.get(dut.idle) and ctx.get(dut.outstanding) == 0

    async def take_elements(ctx):
        while True:
            ready = int(rng.random() >= stall)
            ctx.set(dut.elements.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.elements.valid,
                                                           dut.elements.payload)
            if valid and ready:
                received.append(int(payload))

    run(dut, send_rows, processes=[memory.process(read_req=dut.mem.req,
                                                  read_data=dut.mem.data), take_elements])
    assert received == expected
    for addr, beats in memory.read_requests:
        assert beats <= MAX_BURST_BEATS
        if config.memory_system.boundary_bytes:
            boundary = config.memory_system.boundary_bytes
            assert addr // boundary == (addr + beats * config.dram_bus_bytes - 1) // boundary


@pytest.mark.parametrize("element_bytes, shape", [(16, _WideElements), (4, _WideElements),
                                                  (2, _NarrowElements), (1, _NarrowElements)])
def test_element_shape_is_chosen_once_by_the_widths(element_bytes, shape):
    """On a 32-bit bus: elements of a beat or more are gathered, narrower ones are lanes."""
    assert _shape_variant(TINY, element_bytes) is shape
