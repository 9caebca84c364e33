"""Latency hiding: balanced tokens, every dependency ordered, independent stages free."""

import dataclasses

import pytest

from vdla.compiler import Conv2d, Dense, Schedule, compile_op
from vdla.hw import isa
from vdla.hw.config import PRESETS
from tests.compiler.accel.happens_before import (LOAD, COMPUTE, compute_done_before, module,
                                           run_tokens, unordered_compute_conflicts,
                                           unordered_conflicts)

TINY = PRESETS["tiny"]
# Two acc banks: one per thread, and none left for the bias (each thread keeps a copy).
TWO_BANKS = dataclasses.replace(TINY, max_acc_banks=2, name="tiny-2-banks")
CONV = Conv2d(1, 6, 6, 8, 8, kernel=3, padding=1, bias=True, shift=2, relu=True)


def _program(threads, latency_hiding=True, op=CONV, config=TINY, **knobs):
    schedule = Schedule(tile_h=knobs.get("tile_h", 2), tile_w=knobs.get("tile_w", 8),
                        tile_k=knobs.get("tile_k", 1), tile_c=knobs.get("tile_c", 1),
                        virtual_threads=threads, latency_hiding=latency_hiding)
    return compile_op(op, config, schedule)


@pytest.mark.parametrize("threads, latency_hiding", [(1, True), (2, True), (3, True), (2, False)])
def test_tokens_balance_and_every_conflict_is_ordered(threads, latency_hiding):
    program = _program(threads, latency_hiding)
    clocks, pushes, pops, _ = run_tokens(program.instructions)   # fails on deadlock
    assert pushes == pops
    assert unordered_conflicts(program.instructions, program.uops) == []
    assert unordered_compute_conflicts(program.instructions, program.uops) == []
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


def _alus(program, op=None, reset=None):
    return [(i, insn) for i, insn in enumerate(program.instructions) if isinstance(insn, isa.Alu)
            and (op is None or insn.alu_op == op) and (reset is None or insn.reset == reset)]


@pytest.mark.parametrize("config", [TINY, TWO_BANKS], ids=["4-banks", "2-banks"])
@pytest.mark.parametrize("op", [CONV, Conv2d(1, 8, 8, 8, 8, kernel=1, stride=2, bias=True,
                                            shift=3, relu=True)], ids=["3x3", "1x1s2"])
def test_two_threads_run_resets_and_epilogues_beside_gemms(op, config):
    """The ALU work of one thread overlaps the other thread's GEMMs, race-free. The
    1x1 stride-2 layer, ALU-bound with an ALU reset, has its tiles' first GEMMs
    overwrite instead (`passes.gemm_reset`)."""
    program = _program(2, op=op, config=config, tile_h=2, tile_w=8 if op is CONV else 4)
    instructions = program.instructions
    requants = _alus(program, isa.AluOp.REQUANT)
    resets = _alus(program, reset=True)
    counts = program.metadata["tiling"]["counts"]
    tiles = counts["b"] * counts["k"] * counts["h"] * counts["w"]
    gemm_reset = program.metadata["stats"]["gemm_reset"]["tiles"]
    assert gemm_reset == (0 if op is CONV else tiles)
    assert len(requants) == len(resets) + gemm_reset == tiles
    # One fused pass per tile, and no four-pass epilogue left.
    assert not [i for i, insn in _alus(program, reset=False) if insn.alu_op != isa.AluOp.REQUANT]
    done = compute_done_before(instructions)
    # Every reset but the first runs beside GEMMs: it overlaps and is issued
    # between GEMMs of another tile.
    assert all(insn.overlap for _, insn in resets[1:])
    # The next GEMM after a REQUANT (the other thread's) runs beside it.
    gemms = [i for i, insn in enumerate(instructions) if isinstance(insn, isa.Gemm)]
    beside = [i for i, _ in requants if any(g > i for g in gemms)
              and i not in done[next(g for g in gemms if g > i)]]
    assert len(beside) >= len(requants) // 2
    assert unordered_compute_conflicts(instructions, program.uops) == []
    assert unordered_conflicts(instructions, program.uops) == []


def test_race_checker_catches_a_requant_beside_its_own_gemms():
    """The independent checker fails when overlap is set where it is unsafe."""
    program = _program(2)
    instructions = list(program.instructions)
    index, requant = next((i, insn) for i, insn in _alus(program, isa.AluOp.REQUANT)
                          if not insn.overlap)
    instructions[index] = requant.replace(overlap=True)
    assert unordered_compute_conflicts(instructions, program.uops)


@pytest.mark.parametrize("threads, latency_hiding", [(1, True), (2, False)])
def test_one_thread_or_serialised_never_overlaps_a_conflict(threads, latency_hiding):
    program = _program(threads, latency_hiding)
    if not latency_hiding:
        assert not any(getattr(i, "overlap", False) for i in program.instructions)
    assert unordered_compute_conflicts(program.instructions, program.uops) == []
    # One thread: every GEMM waits for the reset and REQUANT before it.
    done = compute_done_before(program.instructions)
    for i, insn in enumerate(program.instructions):
        if isinstance(insn, isa.Gemm):
            earlier_alus = [j for j, _ in _alus(program) if j < i]
            assert set(earlier_alus) <= done[i]
