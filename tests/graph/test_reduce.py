"""ReduceMax, GlobalMaxPool and ReduceMean (`graph.ops.reduce`): float against onnx's
reference on random cases (axes as attribute and as input, keepdims, noop_with_empty_axes),
int8 against DequantizeLinear -> reduction -> QuantizeLinear, the refusals, the shape rule,
and GlobalMaxPool on the blocked layout through a network file on fsim."""

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
from vdla.graph.layout import runs_blocked
from vdla.graph.network import compile_network, quantize_graph
from vdla.graph.network_file import HOST_SHAPES, dumps, loads
from vdla.hw.config import PRESETS

F32 = np.float32


def _random_reduction(rng, op, opset):
    shape = tuple(int(n) for n in rng.integers(1, 5, int(rng.integers(1, 5))))
    axes = [int(a) - len(shape) * int(rng.integers(0, 2))
            for a in rng.permutation(len(shape))[:int(rng.integers(1, len(shape) + 1))]]
    keepdims = int(rng.integers(0, 2))
    if not keepdims and len(axes) == len(shape):
        keepdims = 1   # a scalar output: refused (below)
    if opset < 18:
        return helper.make_node(op, ["x"], ["y"], axes=axes, keepdims=keepdims), shape, []
    return (helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims), shape,
            [np.array(axes, np.int64)])


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMean"])
@pytest.mark.parametrize("opset", [13, 18])
def test_reductions_match_onnx_on_random_cases(op, opset):
    rng = np.random.default_rng(opset)
    for _ in range(30):
        node, shape, constants = _random_reduction(rng, op, opset)
        x = rng.standard_normal(shape).astype(F32)
        data = fed_first(node, [x, *constants], opset)
        (expected,) = onnx_reference(data, {"x": x})
        graph, (got,) = vdla_float(data, {"x": x})
        assert [n.op for n in graph.nodes] == [op.lower().replace("reduce", "reduce_")]
        assert got.dtype == expected.dtype and got.shape == expected.shape, node
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("node, arrays, ops", [
    (helper.make_node("ReduceMean", ["x"], ["y"]), [], ["reduce_mean"]),   # every axis, kept
    (helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=1), [], ["reshape"]),
    (helper.make_node("ReduceMean", ["x", "axes"], ["y"], noop_with_empty_axes=1),
     [np.zeros(0, np.int64)], ["reshape"]),
    (helper.make_node("GlobalMaxPool", ["x"], ["y"]), [], ["reduce_max"]),
])
def test_default_axes_noop_and_global_max_pool_match_onnx(node, arrays, ops):
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(F32)
    data = fed_first(node, [x, *arrays], 18)
    (expected,) = onnx_reference(data, {"x": x})
    graph, (got,) = vdla_float(data, {"x": x})
    assert [n.op for n in graph.nodes] == ops
    np.testing.assert_array_equal(got, expected)


# -- int8 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("op, axes, keepdims", [
    ("ReduceMax", [2, 3], 1), ("ReduceMax", [1], 0), ("ReduceMean", [2, 3], 1),
    ("ReduceMean", [1, 3], 0), ("ReduceMean", [0, 1, 2, 3], 1)])
def test_int8_reductions_are_what_dequantize_reduce_quantize_computes(op, axes, keepdims):
    """At the input's power-of-two scale: a max exactly, a mean the exact integer mean
    rounded half to even: onnx's reference between DequantizeLinear and QuantizeLinear."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 3, 6)).astype(F32)
    node = helper.make_node(op, ["x"], ["y"], axes=axes, keepdims=keepdims)
    integer = quantize_graph(from_bytes(fed_first(node, [x])), {"x": x})
    (reduction,) = [n for n in integer.nodes if n.op.startswith("reduce")]
    s_x = integer.tensors[reduction.inputs[0]].real_scale
    assert integer.tensors[reduction.outputs[0]].real_scale == s_x
    assert "scale" not in reduction.attrs
    q = rng.integers(-128, 128, x.shape, dtype=np.int8)
    q[0, 0] = 3   # whole windows of one value: a mean's ties and its exact values
    q[1, :, 0] = np.array([1, 2, 1, 2, 1, 2])
    (expected,) = onnx_reference(qdq_node(helper.make_node(op, ["f"], ["r"], axes=axes,
                                                           keepdims=keepdims), s_x, s_x),
                                 {"q": q})
    np.testing.assert_array_equal(run_node(reduction, [q])[0], expected)


def test_int8_mean_at_a_qdq_models_scales_dequantises_first():
    q = np.random.default_rng(3).integers(-128, 128, (2, 3, 4, 5), dtype=np.int8)
    node = Node("m", "reduce_mean", ["q"], ["y"], {"axes": (1, 2), "keepdims": False,
                                                  "scale": 0.0371, "out_scale": 0.0113})
    (expected,) = onnx_reference(qdq_node(helper.make_node(
        "ReduceMean", ["f"], ["r"], axes=[1, 2], keepdims=0), 0.0371, 0.0113), {"q": q})
    np.testing.assert_array_equal(run_node(node, [q])[0], expected)


# -- refusals and the shape rule ----------------------------------------------------------------


@pytest.mark.parametrize("node, arrays, message", [
    (helper.make_node("ReduceMax", ["x"], ["y"], keepdims=0), [],
     r"a reduction of every axis to a scalar \(keepdims=0\) is not supported$"),
    (helper.make_node("ReduceMean", ["x", "axes"], ["y"]), [np.array([1, -2], np.int64)],
     r"axes \[1, -2\] repeat an axis$"),
    (helper.make_node("ReduceMean", ["x", "axes"], ["y"]), ["computed"],
     r"its axes \('axes'\) must be a constant$"),
    (helper.make_node("ReduceMax", ["x"], ["y"], keepdims=2), [],
     r"attribute keepdims=2 is not supported \(supported: 0, 1\)$"),
])
def test_what_a_reduction_cannot_import_is_refused_in_one_line(node, arrays, message):
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    if arrays and isinstance(arrays[0], str):   # a computed axes input
        data = model_bytes([node], [("x", f32, (2, 3, 4)), ("axes", i64, (1,))],
                           [("y", f32, None)], [], 18)
    else:
        data = model_bytes([node], [("x", f32, (2, 3, 4))], [("y", f32, None)],
                           [initializer(name, a) for name, a in zip(node.input[1:], arrays)],
                           18)
    with pytest.raises(GraphError, match=rf"^node 'y' \({node.op_type}\): {message}"):
        from_bytes(data)


@pytest.mark.parametrize("attrs, dtype, message", [
    ({"axes": (1, 4), "keepdims": True}, np.int8,
     r"axes \[1, 4\] are not distinct axes of int8 \(2, 3, 4, 5\)$"),
    ({"axes": (2, 2), "keepdims": True}, np.int8, r"axes \[2, 2\] are not distinct axes"),
    ({"axes": (0, 1, 2, 3), "keepdims": False}, np.int8,
     r"reduces every axis of int8 \(2, 3, 4, 5\) to a scalar \(keepdims false\)$"),
    ({"axes": (1,), "keepdims": True, "scale": 0.5, "out_scale": 0.5}, np.float32,
     r"its input is float32 \(2, 3, 4, 5\); scales apply to int8$"),
])
def test_the_shape_rule_refuses_what_the_kernel_cannot_take(attrs, dtype, message):
    node = Node("n", "reduce_mean", ["x"], ["y"], attrs)
    with pytest.raises(GraphError, match=rf"^node 'n' \(reduce_mean\): {message}"):
        HOST_SHAPES["reduce_mean"][1](node, Tensor("x", (2, 3, 4, 5), dtype))


# -- a network ----------------------------------------------------------------------------------


def _pooled_model() -> bytes:
    """conv, relu, GlobalMaxPool (blocked), a channel mean (logical), flatten, gemm."""
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalMaxPool", ["r"], ["g"]),
             helper.make_node("ReduceMean", ["r"], ["m"], axes=[1], keepdims=1),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
             helper.make_node("Flatten", ["m"], ["z"])]
    inits = [initializer("w", (rng.standard_normal((6, 2, 3, 3)) * 0.3).astype(F32)),
             initializer("fw", (rng.standard_normal((4, 6)) * 0.3).astype(F32)),
             initializer("fb", np.zeros(4, F32))]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, (2, 2, 6, 6))],
                       [("y", TensorProto.FLOAT, None), ("z", TensorProto.FLOAT, None)],
                       inits)


def test_global_max_pool_runs_blocked_and_a_network_of_reductions_is_bit_exact():
    graph = from_bytes(_pooled_model())
    rng = np.random.default_rng(5)
    network = loads(dumps(compile_network(graph, PRESETS["default"], {
        "x": rng.standard_normal((8, 2, 6, 6)).astype(F32)})))
    blocked = {n.op: runs_blocked(network.graph, n) for n in network.graph.nodes
               if n.op.startswith("reduce")}
    assert blocked == {"reduce_max": True, "reduce_mean": False}
    x = rng.standard_normal((2, 2, 6, 6)).astype(F32)
    result = network.run({"x": x}, keep=True, sim="fsim")
    reference = execute(network.graph, {"x": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    expected = execute(graph, {"x": x})
    for name in ("y", "z"):
        got = result.outputs[name]
        assert float(np.ravel(got) @ np.ravel(expected[name]) / np.linalg.norm(got)
                     / np.linalg.norm(expected[name])) > 0.99, name
