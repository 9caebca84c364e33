"""`hw.load.LoadEngine` under the Amaranth simulator against numpy (padding, strides, bursts)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from vdla.hw import isa
from vdla.hw.load import LoadEngine, load_ports, reader_groups
from tests.hw.amaranth_sim import TINY, TINY_WIDE_BUS, run
from tests.hw.dram_model import DramModel

# inp and wgt elements of one size share a reader; counters sized by the SRAMs.
TINY_SHARED = TINY.replace(block_out=1, shared_load_engine=1, narrow_walkers=1,
                           name="tiny-shared")
# The same with the walk's bounds, data flag and SRAM address in the engine's registers.
TINY_REGISTERED = TINY_SHARED.replace(registered_load_walk=1, name="tiny-registered")
# And its walk on counters, its memory kind decoded as it takes a LOAD (``registered_load_data``);
# on a 64-bit bus, inp elements are half beats (the reader keeps a row's last in a register).
TINY_TIGHT = TINY_REGISTERED.replace(registered_load_data=1, name="tiny-tight")
TINY_TIGHT_WIDE_BUS = TINY_WIDE_BUS.replace(registered_load_walk=1, registered_load_data=1,
                                            name="tiny64-tight")


def reader_port(dut, config, kind):
    """The DRAM read port of the reader that loads ``kind``."""
    group = next(g for g, kinds in reader_groups(config, dut.kinds).items() if kind in kinds)
    return getattr(dut, f"mem_{group}")


def padded_expectation(dram, insn, element_bytes):
    rows, cols = insn.padded_y, insn.padded_x
    out = np.zeros((rows, cols, element_bytes), dtype=np.uint8)
    for y in range(insn.y_size):
        first = (insn.dram_base + y * insn.x_stride) * element_bytes
        row = dram[first:first + insn.x_size * element_bytes].reshape(insn.x_size, element_bytes)
        out[insn.y_pad_top + y, insn.x_pad_left:insn.x_pad_left + insn.x_size] = row
    return out.reshape(rows * cols, element_bytes)


async def _issue_load(ctx, dut, insn, config):
    """Hand the LOAD ``insn`` to a `LoadEngine`'s ``cmd`` stream; return once it is taken."""
    fields = isa.formats(config)[isa.Opcode.LOAD]
    ctx.set(dut.cmd.payload, dut.cmd.payload.shape().const(
        {f.name: getattr(insn, f.name) for f in fields}))
    if config.registered_load_walk:   # the caller's decoded flag (`LoadEngine.nonempty`)
        ctx.set(dut.nonempty, insn.padded_y * insn.padded_x != 0)
    ctx.set(dut.cmd.valid, 1)
    await ctx.tick().until(dut.cmd.ready)
    ctx.set(dut.cmd.valid, 0)
    if config.registered_load_walk:   # the engine keeps its own copy: the caller may move on
        ctx.set(dut.cmd.payload, dut.cmd.payload.shape().const({}))


def write_delay(config) -> int:
    """Cycles an SRAM write lands after the engine is idle (`registered_load_data`: 1)."""
    return config.registered_load_data


@pytest.mark.parametrize("config", [TINY, TINY_WIDE_BUS, TINY_SHARED, TINY_REGISTERED, TINY_TIGHT,
                                    TINY_TIGHT_WIDE_BUS], ids=lambda c: c.name)
@pytest.mark.parametrize("kind", ["inp", "wgt"])
def test_load_engine_padding_and_addresses(config, kind):
    rng = np.random.default_rng(zlib.crc32(f"{config.name}/{kind}".encode()))  # str hash() varies per run
    element_bytes = config.element_bytes(kind)
    dram = rng.integers(0, 256, 4096, dtype=np.uint8)
    memory = DramModel(dram, config.dram_bus_bits, latency=3, stall=0.3, seed=2)
    dut = LoadEngine(config, ("inp", "wgt"))
    loads = [
        isa.Load(memory_type=isa.MemType[kind.upper()], sram_base=5, dram_base=3, y_size=2,
                 x_size=3, x_stride=5, y_pad_top=1, y_pad_bottom=2, x_pad_left=1, x_pad_right=2),
        isa.Load(memory_type=isa.MemType[kind.upper()], sram_base=0, dram_base=1, y_size=3,
                 x_size=2, x_stride=1),                                  # overlapping rows
        isa.Load(memory_type=isa.MemType[kind.upper()], sram_base=7, dram_base=0, y_size=0,
                 x_size=4, x_stride=4, y_pad_top=1, x_pad_left=1),        # padding only
        isa.Load(memory_type=isa.MemType[kind.upper()], sram_base=2, dram_base=6, y_size=1,
                 x_size=1, x_stride=1),                                  # one entry
        isa.Load(memory_type=isa.MemType[kind.upper()], sram_base=9, dram_base=2, y_size=2,
                 x_size=0, x_stride=3, x_pad_right=1, y_pad_bottom=1),   # a column of pads
        isa.Load(memory_type=isa.MemType[kind.upper()], sram_base=3, dram_base=4, y_size=3,
                 x_size=1, x_stride=2, x_pad_left=1, y_pad_top=2),       # one data column
    ]
    port = getattr(dut, f"sram_{kind}")
    other = getattr(dut, f"sram_{'wgt' if kind == 'inp' else 'inp'}")
    results = []

    async def testbench(ctx):
        for insn in loads:
            written = {}
            await _issue_load(ctx, dut, insn, config)
            idle_cycles = 0
            for _ in range(2000):
                en, addr, data, other_en, busy = (await ctx.tick().sample(
                    port.en, port.addr, port.data, other.en, dut.busy))[2:]
                assert not other_en
                if en:
                    assert addr not in written, f"entry {addr} written twice"
                    written[addr] = data
                idle_cycles = 0 if ctx.get(dut.busy) else idle_cycles + 1
                if idle_cycles > write_delay(config):
                    break
            else:
                raise AssertionError("load did not finish")
            results.append(written)

    reader = reader_port(dut, config, kind)
    run(dut, testbench, processes=[memory.process(reader.req, reader.data)])
    reads_expected = 0
    for insn, written in zip(loads, results):
        expected = padded_expectation(dram, insn, element_bytes)
        assert sorted(written) == [insn.sram_base + n for n in range(len(expected))]
        for n, row in enumerate(expected):
            got = np.frombuffer(int(written[insn.sram_base + n]).to_bytes(element_bytes, "little"),
                                dtype=np.uint8)
            np.testing.assert_array_equal(got, row, err_msg=f"entry {n} of {insn}")
        bus = config.dram_bus_bytes
        for y in range(insn.y_size if insn.x_size else 0):
            first = (insn.dram_base + y * insn.x_stride) * element_bytes
            last = first + insn.x_size * element_bytes
            reads_expected += -(-last // bus) - first // bus
    # Pads cost no DRAM traffic: only the data rows' beats were read.
    assert memory.read_beats == reads_expected


def run_wgt_load(dut, config, insn, memory) -> dict:
    """Run the wgt LOAD ``insn`` on ``dut`` against ``memory``: ``{entry: data}`` written
    (each entry at most once)."""
    written = {}

    async def testbench(ctx):
        await _issue_load(ctx, dut, insn, config)
        idle_cycles = 0
        while idle_cycles <= write_delay(config):
            en, addr, data = (await ctx.tick().sample(dut.sram_wgt.en, dut.sram_wgt.addr,
                                                      dut.sram_wgt.data))[2:]
            if en:
                assert addr not in written, f"entry {addr} written twice"
                written[addr] = data
            idle_cycles = 0 if ctx.get(dut.busy) else idle_cycles + 1

    reader = reader_port(dut, config, "wgt")
    run(dut, testbench, processes=[memory.process(reader.req, reader.data)])
    return written


def test_reader_groups_follow_element_sizes():
    assert reader_groups(TINY, ("inp", "wgt", "uop", "acc")) == {
        "inp": ("inp",), "wgt": ("wgt",), "uop": ("uop",), "acc": ("acc",)}
    shared = TINY.replace(shared_load_engine=1)   # inp and uop 4 bytes, wgt and acc 16
    assert reader_groups(shared, ("inp", "wgt", "uop", "acc")) == {
        "inp": ("inp", "uop"), "wgt": ("wgt", "acc")}
    assert set(load_ports(shared, ("inp", "wgt", "uop", "acc"))) >= {
        "mem_inp", "mem_wgt", "sram_uop", "sram_acc"}
    assert "mem_uop" not in load_ports(shared, ("inp", "uop"))


@pytest.mark.parametrize("config", [TINY_SHARED, TINY_REGISTERED, TINY_TIGHT],
                         ids=lambda c: c.name)
def test_narrow_walkers_fill_a_whole_sram(config):
    """With ``narrow_walkers`` the counters are `HwConfig.walker_bits` wide: a padded
    rectangle covering every entry of wgt still lands each element once, in place."""
    depth = config.depth("wgt")
    assert config.walker_bits == config.depth("acc").bit_length() < 16
    insn = isa.Load(memory_type=isa.MemType.WGT, sram_base=0, dram_base=1, y_size=2,
                    x_size=depth // 2 - 1, x_stride=depth // 2 - 1, x_pad_left=1)
    assert insn.padded_y * insn.padded_x == depth
    element_bytes = config.element_bytes("wgt")
    dram = np.random.default_rng(4).integers(0, 256, (depth + 2) * element_bytes, dtype=np.uint8)
    memory = DramModel(dram, config.dram_bus_bits, latency=2)
    dut = LoadEngine(config, ("inp", "wgt"))
    written = run_wgt_load(dut, config, insn, memory)
    expected = padded_expectation(dram, insn, element_bytes)
    assert sorted(written) == list(range(depth))
    for n, row in enumerate(expected):
        assert int(written[n]).to_bytes(element_bytes, "little") == row.tobytes(), n


def test_load_engine_splits_long_rows_into_bursts():
    from vdla.hw.layouts import MAX_BURST_BEATS
    config = TINY
    element_bytes = config.element_bytes("wgt")
    count = MAX_BURST_BEATS // config.beats("wgt") + 6          # one row, two bursts
    dram = np.random.default_rng(9).integers(0, 256, (count + 4) * element_bytes, dtype=np.uint8)
    memory = DramModel(dram, config.dram_bus_bits, latency=2)
    dut = LoadEngine(config, ("inp", "wgt"))
    insn = isa.Load(memory_type=isa.MemType.WGT, sram_base=0, dram_base=2, y_size=1,
                    x_size=count, x_stride=count)
    written = run_wgt_load(dut, config, insn, memory)
    beats = count * config.beats("wgt")
    start = 2 * element_bytes
    assert memory.read_requests == [(start, MAX_BURST_BEATS),
                                    (start + MAX_BURST_BEATS * config.dram_bus_bytes,
                                     beats - MAX_BURST_BEATS)]
    expected = padded_expectation(dram, insn, element_bytes)
    assert sorted(written) == list(range(count))
    for n, row in enumerate(expected):
        assert int(written[n]).to_bytes(element_bytes, "little") == row.tobytes()


def test_walk_variant_is_chosen_once_by_the_config():
    from vdla.hw.load import _ComparedWalk, _CountedWalk, _RegisteredWalk, _walk_variant
    assert [_walk_variant(config) for config in (TINY, TINY_REGISTERED, TINY_TIGHT)] \
        == [_ComparedWalk, _RegisteredWalk, _CountedWalk]


def test_engine_and_ports_are_chosen_once_by_the_config():
    """Own engine: the load module's DRAM and SRAM ports; shared: one engine port."""
    from vdla.hw.load import LoadUnitSignature, _engine_variant, _OwnEngine, _SharedEngine
    assert [_engine_variant(config) for config in (TINY, TINY_SHARED)] == [_OwnEngine,
                                                                        _SharedEngine]
    common = {"cmds", "from_compute", "to_compute", "busy", "wait_token", "wait_mem", "idle",
              "retired"}
    assert set(LoadUnitSignature(TINY).members) == common | {"mem_inp", "mem_wgt", "sram_inp",
                                                             "sram_wgt"}
    assert set(LoadUnitSignature(TINY_SHARED).members) == common | {"engine"}
