"""AccelRunner: input validation, DRAM image building, and a dense layer against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from vdla.hw.config import PRESETS
from vdla.runtime import AccelRunner, InputError, ProgramError
from vdla.sim.errors import DeadlockError
from tests.runtime.programs import dense_inputs, dense_program, dense_reference

TINY, DEFAULT = PRESETS["tiny"], PRESETS["default"]


@pytest.mark.parametrize("config", [TINY, DEFAULT], ids=["tiny", "default"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 9), k=st.integers(1, 40), n=st.integers(1, 20),
       seed=st.integers(0, 2**32 - 1))
def test_dense_layer_matches_numpy(config, bias, m, k, n, seed):
    inputs = dense_inputs(np.random.default_rng(seed), m, k, n, bias)
    result = AccelRunner(config).run(dense_program(config, m, k, n, bias), inputs)
    np.testing.assert_array_equal(result.outputs["out"], dense_reference(inputs))
    assert result.outputs["out"].dtype == np.int8 and result.outputs["out"].shape == (m, n)
    assert result.sim == "fsim" and result.cycles is None
    assert result.instructions == 10
    assert result.counters["store_insns"] == 1


@pytest.fixture
def dense():
    program = dense_program(TINY, 3, 8, 4)
    return program, dense_inputs(np.random.default_rng(0), 3, 8, 4)


def test_missing_input(dense):
    program, inputs = dense
    del inputs["bias"]
    with pytest.raises(InputError, match=r"^missing input 'bias': expected int32 \(4,\)$"):
        AccelRunner(TINY).run(program, inputs)


def test_unknown_input(dense):
    program, inputs = dense
    inputs["bais"] = inputs["bias"]
    with pytest.raises(InputError, match=r"unknown input 'bais': the program's inputs are "
                                         r"bias, data, weight"):
        AccelRunner(TINY).run(program, inputs)


@pytest.mark.parametrize("name, value, got", [
    ("data", np.zeros((3, 8), np.int16), r"int16 \(3, 8\)"),
    ("data", np.zeros((3, 9), np.int8), r"int8 \(3, 9\)"),
    ("weight", np.zeros((4, 8, 1), np.int8), r"int8 \(4, 8, 1\)"),
    ("bias", np.zeros(4, np.int64), r"int64 \(4,\)"),
    ("bias", [0, 0, 0, 0], "list"),
])
def test_wrong_dtype_or_shape(dense, name, value, got):
    program, inputs = dense
    inputs[name] = value
    expected = {"data": r"int8 \(3, 8\)", "weight": r"int8 \(4, 8\)", "bias": r"int32 \(4,\)"}
    with pytest.raises(InputError, match=rf"^input '{name}': expected {expected[name]}, "
                                         rf"got {got}$"):
        AccelRunner(TINY).run(program, inputs)


def test_program_for_other_hardware(dense):
    program, inputs = dense
    with pytest.raises(ProgramError, match=r"compiled for hardware 'tiny'.*cannot run on "
                                           r"'default'"):
        AccelRunner(DEFAULT).run(program, inputs)
    assert issubclass(ProgramError, InputError)


def test_dram_plan_that_does_not_fit(dense):
    program, inputs = dense
    program.dram_bytes = program.insn_offset + 16
    with pytest.raises(ProgramError, match=r"DRAM plan: instructions at bytes \[\d+, \d+\): outside "
                                           r"the program's \d+-byte DRAM image"):
        AccelRunner(TINY).run(program, inputs)


def test_unknown_simulator():
    with pytest.raises(ValueError, match=r"unknown simulator 'nosuch' \(available: .*fsim"):
        AccelRunner(TINY, sim="nosuch")


def test_backend_options_reach_the_backend():
    with pytest.raises(ValueError, match="fsim does not support option.*cycle_limit"):
        AccelRunner(TINY, cycle_limit=10)


def test_simulation_errors_pass_through(dense):
    program, inputs = dense
    program.instructions[1] = program.instructions[1].replace(push_next=False)
    with pytest.raises(DeadlockError, match="waiting to pop from load->compute"):
        AccelRunner(TINY).run(program, inputs)


def test_inputs_are_not_modified(dense):
    program, inputs = dense
    before = {name: value.copy() for name, value in inputs.items()}
    AccelRunner(TINY).run(program, inputs)
    for name in inputs:
        np.testing.assert_array_equal(inputs[name], before[name])
