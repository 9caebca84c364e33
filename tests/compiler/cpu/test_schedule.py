"""The CPU knob space, its validation and the cost model's choice."""

from __future__ import annotations

import pytest

from vdla.compiler.cpu import (CpuProblem, CpuSchedule, cpu_knob_space, default_cpu_schedule,
                               estimate_cpu_cost)
from vdla.compiler.errors import ScheduleError
from vdla.compiler.ops import Conv2d, Dense
from vdla.compiler.workloads import RESNET18

AVX512 = {"avx512": True, "vnni": True}
AVX2 = {"avx512": False, "avx2": True}


@pytest.mark.parametrize("features,registers,lanes", [(AVX512, 32, {8, 16}), (AVX2, 16, {8})])
def test_space_fits_the_register_file(features, registers, lanes):
    problem = CpuProblem.from_op(RESNET18[0].op)
    space = list(cpu_knob_space(problem, "int8", features))
    assert space
    assert {s.lanes for s in space} == lanes
    assert all(s.oc_vectors * s.ow_tile + s.oc_vectors + 2 <= registers for s in space)
    assert all(s.ow_tile <= problem.out_width for s in space)


@pytest.mark.parametrize("mode", ["int8", "fp32"])
def test_default_is_the_cheapest_candidate(mode):
    problem = CpuProblem.from_op(RESNET18[4].op)
    chosen = default_cpu_schedule(problem, mode, AVX512)
    best = min(estimate_cpu_cost(problem, s, mode) for s in cpu_knob_space(problem, mode, AVX512))
    assert estimate_cpu_cost(problem, chosen, mode) == best


def test_space_takes_an_op_and_this_machines_features():
    op = RESNET18[6].op
    assert next(iter(cpu_knob_space(op))) == next(iter(cpu_knob_space(CpuProblem.from_op(op))))
    assert default_cpu_schedule(op, "fp32") in set(cpu_knob_space(op, "fp32"))


def test_dense_is_a_1x1_convolution_over_its_batch():
    problem = CpuProblem.from_op(Dense(5, 40, 24))
    assert (problem.batch, problem.in_channels, problem.out_channels) == (1, 40, 24)
    assert (problem.height, problem.width, problem.out_width) == (1, 5, 5)
    assert problem.macs == 5 * 40 * 24


def test_cost_model_prefers_full_register_tiles():
    problem = CpuProblem.from_op(Conv2d(1, 64, 64, 28, 28, kernel=3, padding=1))
    wide = CpuSchedule(lanes=16, oc_vectors=2, ow_tile=14)
    narrow = CpuSchedule(lanes=16, oc_vectors=1, ow_tile=2)
    assert estimate_cpu_cost(problem, wide, "int8") < estimate_cpu_cost(problem, narrow, "int8")


@pytest.mark.parametrize("knobs,message", [
    ({"lanes": 4}, "lanes: expected 8 or 16, got 4"),
    ({"ic_block": 6}, "ic_block: expected a multiple of 4"),
    ({"ow_tile": 0}, "ow_tile: expected a positive integer, got 0"),
    ({"loop_order": "xyz"}, "loop_order: expected one of block_kernel, kernel_block"),
    ({"parallel": "all"}, "parallel: expected one of rows, channels, both"),
])
def test_bad_knobs_are_named(knobs, message):
    with pytest.raises(ScheduleError, match=message):
        CpuSchedule(**knobs)


def test_schedule_round_trips_and_rejects_unknown_knobs(tmp_path):
    schedule = CpuSchedule(lanes=8, oc_vectors=3, ow_tile=4)
    assert CpuSchedule.from_dict(schedule.to_dict()) == schedule
    with pytest.raises(ScheduleError, match=r"unknown CPU schedule field\(s\): tile_h"):
        CpuSchedule.from_dict({"tile_h": 3})
    path = tmp_path / "bad.json"
    path.write_text("{")
    with pytest.raises(ScheduleError, match="CPU schedule is not valid JSON"):
        CpuSchedule.load(path)


def test_depthwise_space_has_one_option_for_the_reduction_knobs():
    """The depthwise kernel has no channel reduction and one vector per tile: only
    lanes, ow_tile and parallel vary, and its cost grows with the channels."""
    op = Conv2d(1, 144, 144, 56, 56, kernel=3, stride=2, padding=(0, 0, 1, 1), groups=144)
    space = list(cpu_knob_space(CpuProblem.from_op(op), "int8", AVX512))
    assert {(s.oc_vectors, s.ic_block, s.loop_order, s.unroll) for s in space} \
        == {(1, 4, "block_kernel", 1)}
    assert {s.parallel for s in space} == {"rows", "channels", "both"}
    schedule = default_cpu_schedule(CpuProblem.from_op(op), "int8", AVX512)
    wider = CpuProblem.from_op(Conv2d(1, 288, 288, 56, 56, kernel=3, stride=2,
                                      padding=(0, 0, 1, 1), groups=288))
    assert estimate_cpu_cost(wider, schedule, "int8") > estimate_cpu_cost(
        CpuProblem.from_op(op), schedule, "int8")
