"""The C++ DRAM model, the host interface and the binding, checked with a stand-in top.

The stand-in (`tests.rtl.standin`) copies ``16 * insn_count`` bytes through two
pipelined read requests and one write burst and reports, from inside the
design, the read latency it saw; so these tests pin the memory model's timing
independently of the accelerator. Its "instructions" are no program, so the
simulator runs with ``check=False`` (no `sim.checker` pass).
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.sim.errors import AddressError, DeadlockError
from vdla.sim.rtl import RtlModel, RtlSimulator, build_model
from tests.rtl.standin import standin_verilog

pytestmark = pytest.mark.rtl

# (bus bits, read latency): 32-bit ports, 72-bit write payload (VlWide), and
# 128-bit read data (VlWide) with a long latency.
SHAPES = [(32, 8), (64, 1), (128, 40)]


@pytest.fixture(scope="module")
def standin_models(tiny):
    models = {}
    for bus, latency in SHAPES:
        config = tiny.replace(dram_bus_bits=bus, dram_read_latency=latency)
        models[(bus, latency)] = (config, build_model(config, verilog=standin_verilog(config)))
    return models


def _image(size=4096, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=size, dtype=np.uint8)


def _run_copy(config, build, insn_count, offset=256, **options):
    simulator = RtlSimulator(config, build=build, check=False, **options)
    dram = _image()
    before = dram.copy()
    result = simulator.run(dram, offset, insn_count)
    return simulator, before, dram, result


@pytest.mark.parametrize("bus, latency", SHAPES)
def test_copy_and_latency(standin_models, bus, latency):
    config, build = standin_models[(bus, latency)]
    insn_count = 4
    nbytes = 16 * insn_count
    beats = nbytes // (bus // 8)
    simulator, before, dram, result = _run_copy(config, build, insn_count)
    source = slice(256, 256 + nbytes)
    copy = slice(256 + nbytes, 256 + 2 * nbytes)
    record = 256 + 2 * nbytes
    np.testing.assert_array_equal(dram[copy], before[source])
    # The design measured request-accepted -> first beat: exactly the config's latency.
    assert int.from_bytes(dram[record:record + 4].tobytes(), "little") == latency
    # Only the four strobed bytes of the record beat changed.
    np.testing.assert_array_equal(dram[record + 4:record + bus // 8], before[record + 4:record + bus // 8])
    untouched = np.ones(dram.size, dtype=bool)
    untouched[copy] = False
    untouched[record:record + 4] = False
    np.testing.assert_array_equal(dram[untouched], before[untouched])
    memory = result.details["memory"]
    assert memory["read_requests"] == 2 and memory["read_beats"] == beats
    assert memory["write_requests"] == 2 and memory["write_beats"] == beats + 1
    assert memory["write_bytes"] == nbytes + 4
    assert memory["max_read_queue"] == 2          # the second request was accepted early
    assert memory["read_wait_cycles"] == 0        # the design was always ready
    assert result.counters["dram_read_beats"] == beats
    assert result.details["dram_bytes_read"] == nbytes


def test_timing_is_latency_plus_beats(standin_models):
    """Back-to-back bursts: total time = constant + latency + beats, for every shape."""
    overheads = set()
    for (bus, latency), (config, build) in standin_models.items():
        for insn_count in (2, 4, 8):
            beats = 16 * insn_count // (bus // 8)
            _, _, _, result = _run_copy(config, build, insn_count)
            overheads.add(result.cycles - latency - beats)
    assert len(overheads) == 1, overheads


def test_backpressure_keeps_data_and_costs_cycles(standin_models):
    config, build = standin_models[(32, 8)]
    _, before, calm, calm_result = _run_copy(config, build, 8)
    for seed in (1, 2, 3):
        _, _, stalled, result = _run_copy(config, build, 8, backpressure=40, seed=seed)
        record = 256 + 2 * 128  # the latency record: stalls may lengthen what the design saw
        np.testing.assert_array_equal(stalled[:record], calm[:record])
        np.testing.assert_array_equal(stalled[record + 4:], calm[record + 4:])
        assert int.from_bytes(stalled[record:record + 4].tobytes(), "little") >= 8
        assert result.cycles > calm_result.cycles


def test_reruns_are_independent(standin_models):
    config, build = standin_models[(64, 1)]
    simulator = RtlSimulator(config, build=build, check=False)
    first = [simulator.run(_image(seed=s), 256, 4).cycles for s in range(3)]
    assert len(set(first)) == 1


def test_read_outside_dram_is_an_address_error(standin_models):
    config, build = standin_models[(32, 8)]
    simulator = RtlSimulator(config, build=build, check=False)
    dram = _image(size=512)
    # The instructions fit, but the stand-in's copy lands right after them: past the end.
    with pytest.raises(AddressError, match="write of .* runs past the 512-byte DRAM"):
        simulator.run(dram, 384, 8)
    with pytest.raises(AddressError, match="outside the 512-byte DRAM"):
        simulator.run(dram, 480, 4)


def test_misaligned_instruction_address(standin_models):
    config, build = standin_models[(64, 1)]
    with pytest.raises(AddressError, match="not aligned"):
        RtlSimulator(config, build=build, check=False).run(_image(), 260, 1)


def test_hang_raises_deadlock_within_limit(standin_models):
    config, build = standin_models[(32, 8)]
    simulator = RtlSimulator(config, build=build, cycle_limit=5000, check=False)
    with pytest.raises(DeadlockError) as error:
        simulator.run(_image(), 256, 0)  # the stand-in never finishes an empty program
    message = str(error.value)
    assert "did not finish within 5000 cycles" in message
    for queue in ("load->compute", "compute->load", "compute->store", "store->compute"):
        assert queue in message
    assert simulator.model.cycles == 5000


def test_model_binding_steps_and_names(standin_models):
    config, build = standin_models[(32, 8)]
    with RtlModel(build) as model:
        from vdla.hw.counters import RTL_COUNTERS, RTL_STATUS
        assert model.counter_names == RTL_COUNTERS and model.status_names == RTL_STATUS
        assert model.bus_bytes == 4 and model.read_latency == 8
        model.load_dram(_image())
        assert model.start(256, 2) == 0
        assert model.step(3) == 1                 # timeout after 3 cycles, not done
        assert model.cycles == 4 and not model.done
        assert model.step(10_000) == 0 and model.done
        assert model.counters()["cycles"] > 0


def test_trace_writes_fst(tmp_path, tiny, standin_verilog_tiny):
    build = build_model(tiny, trace=True, verilog=standin_verilog_tiny)
    assert build.trace and build.key.endswith("-fst")
    wave = tmp_path / "waves" / "copy.fst"
    simulator = RtlSimulator(tiny, trace=wave, build=build, check=False)
    dram = _image()
    result = simulator.run(dram, 256, 2)
    assert result.details["trace"] == str(wave)
    data = wave.read_bytes()
    assert len(data) > 200 and data[0] == 0  # FST files open with a header block (type 0)
    # The untraced model refuses a trace rather than silently writing nothing.
    with pytest.raises(ValueError, match="trace"):
        RtlSimulator(tiny, trace=wave, build=build_model(tiny, verilog=standin_verilog_tiny))


def test_the_harness_compiles_without_a_warning(standin_build, tiny):
    """Nothing for the compiler to warn about, at a config whose memory turns the page,
    boundary and refresh models off (their divisors 0)."""
    memory = tiny.memory_system
    assert (memory.page_bytes, memory.boundary_bytes, memory.refresh_interval) == (0, 0, 0)
    log = (standin_build.directory / "build.log").read_text()
    assert "harness.cpp" in log
    assert [line for line in log.splitlines() if "harness.cpp:" in line and "warning:" in line] == []
