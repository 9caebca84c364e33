"""Whole layers compiled and run on the functional simulator, against numpy.

The fsim checks results bit-exactly *and* that every cross-module SRAM access
is ordered by dependency tokens (races) and that the stream cannot deadlock,
so each test here also validates latency hiding and the thread interleaving.
"""

import dataclasses
import math

import numpy as np
import pytest

from vdla.compiler import Conv2d, Dense, Schedule, compile_op
from vdla.compiler.workloads import RESNET18
from vdla.hw import isa
from vdla.hw.config import PRESETS, HwConfig
from vdla.hw.isa import MemType
from vdla.runtime.runner import AccelRunner
from tests.compiler.accel.happens_before import (module, run_tokens, unordered_compute_conflicts,
                                           unordered_conflicts)

DEFAULT, TINY = PRESETS["default"], PRESETS["tiny"]
# A config whose GEMM core takes two images at once (batch blocks of 2).
BATCH2 = HwConfig(batch=2, block_in=4, block_out=8, uop_buffer_bytes=2048, inp_buffer_bytes=2048,
                  wgt_buffer_bytes=4096, acc_buffer_bytes=8192, dram_bus_bits=64,
                  name="batch2")
# Two acc banks, a thread's each: each thread keeps its own copy of the bias
# (`compiler.accel.schedule.acc_layout`), as on ``ecpix5-256``.
TWO_BANKS = dataclasses.replace(TINY, max_acc_banks=2, name="tiny-2-banks")


def _informative_shift(op) -> int:
    """A shift that keeps random int8 results mostly inside int8 (not all saturated)."""
    reduction = op.in_channels * op.kernel[0] * op.kernel[1] if isinstance(op, Conv2d) \
        else op.in_features
    spread = math.sqrt(reduction) * 74 * 74      # std of a sum of int8 x int8 products
    return max(0, round(math.log2(spread / 48)))


def run_and_check(op, config, schedule=None, seed=0, **options):
    program = compile_op(op, config, schedule, **options)
    inputs = op.random_inputs(np.random.default_rng(seed))
    result = AccelRunner(config).run(program, inputs)
    expected = op.reference(**inputs)
    got = result.outputs["out"]
    assert got.shape == expected.shape
    mismatches = np.argwhere(got != expected)
    assert mismatches.size == 0, (f"{op.describe()}: {len(mismatches)} mismatches, first at "
                                  f"{mismatches[:3].tolist()}")
    return program, result, expected


def _resnet(name, shift=True):
    workload = next(w for w in RESNET18 if w.name == name)
    op = workload.op
    return dataclasses.replace(op, shift=_informative_shift(op)) if shift else op


@pytest.mark.parametrize("name", [w.name for w in RESNET18])
@pytest.mark.slow
def test_resnet18_default(name):
    op = _resnet(name)
    program, result, expected = run_and_check(op, DEFAULT)
    # The test must be able to fail: a good share of outputs is neither 0 nor 127.
    assert np.mean((expected > 0) & (expected < 127)) > 0.2
    assert program.metadata["schedule"]["virtual_threads"] in (2, 3)


@pytest.mark.parametrize("name", ["C2", "C4", "C7", "C10", "C11"])
@pytest.mark.slow
def test_resnet18_tiny(name):
    run_and_check(_resnet(name), TINY)


def _random_conv(rng, config, padding):
    kernel = (int(rng.integers(1, 8)), int(rng.integers(1, 8)))
    stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    pad = tuple(int(rng.integers(0, k)) for k in kernel) if padding else (0, 0)
    height = int(rng.integers(max(1, kernel[0] - 2 * pad[0]), 16))
    width = int(rng.integers(max(1, kernel[1] - 2 * pad[1]), 16))
    op = Conv2d(int(rng.integers(1, 4)), int(rng.integers(1, 40)), int(rng.integers(1, 40)),
                height, width, kernel=kernel, stride=stride, padding=pad,
                bias=bool(rng.integers(2)), relu=bool(rng.integers(2)))
    return dataclasses.replace(op, shift=_informative_shift(op))


@pytest.mark.parametrize("config", [TINY, DEFAULT, BATCH2, TWO_BANKS], ids=lambda c: c.name)
@pytest.mark.parametrize("seed", range(6))
def test_random_odd_convolutions(config, seed):
    rng = np.random.default_rng(100 + seed)
    program, *_ = run_and_check(_random_conv(rng, config, padding=seed % 2 == 1), config,
                                seed=seed)
    if len(program.instructions) <= 600:
        # Independent happens-before, overlap included: no module or unit races.
        assert unordered_conflicts(program.instructions, program.uops) == []
        assert unordered_compute_conflicts(program.instructions, program.uops) == []


@pytest.mark.parametrize("config", [TINY, DEFAULT], ids=lambda c: c.name)
@pytest.mark.parametrize("kernel, stride", [(1, 2), (1, 3), ((2, 1), (3, 2)), ((1, 2), (2, 3))])
def test_strided_kernels_narrower_than_stride(config, kernel, stride):
    """Compacted input tiles (only the rows/columns read) stay bit-exact."""
    op = Conv2d(1, 2 * config.block_in + 3, config.block_out + 5, 13, 11, kernel=kernel,
                stride=stride, bias=True, relu=True)
    op = dataclasses.replace(op, shift=_informative_shift(op))
    for threads in (1, 2):
        program, *_ = run_and_check(op, config, virtual_threads=threads)
        assert unordered_conflicts(program.instructions, program.uops) == []
        assert unordered_compute_conflicts(program.instructions, program.uops) == []


@pytest.mark.parametrize("config", [TINY, DEFAULT, BATCH2, TWO_BANKS], ids=lambda c: c.name)
@pytest.mark.parametrize("shape", [(1, 16, 16), (5, 100, 37), (3, 7, 130), (33, 200, 45)])
def test_dense(config, shape):
    op = Dense(*shape, bias=True, relu=shape[0] % 2 == 1)
    run_and_check(dataclasses.replace(op, shift=_informative_shift(op)), config)


@pytest.mark.parametrize("out_channels", [8, 12, 200])
def test_bias_copied_per_thread_on_two_banks(out_channels):
    """With a thread's own copy of the bias, resident (8, 12 channels) or reloaded per
    tile (200: too large to keep), its epilogues run beside the other thread's GEMMs."""
    op = Conv2d(1, 12, out_channels, 9, 10, kernel=3, padding=1, bias=True, shift=8, relu=True)
    program, *_ = run_and_check(op, TWO_BANKS, virtual_threads=2)
    compute = [i for i in program.instructions if isinstance(i, (isa.Gemm, isa.Alu))]
    # The GEMM after each REQUANT (the other thread's) runs beside it.
    after = [compute[n + 1] for n, i in enumerate(compute[:-1])
             if isinstance(i, isa.Alu) and i.alu_op == isa.AluOp.REQUANT]
    assert after and all(isinstance(i, isa.Gemm) and i.overlap for i in after)
    assert unordered_conflicts(program.instructions, program.uops) == []
    assert unordered_compute_conflicts(program.instructions, program.uops) == []


def test_large_dense_default():
    op = Dense(64, 1024, 1000, bias=True)
    run_and_check(dataclasses.replace(op, shift=_informative_shift(op)), DEFAULT)


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_virtual_thread_counts_agree(threads):
    op = Conv2d(2, 10, 9, 11, 11, kernel=3, padding=1, bias=True, shift=7, relu=True)
    schedule = Schedule(tile_h=2, tile_w=11, tile_k=1, tile_c=1, virtual_threads=threads)
    program, *_ = run_and_check(op, TINY, schedule)
    assert program.metadata["tiling"]["threads"] == threads


def _fully_ordered(program) -> bool:
    """Whether every instruction waits for all earlier ones of its neighbouring modules."""
    clocks, *_ = run_tokens(program.instructions)
    seen = [0, 0, 0]
    for index, instruction in enumerate(program.instructions):
        m = module(instruction)
        for neighbour in {0: (1,), 1: (0, 2), 2: (1,)}[m]:
            if clocks[index][neighbour] < seen[neighbour]:
                return False
        seen[m] += 1
    return True


def test_no_latency_hiding_still_correct_and_serialised():
    op = _resnet("C4")
    serial, *_ = run_and_check(op, DEFAULT, latency_hiding=False)
    assert serial.metadata["schedule"]["virtual_threads"] == 1
    assert _fully_ordered(serial)
    # The same tiling with latency hiding lets modules run ahead of each other.
    same_tiles = Schedule.from_dict({**serial.metadata["schedule"], "latency_hiding": True})
    hidden, *_ = run_and_check(op, DEFAULT, same_tiles)
    assert not _fully_ordered(hidden)


@pytest.mark.parametrize("order", ["kbhw", "hwbk", "bkhw"])
def test_user_schedule_with_ragged_tiles(order):
    op = Conv2d(2, 13, 11, 10, 9, kernel=(3, 2), stride=(1, 2), padding=(1, 1), bias=True,
                shift=6, relu=True)
    schedule = Schedule(tile_b=1, tile_h=3, tile_w=4, tile_k=2, tile_c=2, virtual_threads=2,
                        loop_order=order)
    run_and_check(op, TINY, schedule)



@pytest.mark.parametrize("order", ["kbhw", "bhwk"])
@pytest.mark.parametrize("inp", [False, True])
def test_resident_operands_with_ragged_tiles(order, inp):
    """Resident weights (and input): right results, no races, every block loaded once."""
    op = Conv2d(1, 13, 11, 6, 5, kernel=(3, 2), stride=(1, 2), padding=(1, 1), bias=True,
                shift=6, relu=True)
    tile_h = 100 if inp else 2
    schedule = Schedule(tile_h=tile_h, tile_w=100, tile_k=2, tile_c=2, virtual_threads=2,
                        loop_order=order, resident_weights=True, resident_input=inp)
    program, *_ = run_and_check(op, TINY, schedule)
    assert unordered_conflicts(program.instructions, program.uops) == []
    assert unordered_compute_conflicts(program.instructions, program.uops) == []
    loaded = {MemType.INP: 0, MemType.WGT: 0}
    for instruction in program.instructions:
        if isinstance(instruction, isa.Load) and instruction.memory_type in loaded:
            loaded[instruction.memory_type] += instruction.y_size * instruction.x_size
    # 3 output-channel blocks x 4 channel blocks x 3x2 taps, each loaded once.
    assert loaded[MemType.WGT] == 3 * 4 * 3 * 2
    if inp:
        # Every (channel block, row, column) of the input once.
        assert loaded[MemType.INP] == 4 * 6 * 5

def test_program_file_round_trip(tmp_path):
    from vdla.runtime.program_file import load, save
    op = Conv2d(1, 20, 12, 9, 9, kernel=3, stride=2, padding=1, bias=True, shift=7)
    program = compile_op(op, TINY)
    path = save(program, tmp_path / "layer.vdla")
    loaded = load(path)
    inputs = op.random_inputs(np.random.default_rng(5))
    result = AccelRunner(TINY).run(loaded, inputs)
    assert np.array_equal(result.outputs["out"], op.reference(**inputs))
    assert loaded.metadata["schedule"] == program.metadata["schedule"]
