"""The numpy kernels against onnxruntime, one ONNX operator at a time (pads, strides, counts)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.graph.models import initializer, model_bytes
from vdla.frontend.onnx import from_bytes
from vdla.graph.kernels import execute, round_shift, round_shift_even

WEIGHT = np.random.default_rng(3).standard_normal((4, 3, 2, 3)).astype(np.float32)


@pytest.mark.parametrize("node, inits", [
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                      pads=[1, 1, 1, 1]), []),
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 3], strides=[1, 2],
                      pads=[0, 1, 1, 0]), []),
    (helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                      pads=[1, 1, 1, 1], count_include_pad=0), []),
    (helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                      pads=[1, 1, 1, 1], count_include_pad=1), []),
    (helper.make_node("GlobalAveragePool", ["x"], ["y"]), []),
    (helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 1], pads=[1, 0, 0, 2]),
     [initializer("w", WEIGHT)]),
])
def test_float_kernel_matches_onnxruntime(node, inits):
    ort = pytest.importorskip("onnxruntime")
    model = model_bytes([node], [("x", TensorProto.FLOAT, [2, 3, 9, 8])],
                        [("y", TensorProto.FLOAT, None)], inits)
    x = np.random.default_rng(4).standard_normal((2, 3, 9, 8)).astype(np.float32)
    expected = ort.InferenceSession(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(execute(from_bytes(model), {"x": x})["y"], expected, rtol=1e-5,
                               atol=1e-5)


def test_round_shift_rounds_half_up():
    values = np.array([-6, -5, -3, -2, 2, 3, 5, 6])
    np.testing.assert_array_equal(round_shift(values, 2), np.floor(values / 4 + 0.5))
    np.testing.assert_array_equal(round_shift(values, -3), values * 8)


@pytest.mark.parametrize("shift_a, shift_b, shift", [(0, 0, 0), (1, 0, 1), (22, 0, 30),
                                                     (22, 22, 31), (23, 2, 30)])
def test_residual_add_aligns_sums_and_rounds_half_to_even(shift_a, shift_b, shift):
    from vdla.graph.ir import Node
    from vdla.graph.kernels import run_node
    rng = np.random.default_rng(shift_a + shift)
    a, b = (rng.integers(-128, 128, (2, 3, 4, 5)).astype(np.int8) for _ in range(2))
    node = Node("add", "qadd", ["a", "b"], ["y"], {"shift_a": shift_a, "shift_b": shift_b,
                                                   "shift": shift, "relu": False})
    exact = (a.astype(np.int64) * 2 ** shift_a + b.astype(np.int64) * 2 ** shift_b) / 2 ** shift
    np.testing.assert_array_equal(run_node(node, [a, b])[0],
                                  np.clip(np.rint(exact), -128, 127))


def test_round_shift_even_rounds_ties_to_even():
    values = np.array([-7, -6, -5, -3, -2, 2, 3, 5, 6, 7, 10, 14], np.int64)
    np.testing.assert_array_equal(round_shift_even(values, 2), np.rint(values / 4))
    np.testing.assert_array_equal(round_shift_even(values, 0), values)
