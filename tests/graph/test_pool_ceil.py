"""MaxPool and AveragePool with ``ceil_mode=1`` (`graph.ops.pool`): float against
onnxruntime and onnx's reference on random cases, int8 against onnxruntime's
DequantizeLinear -> pool -> QuantizeLinear, through a network file on fsim, and the
refusal where onnx's shape inference and ONNX's pooling rule disagree."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.graph.models import model_bytes
from tests.graph.reference import fed_first, onnx_reference, onnxruntime, qdq_node, vdla_float
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.kernels import execute, run_node
from vdla.graph.network import compile_network, quantize_graph
from vdla.graph.network_file import dumps, loads
from vdla.hw.config import PRESETS


def _drops_a_window(size, kernel, stride, low, high) -> bool:
    """Whether ONNX's ceil mode drops its last window (it would start in the end padding)."""
    return (math.ceil((size + low + high - kernel) / stride)) * stride >= size + low


def _extra(size, kernel, stride, low, high) -> int:
    """How far ceil mode's last window reaches past the end padding."""
    count = math.ceil((size + low + high - kernel) / stride) + 1
    return max(0, (count - 1) * stride + kernel - size - low - high)


def _cases(seed, count):
    """Random ceil-mode pools (odd sizes, strides up to 3, pads below the kernel) that onnx's
    shape inference sizes as ONNX's rule does."""
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        kernel = [int(v) for v in rng.integers(1, 5, 2)]
        stride = [int(v) for v in rng.integers(1, 4, 2)]
        pads = [int(rng.integers(0, k)) for k in kernel + kernel]
        size = [int(v) for v in rng.integers(1, 10, 2)]
        axes = list(zip(size, kernel, stride, pads[:2], pads[2:]))
        if any(n + lo + hi < k for n, k, _, lo, hi in axes) or any(
                _drops_a_window(*axis) for axis in axes):
            continue
        cases.append((kernel, stride, pads, size, max(_extra(*axis) for axis in axes)))
    return cases


@pytest.mark.parametrize("op, include", [("MaxPool", None), ("AveragePool", 0),
                                         ("AveragePool", 1)])
def test_ceil_mode_matches_onnxruntime_and_onnx_on_random_cases(op, include):
    rng = np.random.default_rng(1)
    reaching = 0
    for kernel, stride, pads, size, extra in _cases({"MaxPool": 2, 0: 3, 1: 4}[
            include if include is not None else op], 40):
        attrs = {"kernel_shape": kernel, "strides": stride, "pads": pads, "ceil_mode": 1}
        if include is not None:
            attrs["count_include_pad"] = include
        x = rng.standard_normal((2, 3, *size)).astype(np.float32)
        data = fed_first(helper.make_node(op, ["x"], ["y"], **attrs), [x])
        _, (got,) = vdla_float(data, {"x": x})
        (want,) = onnxruntime(data, {"x": x})
        assert got.shape == want.shape, attrs
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=str(attrs))
        # onnx's reference splits ceil mode's extra padding between the two ends, which
        # moves the windows where it is 2 or more, and its MaxPool sizes some padded ceil-mode
        # outputs unlike onnxruntime and its own shape inference: elsewhere it agrees.
        if extra <= 1 and (op == "AveragePool" or not any(pads)):
            (reference,) = onnx_reference(data, {"x": x})
            np.testing.assert_allclose(got, reference, rtol=1e-6, atol=1e-6)
        reaching += extra > 0
    assert reaching > 10   # most cases have windows that reach past the padding


def test_an_average_counting_padding_with_ceil_mode_pads_first():
    """Its divisor counts the given padding but not ceil mode's: the given padding becomes a
    zero ``pad`` node, the pool pads only the rest, uncounted."""
    x = np.arange(1 * 1 * 6 * 6, dtype=np.float32).reshape(1, 1, 6, 6)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)
    data = fed_first(node, [x])
    graph, (got,) = vdla_float(data, {"x": x})
    assert [(n.op, n.attrs["pads"]) for n in graph.nodes] == [("pad", (1, 1, 1, 1)),
                                                               ("avgpool", (0, 0, 1, 1))]
    (want,) = onnxruntime(data, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # The corner window: x[5, 5] and three taps of padding; five more lie beyond it.
    assert got[0, 0, 3, 3] == pytest.approx(35 / 4)


def test_ceil_mode_where_onnx_shape_inference_disagrees_is_refused_in_one_line():
    x = np.zeros((1, 1, 4, 4), np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1], strides=[2, 2],
                            ceil_mode=1)
    with pytest.raises(GraphError, match=r"^node 'y' \(MaxPool\): ceil_mode=1 gives output "
                                         r"\(1, 1, 2, 2\) by ONNX's rule \(no window starts in "
                                         r"the bottom or right padding\), but onnx shape "
                                         r"inference says \(1, 1, 3, 3\), which the next nodes' "
                                         r"shapes follow; not supported$"):
        from_bytes(fed_first(node, [x]))


def _pool_model():
    """GoogLeNet's and SqueezeNet's ceil-mode max pool, then an average counting padding."""
    nodes = [helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2],
                              ceil_mode=1),
             helper.make_node("AveragePool", ["m"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, (2, 3, 12, 12))],
                       [("y", TensorProto.FLOAT, None)])


def _samples(seed, count=8):
    return {"x": np.random.default_rng(seed).standard_normal((count, 3, 12, 12))
            .astype(np.float32)}


def test_ceil_mode_pools_in_int8_compute_as_onnxruntime_between_dq_and_q():
    integer = quantize_graph(from_bytes(_pool_model()), _samples(5))
    checked = 0
    for node in integer.nodes:
        if node.op not in ("maxpool", "qavgpool"):
            continue
        q = np.random.default_rng(6).integers(-128, 128, integer.tensors[node.inputs[0]].shape
                                              ).astype(np.int8)
        s_x = integer.tensors[node.inputs[0]].real_scale
        s_y = integer.tensors[node.outputs[0]].real_scale
        top, left, bottom, right = node.attrs["pads"]
        attrs = {"kernel_shape": list(node.attrs["kernel"]),
                 "strides": list(node.attrs["stride"]), "pads": [top, left, bottom, right]}
        if node.op == "qavgpool":
            attrs["count_include_pad"] = int(node.attrs["count_include_pad"])
        onnx_op = {"maxpool": "MaxPool", "qavgpool": "AveragePool"}[node.op]
        (theirs,) = onnxruntime(qdq_node(helper.make_node(onnx_op, ["f"], ["g"], **attrs),
                                         s_x, s_y), {"q": q})
        (ours,) = run_node(node, [q])
        # A max is exact; an average is an exact integer mean rounded half to even, which
        # float32 arithmetic may miss by one step.
        assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= (
            0 if node.op == "maxpool" else 1)
        checked += 1
    assert checked == 2


def test_ceil_mode_pools_save_load_and_run_bit_exact_on_fsim():
    network = loads(dumps(compile_network(from_bytes(_pool_model()), PRESETS["default"],
                                          _samples(5))))
    assert [n.op for n in network.graph.nodes if n.op != "quantize_input"][:3] == [
        "maxpool", "pad", "qavgpool"]
    feeds = {"x": _samples(7, 2)["x"]}
    result = network.run(feeds, keep=True, sim="fsim")
    reference = execute(network.graph, feeds, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    (want,) = onnxruntime(_pool_model(), feeds)
    step = network.graph.tensors[network.graph.nodes[-1].inputs[0]].real_scale
    assert np.abs(result.outputs["y"] - want).max() <= 2 * step
