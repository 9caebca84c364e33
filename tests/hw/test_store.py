"""`hw.store.StoreUnit` under the Amaranth simulator against the ISA's STORE semantics.

A STORE copies out entries ``sram_base + y * x_size + x`` to DRAM elements
``dram_base + y * x_stride + x`` and touches no other byte; it waits for a
compute->store token before writing anything when ``pop_prev`` asks, pushes a
store->compute token once its last beat is accepted when ``push_prev`` asks,
and ignores ``pop_next``/``push_next``. An instruction of another kind only
moves tokens. The unit runs against an out SRAM holding random data and a
stalling DRAM model; the reference is numpy on the same arrays.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import memory, wiring

from vdla.hw import isa
from vdla.hw.config import PRESETS
from vdla.hw.isa import Gemm, MemType, Store
from vdla.hw.store import StoreUnit
from tests.hw.amaranth_sim import TINY, TINY_WIDE_BUS, run
from tests.hw.dram_model import DramModel

# Out elements as wide as the bus (tiny), narrower (tiny64) and wider (default).
# `default` on the memory without write responses that `DramModel` stands for (the
# store waiting for AXI write responses: tests/rtl/test_memory_systems.py).
CONFIGS = [TINY, TINY_WIDE_BUS, PRESETS["default"].replace(memory="ideal")]


class StoreBench(wiring.Component):
    """A `StoreUnit` reading an out SRAM that holds ``out`` (one int per entry)."""

    def __init__(self, config, out: list[int]):
        self.unit = StoreUnit(config)
        self.out = out
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self.unit
        config = unit.config
        m.submodules.out = sram = memory.Memory(shape=config.element_bytes("out") * 8,
                                                 depth=config.depth("acc"), init=self.out)
        wiring.connect(m, unit.out_read, sram.read_port(transparent_for=()))
        return m


def store_reference(dram, out_bytes, insn, element_bytes):
    """``dram`` after ``insn`` (a STORE), from the ISA's addressing."""
    dram = dram.copy()
    for y in range(insn.y_size):
        for x in range(insn.x_size):
            entry = insn.sram_base + y * insn.x_size + x
            first = (insn.dram_base + y * insn.x_stride + x) * element_bytes
            dram[first:first + element_bytes] = out_bytes[entry]
    return dram


def random_out(rng, config):
    """Random out SRAM contents as ints (for the memory) and bytes (for numpy)."""
    element_bytes = config.element_bytes("out")
    out_bytes = rng.integers(0, 256, (config.depth("acc"), element_bytes), dtype=np.uint8)
    ints = [int.from_bytes(row.tobytes(), "little") for row in out_bytes]
    return ints, out_bytes


def random_store(rng, config, dram_elements) -> Store:
    depth = config.depth("acc")
    y_size = int(rng.integers(1, 5))
    x_size = int(rng.integers(1, min(9, depth // y_size) + 1))
    x_stride = x_size + int(rng.integers(0, 4))
    extent = (y_size - 1) * x_stride + x_size
    return Store(memory_type=MemType.OUT,
                 sram_base=int(rng.integers(0, depth - y_size * x_size + 1)),
                 dram_base=int(rng.integers(0, dram_elements - extent + 1)),
                 y_size=y_size, x_size=x_size, x_stride=x_stride)


class Driver:
    """Feeds instruction words to ``cmds`` and takes pushed tokens (counted)."""

    def __init__(self, dut: StoreUnit, config):
        self.dut, self.config = dut, config
        self.pushes = 0

    async def issue(self, ctx, insn):
        ctx.set(self.dut.cmds.payload, isa.encode(insn, self.config))
        ctx.set(self.dut.cmds.valid, 1)
        await ctx.tick().until(self.dut.cmds.ready)
        ctx.set(self.dut.cmds.valid, 0)

    def token_sink(self):
        async def process(ctx):
            ctx.set(self.dut.to_compute.ready, 1)
            async for _, _, valid in ctx.tick().sample(self.dut.to_compute.valid):
                self.pushes += int(valid)
        return process

    async def until_retired(self, ctx, count, limit=5000):
        for _ in range(limit):
            if ctx.get(self.dut.retired) >= count and ctx.get(self.dut.idle):
                return
            await ctx.tick()
        raise AssertionError(f"store retired {ctx.get(self.dut.retired)} of {count}")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("stall", [0.0, 0.4])
def test_store_writes_the_isa_addresses_and_nothing_else(config, stall):
    rng = np.random.default_rng([len(config.name), int(stall * 10)])
    element_bytes = config.element_bytes("out")
    out_ints, out_bytes = random_out(rng, config)
    dram_elements = 96
    dram = rng.integers(0, 256, dram_elements * element_bytes + 64, dtype=np.uint8)
    stores = [random_store(rng, config, dram_elements) for _ in range(6)]
    # every second one asks for a store->compute token when done
    stores = [s.replace(push_prev=bool(k % 2)) for k, s in enumerate(stores)]
    expected = dram
    for insn in stores:
        expected = store_reference(expected, out_bytes, insn, element_bytes)
    bench = StoreBench(config, out_ints)
    dut = bench.unit
    memory_model = DramModel(dram, config.dram_bus_bits, latency=2, stall=stall, seed=1)
    driver = Driver(dut, config)

    async def testbench(ctx):
        for insn in stores:
            await driver.issue(ctx, insn)
        await driver.until_retired(ctx, len(stores))

    run(bench, testbench, processes=[
        memory_model.process(write_req=dut.mem.req, write_data=dut.mem.data),
        driver.token_sink()])
    np.testing.assert_array_equal(memory_model.data, expected)
    assert driver.pushes == sum(s.push_prev for s in stores)


def test_store_waits_for_its_token_and_pushes_after_its_last_beat():
    config = TINY
    rng = np.random.default_rng(3)
    out_ints, out_bytes = random_out(rng, config)
    dram = np.zeros(256, dtype=np.uint8)
    insn = Store(memory_type=MemType.OUT, sram_base=2, dram_base=5, y_size=2, x_size=3,
                 x_stride=4, pop_prev=True, push_prev=True,
                 # the next-module flags mean nothing to store
                 pop_next=True, push_next=True)
    bench = StoreBench(config, out_ints)
    dut = bench.unit
    memory_model = DramModel(dram, config.dram_bus_bits, latency=2, stall=0.3, seed=2)
    driver = Driver(dut, config)
    pushed_after_beats = []

    async def testbench(ctx):
        await driver.issue(ctx, insn)
        for _ in range(40):   # no token yet: nothing may be written
            assert not ctx.get(dut.mem.req.valid) and not ctx.get(dut.mem.data.valid)
            assert ctx.get(dut.wait_token)
            await ctx.tick()
        assert memory_model.write_beats == 0
        ctx.set(dut.from_compute.valid, 1)
        await ctx.tick().until(dut.from_compute.ready)
        ctx.set(dut.from_compute.valid, 0)
        ctx.set(dut.to_compute.ready, 1)
        await ctx.tick().until(dut.to_compute.valid)
        pushed_after_beats.append(memory_model.write_beats)
        await driver.until_retired(ctx, 1)

    run(bench, testbench, processes=[
        memory_model.process(write_req=dut.mem.req, write_data=dut.mem.data)])
    np.testing.assert_array_equal(memory_model.data,
                                  store_reference(np.zeros(256, np.uint8), out_bytes, insn,
                                                  config.element_bytes("out")))
    beats = sum(b for _, b in memory_model.write_requests)
    assert pushed_after_beats == [beats] and beats >= 2


@pytest.mark.parametrize("insn", [
    Gemm(push_prev=True, uop_end=1),
    Store(memory_type=MemType.OUT, push_prev=True, y_size=0, x_size=4),
], ids=["gemm", "empty-store"])
def test_store_only_moves_tokens_for_what_it_does_not_write(insn):
    """An instruction of another kind, or a STORE of no rows, writes nothing but
    still pushes the token it asks for."""
    config = TINY
    rng = np.random.default_rng(4)
    out_ints, _ = random_out(rng, config)
    dram = rng.integers(0, 256, 128, dtype=np.uint8)
    bench = StoreBench(config, out_ints)
    dut = bench.unit
    memory_model = DramModel(dram.copy(), config.dram_bus_bits)
    driver = Driver(dut, config)

    async def testbench(ctx):
        await driver.issue(ctx, insn)
        await driver.until_retired(ctx, 1)
        for _ in range(3):
            await ctx.tick()

    run(bench, testbench, processes=[
        memory_model.process(write_req=dut.mem.req, write_data=dut.mem.data),
        driver.token_sink()])
    np.testing.assert_array_equal(memory_model.data, dram)
    assert memory_model.write_requests == [] and driver.pushes == 1


def test_store_ignores_the_next_module_flags():
    """Store has no next module: ``pop_next`` waits for nothing, ``push_next`` pushes nothing."""
    config = TINY
    rng = np.random.default_rng(5)
    out_ints, out_bytes = random_out(rng, config)
    dram = rng.integers(0, 256, 128, dtype=np.uint8)
    insn = Store(memory_type=MemType.OUT, sram_base=1, dram_base=3, y_size=2, x_size=2,
                 x_stride=5, pop_next=True, push_next=True)
    bench = StoreBench(config, out_ints)
    dut = bench.unit
    memory_model = DramModel(dram.copy(), config.dram_bus_bits)
    driver = Driver(dut, config)

    async def testbench(ctx):   # no token is ever offered on from_compute
        await driver.issue(ctx, insn)
        await driver.until_retired(ctx, 1, limit=200)
        for _ in range(3):
            await ctx.tick()

    run(bench, testbench, processes=[
        memory_model.process(write_req=dut.mem.req, write_data=dut.mem.data),
        driver.token_sink()])
    np.testing.assert_array_equal(memory_model.data,
                                  store_reference(dram, out_bytes, insn, config.element_bytes("out")))
    assert driver.pushes == 0


@pytest.mark.parametrize("name, beats, responses, pending", [
    ("tiny", "_WideBeats", "_NoResponses", False),         # 4-byte out elements, 4-byte bus
    ("odd", "_NarrowBeats", "_NoResponses", False),        # 8-byte elements, 16-byte bus
    ("default", "_WideBeats", "_Responses", True),         # 16-byte elements, AXI4
    ("icebreaker", "_NarrowBeats", "_NoResponses", False)])
def test_variants_and_ports_are_chosen_once_by_the_config(name, beats, responses, pending):
    from vdla.hw import store
    config = PRESETS[name]
    assert store.beats_variant(config).__name__ == beats
    assert store._responses_variant(config).__name__ == responses
    assert ("writes_pending" in store.StoreSignature(config).members) == pending
