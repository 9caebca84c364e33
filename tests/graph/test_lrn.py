"""LRN (`graph.ops.lrn`): float against onnxruntime on random cases (and onnx's reference
where its loop covers every channel: batch equal to channels), int8 against
DequantizeLinear -> LRN -> QuantizeLinear, the refusals, the shape rule, and a network
through a file on fsim."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.graph.models import initializer, model_bytes
from tests.graph.reference import fed_first, onnx_reference, qdq_node, vdla_float
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.kernels import execute, run_node
from vdla.graph.network import compile_network, quantize_graph
from vdla.graph.network_file import HOST_SHAPES, dumps, loads
from vdla.hw.config import PRESETS

F32 = np.float32


def _random_lrn(rng):
    attrs = {"size": int(rng.choice([1, 3, 5, 7])),   # onnxruntime takes odd sizes
             "alpha": float(rng.uniform(1e-4, 0.5)),
             "beta": float(rng.uniform(0.1, 1.5)), "bias": float(rng.uniform(0.5, 3))}
    return helper.make_node("LRN", ["x"], ["y"], **attrs)


def test_lrn_matches_onnxruntime_on_random_cases():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(0)
    for _ in range(30):
        node = _random_lrn(rng)
        x = (rng.standard_normal((int(rng.integers(1, 3)), int(rng.integers(1, 9)), 3, 4))
             * 3).astype(F32)
        data = model_bytes([node], [("x", TensorProto.FLOAT, x.shape)],
                           [("y", TensorProto.FLOAT, None)])
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        (expected,) = session.run(None, {"x": x})
        graph, (got,) = vdla_float(data, {"x": x})
        assert [n.op for n in graph.nodes] == ["lrn"]
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-7, err_msg=str(node))


def test_lrn_is_onnx_reference_bit_for_bit_where_its_loop_covers_every_channel():
    """onnx's reference loops over the batch for the channels: it is right when they agree."""
    rng = np.random.default_rng(1)
    for channels in (1, 3, 6):
        node = _random_lrn(rng)
        x = (rng.standard_normal((channels, channels, 2, 3)) * 3).astype(F32)
        data = fed_first(node, [x])
        (expected,) = onnx_reference(data, {"x": x})
        np.testing.assert_array_equal(vdla_float(data, {"x": x})[1][0], expected)


# -- int8 -------------------------------------------------------------------------------------


def test_int8_lrn_is_what_dequantize_lrn_quantize_computes():
    """Dequantised, normalised, quantised at the output's calibrated scale: exactly onnx's
    reference between DequantizeLinear and QuantizeLinear (batch equal to channels, where
    that reference is right)."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((5, 5, 3, 4)) * 4).astype(F32)
    attrs = {"size": 3, "alpha": 0.3, "beta": 0.75, "bias": 1.5}
    node = helper.make_node("LRN", ["x"], ["y"], **attrs)
    integer = quantize_graph(from_bytes(fed_first(node, [x])), {"x": x})
    (qlrn,) = [n for n in integer.nodes if n.op == "qlrn"]
    s_x = integer.tensors[qlrn.inputs[0]].real_scale
    s_y = integer.tensors[qlrn.outputs[0]].real_scale
    assert (qlrn.attrs["scale"], qlrn.attrs["out_scale"]) == (s_x, s_y) and s_x != s_y
    q = rng.integers(-128, 128, x.shape, dtype=np.int8)
    (expected,) = onnx_reference(qdq_node(helper.make_node("LRN", ["f"], ["r"], **attrs),
                                          s_x, s_y), {"q": q})
    np.testing.assert_array_equal(run_node(qlrn, [q])[0], expected)


def test_int8_lrn_work_does_not_grow_with_its_window():
    """A window far wider than the channels sums them all (the prefix sums clamp it)."""
    q = np.random.default_rng(3).integers(-128, 128, (1, 4, 2, 2), dtype=np.int8)
    wide = Node("n", "qlrn", ["q"], ["y"], {"size": 65535, "alpha": 2.0, "beta": 0.5,
                                           "bias": 1.0, "scale": 0.125, "out_scale": 0.01})
    every = np.sum((q.astype(np.float64) * 0.125) ** 2, axis=1, keepdims=True)
    expected = np.rint(q * 0.125 / np.sqrt(1 + 2.0 / 65535 * every) / 0.01)
    np.testing.assert_array_equal(run_node(wide, [q])[0], np.clip(expected, -128, 127))


# -- refusals and the shape rule ----------------------------------------------------------------


@pytest.mark.parametrize("attrs, shape, message", [
    ({}, (1, 3, 4, 4), r"attribute size=None must be an integer from 1 to 65535$"),
    ({"size": 3, "bias": 0.0}, (1, 3, 4, 4),
     r"bias 0 and alpha 0.0001: vdla needs bias > 0 and alpha >= 0 \(a positive denominator\)$"),
    ({"size": 3, "alpha": -1.0}, (1, 3, 4, 4), r"bias 1 and alpha -1: vdla needs bias > 0"),
    ({"size": 3}, (3, 4, 4), r"input 'x' has shape \(3, 4, 4\); expected rank 4$"),
    ({"size": 4096}, (1, 2048, 256, 256),
     r"its window of 4095 channels over 134,217,728 elements is more than vdla computes"),
])
def test_what_lrn_cannot_import_is_refused_in_one_line(attrs, shape, message):
    node = helper.make_node("LRN", ["x"], ["y"], **attrs)
    data = model_bytes([node], [("x", TensorProto.FLOAT, shape)],
                       [("y", TensorProto.FLOAT, None)])
    with pytest.raises(GraphError, match=rf"^node 'y' \(LRN\): {message}"):
        from_bytes(data)


@pytest.mark.parametrize("attrs, dtype, shape, message", [
    ({"bias": -1.0}, np.int8, (1, 3, 2, 2), r"bias -1 and alpha 0.5: vdla needs bias > 0"),
    ({}, np.float32, (1, 3, 2, 2), r"its input is float32 \(1, 3, 2, 2\), not int8$"),
    ({}, np.int8, (3, 2, 2), r"input 'x' is int8 \(3, 2, 2\), not of rank 4$"),
])
def test_the_shape_rule_refuses_what_the_kernel_cannot_take(attrs, dtype, shape, message):
    node = Node("n", "qlrn", ["x"], ["y"], {"size": 3, "alpha": 0.5, "beta": 0.75,
                                           "bias": 1.0, "scale": 0.5, "out_scale": 0.5,
                                           **attrs})
    with pytest.raises(GraphError, match=rf"^node 'n' \(qlrn\): {message}"):
        HOST_SHAPES["qlrn"][1](node, Tensor("x", shape, dtype))


# -- a network ----------------------------------------------------------------------------------


def test_a_network_with_lrn_saves_loads_and_runs_bit_exact():
    """AlexNet's conv, relu, LRN, conv."""
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("LRN", ["r1"], ["n1"], size=5, alpha=1e-2, beta=0.75, bias=1.0),
             helper.make_node("Conv", ["n1", "w2"], ["y"], pads=[1, 1, 1, 1])]
    inits = [initializer("w1", (rng.standard_normal((8, 2, 3, 3)) * 0.3).astype(F32)),
             initializer("w2", (rng.standard_normal((3, 8, 3, 3)) * 0.3).astype(F32))]
    graph = from_bytes(model_bytes(nodes, [("x", TensorProto.FLOAT, (2, 2, 6, 6))],
                                   [("y", TensorProto.FLOAT, None)], inits))
    network = loads(dumps(compile_network(graph, PRESETS["default"], {
        "x": rng.standard_normal((8, 2, 6, 6)).astype(F32)})))
    assert "qlrn" in {n.op for n in network.graph.nodes}
    x = rng.standard_normal((2, 2, 6, 6)).astype(F32)
    result = network.run({"x": x}, keep=True, sim="fsim")
    reference = execute(network.graph, {"x": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    expected, got = execute(graph, {"x": x})["y"], result.outputs["y"]
    assert float(np.ravel(got) @ np.ravel(expected)
                 / np.linalg.norm(got) / np.linalg.norm(expected)) > 0.99
