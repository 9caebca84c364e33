"""Latency hiding: balanced tokens, every dependency ordered, independent stages free."""

import pytest

from compiler import Conv2d, Dense, Schedule, compile_op
from hw import isa
from hw.config import PRESETS
from tests.compiler.hb import LOAD, COMPUTE, module, run_tokens, unordered_conflicts

TINY = PRESETS["tiny"]
CONV = Conv2d(1, 6, 6, 8, 8, kernel=3, padding=1, bias=True, shift=2, relu=True)


def _program(threads, latency_hiding=True, op=CONV, **knobs):
    schedule = Schedule(tile_h=knobs.get("tile_h", 2), tile_w=knobs.get("tile_w", 8),
                        tile_k=knobs.get("tile_k", 1), tile_c=knobs.get("tile_c", 1),
                        virtual_threads=threads, latency_hiding=latency_hiding)
    return compile_op(op, TINY, schedule)


@pytest.mark.parametrize("threads, latency_hiding", [(1, True), (2, True), (3, True), (2, False)])
def test_tokens_balance_and_every_conflict_is_ordered(threads, latency_hiding):
    program = _program(threads, latency_hiding)
    clocks, pushes, pops, _ = run_tokens(program.instructions)   # fails on deadlock
    assert pushes == pops
    assert unordered_conflicts(program.instructions, program.uops) == []
    assert isinstance(program.instructions[-1], isa.Finish)


def test_finish_waits_for_the_last_store():
    program = _program(2)
    clocks, *_, queues = run_tokens(program.instructions)
    finish = len(program.instructions) - 1
    stores = len(queues[2])
    assert clocks[finish][2] == stores


def _loads_overlapping_compute(program):
    """Loads that may run before a compute instruction issued earlier in program order."""
    clocks, *_ = run_tokens(program.instructions)
    computes_before, count = 0, 0
    for index, instruction in enumerate(program.instructions):
        m = module(instruction)
        if m == COMPUTE:
            computes_before += 1
        elif m == LOAD and clocks[index][COMPUTE] < computes_before:
            count += 1
    return count


def test_two_threads_let_loads_overlap_compute():
    assert _loads_overlapping_compute(_program(2)) > 0


def test_serialised_stream_never_overlaps():
    program = _program(1, latency_hiding=False)
    assert _loads_overlapping_compute(program) == 0
    assert program.metadata["stats"]["latency_hiding"]["serialised"]


def test_no_tokens_between_independent_slots():
    """With two threads a load into one slot does not wait for compute on the other."""
    program = _program(2)
    hidden = program.metadata["stats"]["latency_hiding"]["tokens"]
    serial = _program(1, latency_hiding=False).metadata["stats"]["latency_hiding"]["tokens"]
    assert sum(hidden.values()) < sum(serial.values())


def test_dense_with_partial_sums_across_chunks():
    op = Dense(7, 40, 9, bias=True, shift=1)
    program = compile_op(op, TINY, Schedule(tile_b=4, tile_k=2, tile_c=3, virtual_threads=2))
    assert unordered_conflicts(program.instructions, program.uops) == []
