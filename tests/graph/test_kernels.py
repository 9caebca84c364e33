"""The numpy kernels against onnxruntime, one ONNX operator at a time (pads, strides, counts),
and the pools' tap reduction against its plain tap-by-tap loop."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.graph.models import initializer, model_bytes
from vdla.frontend.onnx import from_bytes
from vdla.graph.ops import base, pool
from vdla.graph.ir import Node
from vdla.graph.kernels import execute, round_shift, round_shift_even, run_node

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
    # windows over fewer output positions than they have taps
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[9, 8], pads=[1, 1, 1, 1]), []),
    (helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[8, 8], pads=[1, 0, 0, 1],
                      count_include_pad=0), []),
    (helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[8, 7], strides=[1, 2],
                      pads=[2, 3, 1, 0], count_include_pad=1), []),
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


def _reduce_taps_tap_by_tap(x, node, fill, combine, dtype):
    """The pools' tap reduction as one strided slice per tap, combined in row-major order."""
    (kh, kw), (sh, sw) = node.attrs["kernel"], node.attrs["stride"]
    top, left, bottom, right = node.attrs["pads"]
    widths = ((0, 0), (0, 0), (top, bottom), (left, right)) + ((0, 0),) * (x.ndim - 4)
    padded = np.pad(np.asarray(x, dtype), widths, constant_values=fill)
    oh = (padded.shape[2] - kh) // sh + 1
    ow = (padded.shape[3] - kw) // sw + 1
    out = None
    for dy in range(kh):
        for dx in range(kw):
            tap = padded[:, :, dy:dy + sh * (oh - 1) + 1:sh, dx:dx + sw * (ow - 1) + 1:sw]
            out = tap.copy() if out is None else combine(out, tap, out=out)
    return out


# (fill, combine, dtype) as maxpool (int8, float), avgpool, and qavgpool (exact, float) use them
_REDUCTIONS = [(-128, np.maximum, np.int8), (-np.inf, np.maximum, np.float32),
               (0, np.add, np.float64), (0, np.add, np.float32), (0, np.add, np.int64)]


def _random_pool(rng):
    kernel = tuple(int(k) for k in rng.integers(1, 9, 2))
    pads = tuple(int(rng.integers(0, k)) for k in kernel + kernel)
    stride = tuple(int(s) for s in rng.integers(1, 4, 2))
    height, width = (int(rng.integers(max(1, k - a - b), k - a - b + 9))
                     for k, a, b in zip(kernel, pads[:2], pads[2:]))
    trailing = [(), (2,), (2, 3)][int(rng.integers(3))]  # a blocked layout's element axes
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), height, width) + trailing
    node = Node("pool", "maxpool", ["x"], ["y"], {"kernel": kernel, "stride": stride,
                                                  "pads": pads})
    return node, shape


@pytest.mark.parametrize("chunk", [None, 5])
def test_tap_reduction_is_bit_identical_to_the_tap_by_tap_loop(chunk, monkeypatch):
    if chunk is not None:  # windows combined in many chunks, each from the last one's result
        monkeypatch.setattr(pool, "_TAP_CHUNK_ELEMENTS", chunk)
    rng = np.random.default_rng(34)
    fewer_positions = pairwise_differs = 0
    for _ in range(150):
        node, shape = _random_pool(rng)
        fill, combine, dtype = _REDUCTIONS[int(rng.integers(len(_REDUCTIONS)))]
        if np.dtype(dtype).kind == "f":  # wide magnitudes, so that the order of a sum shows
            x = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-4, 4, shape)).astype(dtype)
        else:
            x = rng.integers(-128, 128, shape).astype(np.int8)
        expected = _reduce_taps_tap_by_tap(x, node, fill, combine, dtype)
        got = pool._reduce_taps(x, node, fill, combine, dtype)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes(), (node.attrs, shape, dtype)
        kernel = node.attrs["kernel"]
        fewer_positions += expected.shape[2] * expected.shape[3] < kernel[0] * kernel[1]
        if combine is np.add and dtype == np.float32:
            windows = base.windows(x, kernel, node.attrs["stride"], node.attrs["pads"], 0)
            pairwise_differs += windows.sum(axis=(4, 5)).tobytes() != expected.tobytes()
    assert fewer_positions >= 30  # both loops run
    assert pairwise_differs >= 3  # a sum in another order would be caught


def _python_lines_in_kernels(function):
    """``function()`` and the Python lines it ran in the pools' kernels (`graph.ops.pool`)."""
    lines = 0

    def trace(frame, event, arg):
        nonlocal lines
        if frame.f_code.co_filename != pool.__file__:
            return None
        if event == "line":
            lines += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        result = function()
    finally:
        sys.settrace(previous)
    return result, lines


@pytest.mark.parametrize("op, attrs", [("maxpool", {}), ("qavgpool", {"count_include_pad": False})])
def test_a_huge_window_over_one_position_takes_few_python_steps(op, attrs):
    """A 301x301 window padded around a 1x1 input: one output position, 90601 taps.

    A loop over the taps runs 2 lines per tap; the reduction loops over the one
    position instead (the same bound keeps a 16383x16383 window from looping
    2.7e8 times).
    """
    x = np.array([-7, 100], np.int8).reshape(1, 2, 1, 1)
    node = Node("pool", op, ["x"], ["y"], {"kernel": (301, 301), "stride": (1, 1),
                                           "pads": (150, 150, 150, 150), **attrs})
    (y,), lines = _python_lines_in_kernels(lambda: run_node(node, [x]))
    # Padding takes no part in a max or (count_include_pad off) in a mean: both are x.
    np.testing.assert_array_equal(y, x)
    assert y.dtype == np.int8
    assert lines < 300
