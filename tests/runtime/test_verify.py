"""The program verifier: DRAM plan rules with their messages, and that no backend
runs a program the verifier rejects."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vdla.compiler import Dense, compile_op
from vdla.hw.config import PRESETS
from vdla.hw.isa import Load, MemType, Store
from vdla.runtime import AccelRunner, ProgramError, TensorRegion
from vdla.runtime.verify import MAX_DRAM_BYTES, verify_plan, verify_program
from vdla.sim.backend import RunResult
from vdla.sim.errors import DeadlockError
from tests.runtime.programs import dense_inputs, dense_program

TINY = PRESETS["tiny"]


@pytest.fixture
def program():
    return dense_program(TINY, 3, 8, 4)


def _tensor(program, name):
    return next(i for i, t in enumerate(program.tensors) if t.name == name)


def _retarget(program, tensor, **changes):
    index = _tensor(program, tensor)
    program.tensors[index] = dataclasses.replace(program.tensors[index], **changes)
    return program


def _first(program, kind):
    return next(i for i, insn in enumerate(program.instructions) if isinstance(insn, kind))


@pytest.mark.parametrize("edit, message", [
    (lambda p: _retarget(p, "data", dram_offset=p.tensor("data").dram_offset + 1),
     r"tensor 'data' at byte \d+ is not aligned to the config's 16-byte DRAM alignment"),
    (lambda p: _retarget(p, "out", dram_offset=p.tensor("data").dram_offset),
     r"tensor 'data' at bytes \[\d+, \d+\) overlaps tensor 'out'"),
    (lambda p: _retarget(p, "bias", layout="nchw"), r"has layout 'nchw' \(known: activation"),
    (lambda p: _retarget(p, "bias", role="secret"), r"has role 'secret' \(known: input, "),
    (lambda p: _retarget(p, "weight", shape=(4, 8, 1)), r"needs 2 positive sizes, got shape"),
    (lambda p: _retarget(p, "weight", shape=(4, 0)), r"needs 2 positive sizes"),
    (lambda p: _retarget(p, "weight", name="data"), r"two tensors are called 'data'"),
    (lambda p: _retarget(p, "out", role="input"), r"the program has no output tensor"),
    (lambda p: setattr(p, "dram_bytes", 10**12) or p,
     rf"dram_bytes 1000000000000 is outside 1..{MAX_DRAM_BYTES}"),
    (lambda p: setattr(p, "dram_bytes", p.dram_bytes + 4096) or p,
     r"dram_bytes \d+ is larger than the \d+ bytes its regions need"),
    (lambda p: setattr(p, "metadata", [1]) or p, r"metadata must be a JSON object"),
])
def test_plan_defects_are_named(program, edit, message):
    with pytest.raises(ProgramError, match=message):
        verify_plan(edit(program))


def test_a_region_too_large_to_pack_is_refused_not_counted_as_empty(program):
    # Each size is within the limit; their packed product is 2**64 bytes (0 in int64).
    offset = program.dram_bytes
    program.tensors.append(TensorRegion("huge", "scratch", "activation", (2**16,) * 4, offset))
    with pytest.raises(ProgramError, match=rf"^DRAM plan: tensor 'huge' of shape \(65536, 65536, "
                                           rf"65536, 65536\) packs into {2**64} bytes, more than "
                                           rf"the {MAX_DRAM_BYTES}-byte DRAM limit$"):
        verify_plan(program)


def test_dram_beyond_the_configs_addresses_is_refused():
    # 4 KiB of DRAM addresses: a dense layer of 64 x 64 weights needs more.
    config = TINY.replace(dram_addr_bits=12, name="tiny-4k")
    program = dense_program(config, 3, 64, 64)
    with pytest.raises(ProgramError, match=rf"dram_bytes {program.dram_bytes} is more than the "
                                           r"4096 bytes the config's 12-bit DRAM addresses reach"):
        verify_plan(program)


def test_store_must_write_an_output(program):
    index = _first(program, Store)
    store = program.instructions[index]
    data = program.tensor("data").dram_offset // TINY.element_bytes("out")
    program.instructions[index] = store.replace(dram_base=data)
    with pytest.raises(ProgramError, match=rf"instruction {index} \(STORE out\) writes bytes "
                                           r"\[\d+, \d+\), outside tensor 'out'"):
        verify_plan(program)


def test_loads_read_only_their_own_kind_of_tensor(program):
    index = _first(program, Load)
    assert program.instructions[index].memory_type == MemType.INP
    weight = program.tensor("weight").dram_offset // TINY.element_bytes("inp")
    program.instructions[index] = program.instructions[index].replace(dram_base=weight)
    with pytest.raises(ProgramError, match=rf"instruction {index} \(LOAD inp\) reads bytes "
                                           r"\[\d+, \d+\), outside tensor 'data'"):
        verify_plan(program)


@pytest.mark.parametrize("config_name", ["tiny", "default"])
def test_compiled_programs_pass_and_report_the_functional_counters(config_name):
    config = PRESETS[config_name]
    program = compile_op(Dense(batch=5, in_features=37, out_features=11, bias=True), config)
    counters = verify_program(program)
    inputs = {"data": np.zeros((5, 37), np.int8), "weight": np.zeros((11, 37), np.int8),
              "bias": np.zeros(11, np.int32)}
    assert counters == AccelRunner(config).run(program, inputs).counters


class _Recorder:
    """A backend that applies no rules itself (no ``checks_programs``): records runs."""

    name = "recorder"
    runs = 0

    def __init__(self, config):
        self.config = config

    def run(self, dram, insn_offset, insn_count):
        _Recorder.runs += 1
        return RunResult(cycles=None, counters={})


def test_a_backend_that_checks_nothing_never_sees_a_rejected_program(program, monkeypatch):
    from vdla.sim.backend import REGISTRY
    monkeypatch.setitem(REGISTRY, "recorder", _Recorder)   # registered for this test only
    inputs = dense_inputs(np.random.default_rng(0), 3, 8, 4)
    AccelRunner(TINY, sim="recorder").run(program, inputs)
    assert _Recorder.runs == 1
    store = _first(program, Store)   # FINISH then waits for a token never pushed
    program.instructions[store] = program.instructions[store].replace(push_prev=False)
    with pytest.raises(DeadlockError, match="compute blocked at instruction 9 \\(FINISH\\) "
                                            "waiting to pop from store->compute"):
        AccelRunner(TINY, sim="recorder").run(program, inputs)
    assert _Recorder.runs == 1
