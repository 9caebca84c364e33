"""The RTL tier's memory systems (`hw.config.MEMORY_SYSTEMS`): the bus's rules and the DRAM's costs.

The stand-in top (`tests.rtl.standin`) issues whatever bursts it is told to,
so it shows the C++ DRAM model refusing illegal ones and holding written
bytes until their write response; the accelerator on each memory system
runs random programs bit-exactly against fsim (the harness fails any burst
that breaks the rules, so the programs also check that the accelerator
splits its bursts) with the memory's costs visible in its statistics.
Cycle counts differ from fsim's model, which knows no memory system.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vdla.hw.config import MEMORY_SYSTEMS
from vdla.sim.errors import AddressError
from vdla.sim.rtl import RtlModel, RtlSimulator, build_model
from tests.rtl.standin import standin_verilog
from tests.rtl.test_differential import BASE, STRESS, _check, _backend

pytestmark = pytest.mark.rtl


@pytest.fixture(scope="module")
def standins(tiny):
    """Stand-in models of the 32-bit tiny on AXI3 (16 beats) and AXI4 (4 KB, responses)."""
    return {memory: (config, build_model(config, verilog=standin_verilog(config)))
            for memory in ("axi3-hp", "axi4")
            for config in [tiny.replace(memory=memory, name=f"tiny-{memory}")]}


def _copy(standins, memory, insn_count, offset):
    config, build = standins[memory]
    dram = np.random.default_rng(0).integers(0, 256, size=3 * 4096, dtype=np.uint8)
    RtlSimulator(config, build=build, check=False).run(dram, offset, insn_count)


def test_a_burst_longer_than_the_bus_allows_is_a_memory_error(standins):
    # 10 words = 40 beats of 4 bytes: the stand-in reads them as two bursts of 20.
    with pytest.raises(AddressError, match=r"^the chip made a bad DRAM access: read burst of 20 "
                       r"beats at byte 0x100 is longer than the bus's 16 \(cycle \d+ after "
                       r"start\)$"):
        _copy(standins, "axi3-hp", 10, 0x100)
    # 8 words: two legal reads of 16 beats, then the copy's write burst of 32.
    with pytest.raises(AddressError, match=r"write burst of 32 beats at byte 0x180 is longer "
                       r"than the bus's 16"):
        _copy(standins, "axi3-hp", 8, 0x100)


def test_a_burst_across_4_kb_is_a_memory_error(standins):
    # The first read burst (8 beats from 0xff0) ends 16 bytes past 0x1000.
    with pytest.raises(AddressError, match=r"read burst of 8 beats at byte 0xff0 crosses a "
                       r"4096-byte boundary"):
        _copy(standins, "axi4", 4, 0x1000 - 16)


def test_written_bytes_wait_for_their_write_response(standins):
    """The stand-in finishes with its last write beat, never waiting for a response:
    its copy is still held by the memory (two bursts owed a response)."""
    config, build = standins["axi4"]
    with RtlModel(build) as model:
        image = np.random.default_rng(1).integers(0, 256, size=4096, dtype=np.uint8)
        model.load_dram(image)
        assert model.run(0x100, 4, 10_000) == 0 and model.done
        assert model.memory_queues() == {"read_bursts_pending": 0, "write_bursts_owed_data": 0,
                                         "write_bursts_owed_response": 2}
        held = np.empty(model.dram_size, dtype=np.uint8)
        model.store_dram(held)
        np.testing.assert_array_equal(held[:4096], image)
        assert model.memory_stats()["write_responses"] == 0


@pytest.fixture
def late_responses(monkeypatch):
    """``ddr3`` with write responses 400 cycles late, far behind the read latency:
    a load that a store's token releases reads before they come, so a store that
    pushed its token without waiting for them would feed it stale bytes (the
    random programs' feedback loads; with ``ddr3``'s 16 cycles no program tells)."""
    monkeypatch.setitem(MEMORY_SYSTEMS, "ddr3-late-response",
                        dataclasses.replace(MEMORY_SYSTEMS["ddr3"], write_response_latency=400))
    return "ddr3-late-response"


@pytest.mark.parametrize("memory", ["axi3-hp", "ddr3-late-response"])
def test_random_programs_are_bit_exact_on_each_memory_system(tiny, memory, request):
    """AXI4 runs in `test_differential` (the default preset's memory); ``ddr3`` here
    with late write responses (`late_responses`)."""
    if memory == "ddr3-late-response":
        request.getfixturevalue("late_responses")
    config = tiny.replace(memory=memory, name=f"tiny-{memory}")
    for seed in range(9000, 9009):   # without the store's wait, 9005 and 9008 differ
        _check(config, seed, BASE, backpressure=25 if seed == 9006 else 0)
    stats = _backend("rtl", config, backpressure=0, seed=9009).model.memory_stats()   # of 9008
    assert stats["write_responses"] == stats["write_requests"] > 0
    assert stats["turnarounds"] > 0
    if config.memory_system.page_bytes:
        assert stats["row_misses"] > 0 and stats["refresh_cycles"] > 0
    _check(config, 9100, STRESS)   # long loads and loops: more bursts to split
