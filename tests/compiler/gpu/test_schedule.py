"""The GPU schedule: legal knobs, the declared space, the cost model's choice, errors."""

from __future__ import annotations

import json

import pytest

from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.errors import ScheduleError
from vdla.compiler.gpu import GpuSchedule, default_gpu_schedule, estimate_gpu_cost, gpu_knob_space
from vdla.compiler.gpu.schedule import H100, WARP
from vdla.compiler.ops import Conv2d

from tests.compiler.gpu.shapes import ODD_SHAPES, RESNET_LAYERS, describe


@pytest.mark.parametrize("op", [ODD_SHAPES[0], ODD_SHAPES[7], RESNET_LAYERS["C2/b1"],
                                RESNET_LAYERS["C11/b8"]], ids=describe)
@pytest.mark.parametrize("mode", ["int8", "fp16", "fp32"])
def test_default_is_the_cheapest_legal_candidate(op, mode):
    problem = CpuProblem.from_op(op)
    candidates = list(gpu_knob_space(problem, mode))
    assert candidates
    for schedule in candidates:
        assert schedule.lanes_m * schedule.lanes_n == WARP
        assert schedule.block_m == schedule.warps_m * schedule.lanes_m * schedule.thread_m
        assert schedule.shared_bytes(mode) <= H100["static_shared_bytes"]
    best = default_gpu_schedule(problem, mode)
    assert best in candidates
    assert estimate_gpu_cost(problem, best, mode) == min(
        estimate_gpu_cost(problem, s, mode) for s in candidates)


def test_cost_model_prefers_filling_the_gpu():
    # C11 has 49 pixels: a 128-row tile leaves most SMs idle, so it costs more.
    problem = CpuProblem.from_op(RESNET_LAYERS["C11/b1"])
    small = GpuSchedule(16, 32, 8, 1, 4, 2, 2)
    large = GpuSchedule(128, 64, 8, 2, 2, 8, 8)
    assert estimate_gpu_cost(problem, small, "int8") < estimate_gpu_cost(problem, large, "int8")


@pytest.mark.parametrize("knobs, message", [
    ({"block_m": 0}, "block_m: expected a positive integer, got 0"),
    ({"thread_n": True}, "thread_n: expected a positive integer, got True"),
    ({"block_m": 36, "warps_m": 2, "thread_m": 4}, "block_m 36 is not a multiple of warps_m x thread_m = 8"),
    ({"thread_n": 4}, "needs 64 lanes, not a warp's 32"),
    ({"warps_m": 8, "warps_n": 8, "block_m": 128, "block_n": 256, "thread_m": 2, "thread_n": 8},
     "2048 threads per block exceed the GPU's 1024"),
])
def test_bad_knobs_are_refused_by_name(knobs, message):
    with pytest.raises(ScheduleError, match=message):
        GpuSchedule(**knobs)


def test_schedule_round_trips_and_unknown_knobs_are_named(tmp_path):
    schedule = GpuSchedule(32, 64, 16, 1, 2, 4, 8)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schedule.to_dict()))
    assert GpuSchedule.load(path) == schedule
    with pytest.raises(ScheduleError, match=r"unknown GPU schedule field\(s\): lanes"):
        GpuSchedule.from_dict({"lanes": 4})
    path.write_text("{")
    with pytest.raises(ScheduleError, match="GPU schedule is not valid JSON"):
        GpuSchedule.load(path)


def test_unknown_mode_is_refused():
    with pytest.raises(ScheduleError, match="mode: expected one of int8, fp16, fp32, got 'int4'"):
        default_gpu_schedule(CpuProblem.from_op(ODD_SHAPES[0]), "int4")


def test_grouped_layers_get_block_tiles_of_a_group():
    """A grouped layer's GEMM columns are padded per group: wider block tiles are padding."""
    depthwise = CpuProblem.from_op(Conv2d(1, 144, 144, 28, 28, kernel=3, padding=1, groups=144))
    assert {s.block_n for s in gpu_knob_space(depthwise, "int8")} == {16}
    grouped = CpuProblem.from_op(Conv2d(1, 128, 128, 14, 14, kernel=3, padding=1, groups=4))
    assert max(s.block_n for s in gpu_knob_space(grouped, "int8")) == 32
