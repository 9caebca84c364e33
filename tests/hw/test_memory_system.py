"""`HwConfig.memory`: the named memory systems, and the legal bursts the blocks issue."""

from __future__ import annotations

import dataclasses

import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from vdla.hw.config import MEMORY_SYSTEMS, PRESETS, ConfigError, HwConfig
from vdla.hw.layouts import legal_burst


def test_an_unknown_memory_system_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"^memory: expected one of ideal, axi4, axi3-hp, ddr3, "
                                          r"got 'axi5'$"):
        HwConfig(memory="axi5")


def test_ideal_leaves_the_hash_and_others_change_it():
    """Configs hashed before the field existed keep their hash; each system is other hardware."""
    hashes = {memory: HwConfig(memory=memory).hash for memory in MEMORY_SYSTEMS}
    assert hashes["ideal"] == HwConfig().hash
    assert len(set(hashes.values())) == len(MEMORY_SYSTEMS)


def test_presets_name_their_memory():
    """The RTL tier's default is AXI-legal; the board presets' tops hold their
    memory on chip (`hw.boards.memory`), which takes any burst."""
    assert PRESETS["default"].memory == "axi4"
    assert {PRESETS[name].memory for name in ("ulx3s", "ecpix5", "icebreaker")} == {"ideal"}
    rules = PRESETS["default"].memory_system
    assert (rules.max_burst_beats, rules.boundary_bytes, rules.write_response) == (256, 4096, True)
    assert MEMORY_SYSTEMS["axi3-hp"].max_burst_beats == 16 and MEMORY_SYSTEMS["axi3-hp"].half_duplex


def test_the_rtl_header_carries_every_memory_field():
    from vdla.sim.rtl.build import _config_header
    header = _config_header(HwConfig(memory="ddr3"), False, "key")
    for name, value in dataclasses.asdict(MEMORY_SYSTEMS["ddr3"]).items():
        assert f"#define VDLA_MEMORY_{name.upper()} {value}u\n" in header


@pytest.mark.parametrize("memory, bus_bits, cases", [
    # (beats wanted, byte address, burst issued)
    ("axi3-hp", 64, [(100, 0, 16), (5, 0, 5), (100, 4096 - 16, 2), (1, 4088, 1),
                     (16, 8192 + 64, 16)]),
    ("axi4", 32, [(300, 0, 256), (300, 4096 - 40, 10), (3, 4096 - 12, 3), (256, 1024, 256)]),
    ("ideal", 64, [(300, 4096 - 16, 256), (7, 4088, 7)]),
])
def test_legal_burst_stops_at_the_limit_and_the_boundary(memory, bus_bits, cases):
    config = HwConfig(memory=memory, dram_bus_bits=bus_bits)
    beats, addr, burst = Signal(16), Signal(32), Signal(16)
    m = Module()
    m.d.comb += burst.eq(legal_burst(config, beats, addr))
    simulator = Simulator(m)

    async def bench(ctx):
        for wanted, at, expected in cases:
            ctx.set(beats, wanted)
            ctx.set(addr, at)
            assert ctx.get(burst) == expected, (wanted, at)

    simulator.add_testbench(bench)
    simulator.run()
