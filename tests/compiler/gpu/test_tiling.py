"""The gpu kernel's tiling, executed by the numpy model, against numpy references.

The model (`compiler.gpu.model`) runs the same `Tiling` formulas the CUDA C is
generated from, so a bit-exact result here means the kernel's block/warp/thread
mapping, shared-memory staging, padding, stride, K loop and output mapping are
right; the CUDA C around them is checked by nvcc (test_codegen) and on a GPU
(test_device).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vdla.compiler.cpu import reference_fp32
from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.gpu import GpuSchedule, Tiling, default_gpu_schedule, gpu_knob_space
from vdla.compiler.gpu.model import TilingError, dp4a, run_model
from vdla.compiler.gpu.tiling import Sym, select
from vdla.compiler.ops import Conv2d
from vdla.compiler.workloads import random_conv2d

from tests.compiler.gpu.shapes import ODD_SHAPES, RESNET_LAYERS, describe


def _inputs(op, seed=0):
    return op.random_inputs(np.random.default_rng(seed), bias_range=1 << 30)


def _model(op, schedule=None, mode="int8", inputs=None):
    problem = CpuProblem.from_op(op)
    tiling = Tiling(problem, schedule or default_gpu_schedule(problem, mode), mode)
    inputs = inputs or _inputs(op)
    return run_model(tiling, inputs["data"], inputs["weight"], inputs.get("bias"), op.shift,
                     op.relu), inputs


@pytest.mark.parametrize("op", ODD_SHAPES, ids=describe)
def test_int8_model_is_bit_exact_with_numpy(op):
    out, inputs = _model(op)
    assert out.shape == op.output_shape
    np.testing.assert_array_equal(out, op.reference(**inputs))


def _spread(candidates, count):
    """``count`` candidates spread over the space (first, last and evenly between)."""
    step = max(1, (len(candidates) - 1) // (count - 1))
    return candidates[::step][:count - 1] + [candidates[-1]]


@pytest.mark.parametrize("op", [ODD_SHAPES[2], ODD_SHAPES[6], ODD_SHAPES[8]], ids=describe)
def test_other_schedules_are_bit_exact(op):
    candidates = list(gpu_knob_space(CpuProblem.from_op(op), "int8"))
    for schedule in _spread(candidates, 6):
        out, inputs = _model(op, schedule)
        np.testing.assert_array_equal(out, op.reference(**inputs), err_msg=str(schedule))


@pytest.mark.parametrize("op", ODD_SHAPES[1::3], ids=describe)
@pytest.mark.parametrize("mode", ["fp16", "fp32"])
def test_float_model_is_close_to_numpy(op, mode):
    inputs = {name: (array / 16).astype(np.float32) for name, array in _inputs(op, 1).items()}
    out, _ = _model(op, mode=mode, inputs=inputs)
    np.testing.assert_allclose(out, reference_fp32(op, **inputs), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["C11/b1", "C10/b8", "C4/b1"])
def test_resnet_layer_model_is_bit_exact(name):
    op = RESNET_LAYERS[name]
    out, inputs = _model(op)
    np.testing.assert_array_equal(out, op.reference(**inputs))


def test_dp4a_is_four_signed_byte_products():
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-128, 128, (50, 4), dtype=np.int8) for _ in range(2))
    expected = (a.astype(np.int64) * b).sum(axis=1)
    np.testing.assert_array_equal(dp4a(a.view(np.int32)[:, 0], b.view(np.int32)[:, 0]),
                                  expected)


def test_weight_packing_puts_channel_q_in_byte_q():
    op = Conv2d(1, 6, 3, 4, 4, kernel=(2, 3))
    tiling = Tiling(CpuProblem.from_op(op), GpuSchedule(), "int8")
    weight = np.arange(3 * 6 * 2 * 3).reshape(3, 6, 2, 3).astype(np.int8)
    packed = tiling.pack_weight(weight)
    assert packed.shape == (2 * 3 * 2, 3)  # taps x ceil(6/4) words, 3 channels
    for n, dy, dx, c in itertools.product(range(3), range(2), range(3), range(8)):
        r = (dy * 3 + dx) * 2 + c // 4
        byte = packed[r, n:n + 1].view(np.int8)[c % 4]
        assert byte == (weight[n, c, dy, dx] if c < 6 else 0)


class _Overlapping(Tiling):
    """A broken tiling: two threads stage every A word."""

    def a_stage(self, tid, slot):
        kk, mm, in_tile = super().a_stage(tid // 2 * 2, slot)
        return kk, mm, in_tile


class _Shifted(Tiling):
    """A broken tiling: register-tile rows one pixel off."""

    def thread_row(self, tid, i):
        return super().thread_row(tid, i) + 1


@pytest.mark.parametrize("broken, message", [
    (_Overlapping, "two threads stage the same A word|reads an A word nobody staged"),
    (_Shifted, "reads an A word (nobody staged|outside its shared tile)|outputs never written"),
])
def test_model_reports_broken_tilings(broken, message):
    op = ODD_SHAPES[1]
    problem = CpuProblem.from_op(op)
    tiling = broken(problem, default_gpu_schedule(problem, "int8"), "int8")
    inputs = _inputs(op)
    with pytest.raises(TilingError, match=message):
        run_model(tiling, inputs["data"], inputs["weight"], None, 0, False)


def test_sym_prints_c_and_folds_identities():
    x = Sym("x")
    assert (x // 4 + 3 * x % 2).text == "((x / 4) + ((3 * x) % 2))"
    assert (x * 1 + 0).text == "x" and x * 0 == 0 and (x % 1) == 0
    assert ((x < 3) & (x >= 0)).text == "((x < 3) & (x >= 0))"
    assert select(x < 1, 2, x).text == "((x < 1) ? 2 : x)"
    np.testing.assert_array_equal(select(np.arange(3) < 1, 2, np.arange(3)), [2, 1, 2])


def test_random_convolutions_model_is_bit_exact():
    """Groups (depthwise included: a column block per group), dilation, asymmetric
    padding past the kernel, rectangular kernels and strides, batch 1–3."""
    rng = np.random.default_rng(2324)
    for _ in range(40):
        op = random_conv2d(rng)
        out, inputs = _model(op, inputs=op.random_inputs(rng, bias_range=1 << 30))
        np.testing.assert_array_equal(out, op.reference(**inputs), err_msg=op.describe())
