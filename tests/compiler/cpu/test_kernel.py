"""The cpu target's kernels against numpy: int8 bit-exact, fp32 close.

Shapes are those the accelerator's tests use (odd channel counts, stride 2,
1x1, non-square kernels and strides, padding, dense, batch > 1), kept small:
every distinct shape is one C compile (cached by content hash afterwards).
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.compiler.cpu import CpuKernel, CpuSchedule, reference_fp32
from vdla.compiler.cpu.build import cpu_features
from vdla.compiler.errors import ScheduleError, ShapeError
from vdla.compiler.ops import Conv2d, Dense
from vdla.compiler.workloads import random_conv2d


SHAPES = [
    Conv2d(2, 5, 7, 9, 8, kernel=(3, 1), stride=2, bias=True, shift=3, relu=True),
    Conv2d(1, 35, 21, 13, 11, kernel=3, padding=1),
    Conv2d(2, 13, 11, 10, 9, kernel=(3, 2), stride=(1, 2), padding=(1, 1), bias=True, shift=5),
    Conv2d(1, 20, 12, 9, 9, kernel=3, stride=2, padding=1, bias=True, shift=7),
    Conv2d(1, 4, 10, 4, 4, kernel=1, bias=True, shift=40, relu=True),
    Conv2d(1, 64, 40, 6, 6, kernel=1, stride=2, bias=True, shift=9),
    Dense(3, 37, 21, bias=True, shift=5),
    Dense(1, 300, 17, bias=True, shift=12, relu=True),
]


def _inputs(op, seed=0):
    # A bias range wider than the int32 accumulator's reach near its limits
    # also checks the wrapping add.
    return op.random_inputs(np.random.default_rng(seed), bias_range=1 << 30)


@pytest.mark.parametrize("op", SHAPES, ids=lambda op: op.describe())
def test_int8_is_bit_exact_with_numpy(op):
    inputs = _inputs(op)
    kernel = CpuKernel(op, "int8")
    kernel.set_weights(inputs["weight"], inputs.get("bias"))
    out = kernel.run(inputs["data"])
    assert out.dtype == np.int8 and out.shape == op.output_shape
    np.testing.assert_array_equal(out, op.reference(**inputs))


@pytest.mark.parametrize("op", SHAPES[1::2], ids=lambda op: op.describe())
def test_fp32_is_close_to_numpy(op):
    inputs = {name: (array / 16).astype(np.float32) for name, array in _inputs(op, 1).items()}
    kernel = CpuKernel(op, "fp32")
    kernel.set_weights(inputs["weight"], inputs.get("bias"))
    out = kernel.run(inputs["data"])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, reference_fp32(op, **inputs), rtol=1e-5, atol=1e-3)


def test_wrapping_accumulator_matches_numpy():
    # 2048 products of 127 * -128 reach -33M: with a bias near -2**31 the
    # int32 sum wraps, as the accelerator's does.
    op = Dense(1, 2048, 16, bias=True, shift=0)
    data = np.full((1, 2048), 127, np.int8)
    weight = np.full((16, 2048), -128, np.int8)
    bias = np.full(16, -(1 << 31) + 5, np.int32)
    kernel = CpuKernel(op, "int8")
    kernel.set_weights(weight, bias)
    np.testing.assert_array_equal(kernel.run(data), op.reference(data, weight, bias))


SCHEDULES = [
    CpuSchedule(lanes=8, oc_vectors=3, ow_tile=4, ic_block=8, loop_order="kernel_block",
                unroll=1, parallel="rows"),
    CpuSchedule(lanes=16, oc_vectors=1, ow_tile=5, ic_block=12, loop_order="block_kernel",
                unroll=2, parallel="channels"),
]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=str)
def test_other_schedules_compute_the_same(schedule):
    if schedule.lanes == 16 and not cpu_features()["avx512"]:
        pytest.skip("16-lane schedules are only in the knob space of AVX-512 machines")
    op = SHAPES[2]
    inputs = _inputs(op, 2)
    kernel = CpuKernel(op, "int8", schedule)
    kernel.set_weights(inputs["weight"], inputs.get("bias"))
    np.testing.assert_array_equal(kernel.run(inputs["data"], threads=3), op.reference(**inputs))


def test_portable_fallback_is_bit_exact():
    op = SHAPES[0]
    inputs = _inputs(op, 3)
    kernel = CpuKernel(op, "int8", SCHEDULES[0], flags=("-O2",))
    assert kernel.isa == "generic-vector"
    kernel.set_weights(inputs["weight"], inputs.get("bias"))
    np.testing.assert_array_equal(kernel.run(inputs["data"]), op.reference(**inputs))


def test_native_build_uses_the_dot_product_instruction_when_present():
    kernel = CpuKernel(SHAPES[4], "int8")
    if cpu_features()["vnni"]:
        assert kernel.isa in ("avx512-vnni", "avx512vl-vnni")
    else:
        assert kernel.isa in ("avx-vnni", "generic-vector")


def test_bad_mode_and_missing_weights_are_clear_errors():
    with pytest.raises(ScheduleError, match="mode: expected one of int8, fp32, got 'int4'"):
        CpuKernel(SHAPES[4], "int4")
    kernel = CpuKernel(SHAPES[4], "int8")
    with pytest.raises(ShapeError, match="call set_weights first"):
        kernel.run(np.zeros((1, 4, 4, 4), np.int8))
    kernel.set_weights(np.zeros((10, 4, 1, 1), np.int8), np.zeros(10, np.int32))
    with pytest.raises(ShapeError, match=r"data: expected shape \(1, 4, 4, 4\), got \(1, 4, 4, 5\)"):
        kernel.run(np.zeros((1, 4, 4, 5), np.int8))
    with pytest.raises(ShapeError, match=r"out: expected a C-contiguous int8 array of shape "
                                         r"\(1, 10, 4, 4\)"):
        kernel.run(np.zeros((1, 4, 4, 4), np.int8), out=np.zeros((1, 10, 4, 4), np.int32))


def test_more_parallel_items_than_the_pool_numbers_is_refused():
    from vdla.compiler.cpu import CpuProblem
    from vdla.compiler.cpu.codegen import generate_c
    problem = CpuProblem.from_op(Conv2d(1 << 12, 4, 4, 1 << 12, 1, kernel=1))
    with pytest.raises(ShapeError, match="the thread pool numbers at most 16777215"):
        generate_c(problem, CpuSchedule(lanes=8, oc_vectors=1, ow_tile=1, ic_block=4), "int8",
                   0, False)


@pytest.mark.slow
def test_random_convolutions_are_bit_exact():
    """Groups (depthwise included), dilation 1–3, asymmetric padding 0–5 (at or past the
    kernel too), rectangular kernels and strides, batch 1–3: int8 against numpy, and
    fp32 on every fourth. `benchmarks/conv_sweep.py` runs the same sweep at any size."""
    rng = np.random.default_rng(2323)
    for index in range(24):
        op = random_conv2d(rng)
        inputs = _inputs(op, index)
        kernel = CpuKernel(op, "int8")
        kernel.set_weights(inputs["weight"], inputs.get("bias"))
        np.testing.assert_array_equal(kernel.run(inputs["data"]), op.reference(**inputs),
                                      err_msg=op.describe())
        if index % 4 == 0:
            floats = {name: (array / 16).astype(np.float32) for name, array in inputs.items()}
            kernel = CpuKernel(op, "fp32")
            kernel.set_weights(floats["weight"], floats.get("bias"))
            np.testing.assert_allclose(kernel.run(floats["data"]), reference_fp32(op, **floats),
                                       rtol=1e-5, atol=1e-3, err_msg=op.describe())


@pytest.mark.parametrize("schedule", [
    None,
    CpuSchedule(lanes=8, oc_vectors=1, ow_tile=5, ic_block=4, unroll=1, parallel="rows"),
    CpuSchedule(lanes=8, oc_vectors=1, ow_tile=7, ic_block=4, unroll=1, parallel="channels"),
], ids=["default", "rows-tail", "channels"])
def test_depthwise_kernel_vectorises_channels(schedule):
    """40 channels: whole vectors and a part one; 13 columns: whole pixel tiles and a tail."""
    op = Conv2d(2, 40, 40, 11, 13, kernel=3, stride=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2),
                groups=40, bias=True, shift=6, relu=True)
    inputs = _inputs(op)
    kernel = CpuKernel(op, "int8", schedule)
    assert "depthwise kernel" in kernel.source
    kernel.set_weights(inputs["weight"], inputs.get("bias"))
    np.testing.assert_array_equal(kernel.run(inputs["data"]), op.reference(**inputs))
    floats = {name: (array / 16).astype(np.float32) for name, array in inputs.items()}
    kernel = CpuKernel(op, "fp32", schedule)
    kernel.set_weights(floats["weight"], floats.get("bias"))
    np.testing.assert_allclose(kernel.run(floats["data"]), reference_fp32(op, **floats),
                               rtol=1e-5, atol=1e-3)
