"""The real accelerator under Verilator against the functional simulator and numpy.

Random programs are compared in ``test_differential.py``; here hand-built ones,
whose outputs also have a numpy reference, and the tier's own behaviour
(counters, details, deadlock report, traces, options).

Each program runs on a copy of the same DRAM image on ``rtl`` and ``fsim``;
the final images must match byte for byte, and the output region must match
the numpy reference of `vdla.testing.programs.handbuilt` (independent of both tiers).
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw.config import PRESETS
from vdla.hw.counters import RTL_COUNTERS
from vdla.hw.isa import MODULES
from vdla.sim.backends import get_backend
from vdla.sim.errors import DeadlockError, OptionError
from vdla.sim.rtl import RtlSimulator, build_model
from vdla.testing.programs.handbuilt import PROGRAMS, deadlock_program

pytestmark = pytest.mark.rtl


@pytest.fixture(scope="module")
def chip(tiny, chip_build):
    return RtlSimulator(tiny, build=chip_build)


def _compare(config, rtl, dram, insn_offset, insn_count):
    expected, actual = dram.copy(), dram.copy()
    reference = get_backend("fsim", config).run(expected, insn_offset, insn_count)
    result = rtl.run(actual, insn_offset, insn_count)
    differ = np.flatnonzero(expected != actual)
    assert differ.size == 0, (f"{differ.size} DRAM bytes differ from fsim, first at byte "
                              f"{differ[0]}: fsim {expected[differ[0]]}, rtl {actual[differ[0]]}")
    return actual, result, reference


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_fsim_and_numpy(tiny, chip, name):
    program = PROGRAMS[name](tiny)
    final, result, reference = _compare(tiny, chip, program.dram, program.insn_offset,
                                        program.insn_count)
    np.testing.assert_array_equal(program.out_bytes(final), program.expected_out)
    assert set(result.counters) == set(RTL_COUNTERS)
    for counter in ("gemm_uops", "alu_uops"):
        assert result.counters[counter] == reference.counters.get(counter, 0)
    # The harness counts cycles independently of the chip's own counter.
    assert abs(result.cycles - result.counters["cycles"]) <= 2
    stored = reference.counters.get("bytes_stored_out", 0)
    assert result.details["dram_bytes_strobed"] == stored
    assert result.details["dram_bytes_written"] == result.counters["dram_write_beats"] * \
        tiny.dram_bus_bytes
    assert result.details["dram_bytes_read"] == result.counters["dram_read_beats"] * \
        tiny.dram_bus_bytes
    useful = sum(i.micro_ops for i in program.instructions if i.opcode.name == "GEMM" and not i.reset)
    assert result.details["gemm_uops_per_cycle"] == pytest.approx(useful / result.cycles)
    for module in MODULES:
        figures = result.details["modules"][module]
        assert 0 <= figures["busy"] <= result.cycles
        assert figures["busy"] == result.counters[f"{module}_busy"]


def test_deadlock_names_the_blocked_module_and_queue(tiny, chip_build):
    program = deadlock_program(tiny)
    with pytest.raises(DeadlockError):  # the functional tier agrees it cannot finish
        get_backend("fsim", tiny).run(program.dram.copy(), 0, program.insn_count)
    with pytest.raises(DeadlockError, match="deadlock: no module can advance"):
        # The checker refuses it before the model runs a cycle ...
        RtlSimulator(tiny, build=chip_build).run(program.dram.copy(), 0, program.insn_count)
    # ... and the hardware itself, made to run it, ends in a clear error too.
    rtl = RtlSimulator(tiny, build=chip_build, cycle_limit=20_000, check=False)
    with pytest.raises(DeadlockError) as error:
        rtl.run(program.dram.copy(), 0, program.insn_count)
    message = str(error.value)
    assert "did not finish within 20000 cycles" in message
    assert "compute blocked at instruction 1 (GEMM) waiting to pop from load->compute (empty)" \
        in message
    assert "token queues: load->compute 0" in message
    assert error.value.index == 1
    assert rtl.model.cycles == 20_000


def test_default_cycle_limit_bounds_a_hang(tiny, chip_build):
    program = deadlock_program(tiny)
    rtl = RtlSimulator(tiny, build=chip_build, check=False)
    with pytest.raises(DeadlockError, match=r"within \d+ cycles"):
        rtl.run(program.dram.copy(), 0, program.insn_count)
    assert rtl.model.cycles < 1_000_000


def test_trace_writes_a_waveform(tmp_path, tiny, chip_trace_build):
    program = PROGRAMS["gemm"](tiny)
    wave = tmp_path / "gemm.fst"
    rtl = RtlSimulator(tiny, trace=wave, build=chip_trace_build)
    _compare(tiny, rtl, program.dram, program.insn_offset, program.insn_count)
    assert wave.stat().st_size > 1000
    assert wave.read_bytes()[0] == 0  # FST header block


def test_registry_and_options(tiny, chip_build):
    backend = get_backend("rtl", tiny, build=chip_build)
    assert isinstance(backend, RtlSimulator) and backend.name == "rtl"
    with pytest.raises(OptionError, match="unknown option"):
        get_backend("rtl", tiny, build=chip_build, check_races=True)
    with pytest.raises(ValueError, match="cycle_limit"):
        RtlSimulator(tiny, build=chip_build, cycle_limit=0)


def test_default_config_runs_programs():
    """The VTA-sized default config (16x16 GEMM, 64-bit bus) on the hand-built programs."""
    config = PRESETS["default"]
    rtl = RtlSimulator(config, build=build_model(config))
    for name, builder in sorted(PROGRAMS.items()):
        program = builder(config)
        final, _, _ = _compare(config, rtl, program.dram, program.insn_offset, program.insn_count)
        np.testing.assert_array_equal(program.out_bytes(final), program.expected_out, err_msg=name)
