"""Elementwise operators of two computed tensors (broadcasting), PRelu and SiLU: ONNX import
against onnx's reference, int8 semantics against DequantizeLinear -> op -> QuantizeLinear,
the gate fusion pass, and a squeeze-excite network through a file, every tier and QDQ."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.graph.models import initializer, model_bytes
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.export import to_qdq
from vdla.graph.ir import Node, Tensor
from vdla.graph.kernels import execute, run_node
from vdla.graph.layout import runs_blocked
from vdla.graph.network import compile_network, quantize_graph
from vdla.graph.network_file import HOST_SHAPES, dumps, loads
from vdla.graph.passes import PIPELINE, run_passes
from vdla.hw.config import PRESETS

F32 = TensorProto.FLOAT


def _fed(node, arrays, inits=()):
    """A model of ``node`` with every array fed (``inits``: initialisers)."""
    names = [name for name in node.input if name not in {i.name for i in inits}]
    return model_bytes([node], [(name, F32, array.shape) for name, array in zip(names, arrays)],
                       [(out, TensorProto.UNDEFINED, None) for out in node.output], inits)


def _random(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# -- float semantics --------------------------------------------------------------------------

_SHAPES = [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (2, 3, 1, 1)),
           ((2, 3, 4, 5), (1, 3, 1, 1)), ((1, 3, 1, 1), (2, 3, 4, 5)), ((2, 3, 4, 5), ()),
           ((3, 1, 5), (1, 4, 1)), ((4, 5), (2, 3, 4, 5))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("shapes", _SHAPES, ids=str)
def test_two_computed_tensors_broadcast_as_onnx_does(op, shapes):
    rng = np.random.default_rng(len(op) + len(shapes[0]))
    a, b = (_random(rng, shape) for shape in shapes)
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, np.float32(0.5), b)
    data = _fed(helper.make_node(op, ["a", "b"], ["y"]), [a, b])
    (expected,) = ReferenceEvaluator(onnx.load_from_string(data)).run(None, {"a": a, "b": b})
    graph = from_bytes(data)
    assert [node.op for node in graph.nodes] == [op.lower()]
    got = execute(graph, {"a": a, "b": b})["y"]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1, 3, 1, 1), (5,), (3, 4, 5), (1,), ()])
def test_prelu_matches_onnx_and_one_slope_is_a_leakyrelu(slope_shape):
    rng = np.random.default_rng(11)
    x = _random(rng, (2, 3, 4, 5), 3)
    slope = rng.uniform(-0.5, 0.5, slope_shape).astype(np.float32)
    data = _fed(helper.make_node("PRelu", ["x", "slope"], ["y"]), [x],
                [initializer("slope", slope)])
    (expected,) = ReferenceEvaluator(onnx.load_from_string(data)).run(None, {"x": x})
    graph = from_bytes(data)
    assert [node.op for node in graph.nodes] == ["leakyrelu" if slope.size == 1 else "prelu"]
    np.testing.assert_array_equal(execute(graph, {"x": x})["y"], expected)


def _prelu_model(slope):
    return _fed(helper.make_node("PRelu", ["x", "slope"], ["y"]),
                [np.zeros((2, 3, 4), np.float32)], [initializer("slope", slope)])


# (Shapes that do not broadcast at all are refused by onnx's shape inference first.)
@pytest.mark.parametrize("data, message", [
    (_fed(helper.make_node("Add", ["a", "c"], ["y"]), [np.zeros((1, 3), np.float32)],
          [initializer("c", np.ones((2, 3), np.float32))]),
     r"\(Add\): constant 'c' of shape \(2, 3\) does not broadcast onto 'a' of shape \(1, 3\) "
     r"\(a bias must not enlarge it\)$"),
    (_fed(helper.make_node("PRelu", ["x", "s"], ["y"]),
          [np.zeros((2, 3), np.float32), np.zeros(3, np.float32)]),
     r"\(PRelu\): its slope \('s'\) must be a constant$"),
    (_prelu_model(np.ones((2, 1), np.float32)),
     r"\(PRelu\): its slope 'slope' of shape \(2, 1\) does not broadcast onto its input's "
     r"\(2, 3, 4\)$"),
    (_prelu_model(np.ones((2, 2, 3, 4), np.float32)),
     r"\(PRelu\): its slope 'slope' of shape \(2, 2, 3, 4\) does not broadcast"),
    (_prelu_model(np.array([1, np.nan, 0], np.float32).reshape(3, 1)),
     r"\(PRelu\): its slope \('slope'\) holds NaN values"),
    (model_bytes([helper.make_node("PRelu", ["x", "slope"], ["y"])],
                 [("x", TensorProto.INT32, (2, 4))], [("y", TensorProto.INT32, None)],
                 [initializer("slope", np.ones(4, np.int32))]),
     r"\(PRelu\): its input and slope \('slope', int32\) must be float$"),
], ids=["add-enlarging-bias", "prelu-computed-slope", "prelu-slope-3x1", "prelu-slope-rank",
        "prelu-nan", "prelu-int-slope"])
def test_what_cannot_be_imported_is_refused_in_one_line(data, message):
    with pytest.raises(GraphError, match=rf"^node 'y' {message}"):
        from_bytes(data)


# -- int8 semantics against DequantizeLinear -> op -> QuantizeLinear ----------------------------


def _qdq_reference(op, scales, out_scale, arrays, extra=()):
    """onnx's reference of DequantizeLinear (each int8 input) -> op -> QuantizeLinear."""
    names = [f"q{i}" for i in range(len(arrays))]
    nodes = [helper.make_node("DequantizeLinear", [name, f"s{i}"], [f"f{i}"])
             for i, name in enumerate(names)]
    nodes += [helper.make_node(op, [f"f{i}" for i in range(len(arrays))] + [e for e, _ in extra],
                               ["g"]),
              helper.make_node("QuantizeLinear", ["g", "sy", "zero"], ["y"])]
    inits = [numpy_helper.from_array(np.array(s, np.float32), f"s{i}")
             for i, s in enumerate(scales)]
    inits += [numpy_helper.from_array(np.array(out_scale, np.float32), "sy"),
              numpy_helper.from_array(np.array(0, np.int8), "zero")]
    inits += [numpy_helper.from_array(value, name) for name, value in extra]
    graph = helper.make_graph(nodes, "qdq", [
        helper.make_tensor_value_info(name, TensorProto.INT8, list(array.shape))
        for name, array in zip(names, arrays)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    (out,) = ReferenceEvaluator(model).run(None, dict(zip(names, arrays)))
    return out


def _every_pair():
    every = np.arange(-128, 128, dtype=np.int8)
    return every.reshape(256, 1), every.reshape(1, 256)


def _integer(op, shapes, samples):
    """The integer graph of ``a op b`` calibrated on ``samples``, and its one integer node."""
    data = _fed(helper.make_node(op, ["a", "b"], ["y"]),
                [np.zeros(shape, np.float32) for shape in shapes])
    integer = quantize_graph(from_bytes(data), dict(zip("ab", samples)))
    (node,) = [n for n in integer.nodes if n.op not in ("quantize_input", "dequantize_output")]
    return integer, node


@pytest.mark.parametrize("op, expected", [("Mul", "qmul"), ("Sub", "qsub"),
                                          ("Add", "qadd_broadcast")])
def test_power_of_two_scales_compute_exactly_what_dequantize_op_quantize_does(op, expected):
    """At power-of-two scales every float32 step is exact but the last rounding: the integer
    kernel equals the QDQ reference on every pair of int8 inputs."""
    rng = np.random.default_rng(2)
    a, b = _random(rng, (16, 3, 4, 4), 3), _random(rng, (16, 3, 1, 1), 0.4)
    integer, node = _integer(op, [(2, 3, 4, 4), (2, 3, 1, 1)], [a, b])
    assert node.op == expected and "shift" in node.attrs
    scales = [integer.tensors[name].real_scale for name in node.inputs]
    out_scale = integer.tensors[node.outputs[0]].real_scale
    qa, qb = _every_pair()
    (got,) = run_node(node, [qa, qb])
    want = _qdq_reference(op, scales, out_scale, [qa, qb])
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 100   # the scales leave the outputs a range


@pytest.mark.parametrize("op, attrs", [
    ("Mul", {"scale_a": 0.037, "scale_b": 0.0113, "out_scale": 0.0021}),
    ("Mul", {"scale_a": 3.1e-3, "scale_b": 7.7, "out_scale": 0.9}),
    ("Div", {"scale_a": 0.037, "scale_b": 0.0113, "out_scale": 0.21}),
    ("Div", {"scale_a": 2.0 ** -5, "scale_b": 2.0 ** -7, "out_scale": 2.0 ** -3}),
])
def test_other_scales_compute_as_dequantize_op_quantize_in_float32(op, attrs):
    qa, qb = _every_pair()
    node = Node("n", "q" + op.lower(), ["a", "b"], ["y"], attrs)
    (got,) = run_node(node, [qa, qb])
    with np.errstate(divide="ignore", invalid="ignore"):
        want = _qdq_reference(op, [attrs["scale_a"], attrs["scale_b"]], attrs["out_scale"],
                              [qa, qb])
    if op == "Div":
        # A zero divisor saturates toward the dividend's sign; 0 / 0 is 0 (NaN in float).
        zero = np.broadcast_to(qb == 0, got.shape)
        expected_zero = np.broadcast_to(np.sign(qa.astype(int)) * 128, got.shape).clip(-128, 127)
        np.testing.assert_array_equal(got[zero], expected_zero[zero])
        np.testing.assert_array_equal(got[~zero], want[~zero])
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["qsub", "qadd_broadcast"])
def test_other_scales_add_as_onnxruntimes_qlinearadd(op):
    """Float32 ratios summed and rounded half to even (QLinearAdd; onnxruntime's own kernel
    for Add, within 1 LSB of its contrib op and of a float DequantizeLinear -> op -> Q)."""
    ort = pytest.importorskip("onnxruntime")
    s_a, s_b, s_y = 0.037, 0.0113, 0.041
    qa, qb = _every_pair()
    node = Node("n", op, ["a", "b"], ["y"], {"scale_a": float(np.float32(s_a) / np.float32(s_y)),
                                             "scale_b": float(np.float32(s_b) / np.float32(s_y)),
                                             "relu": False})
    (got,) = run_node(node, [qa, qb])
    sign = -1 if op == "qsub" else 1
    exact = np.rint(qa.astype(np.float64) * (s_a / s_y) + sign * qb.astype(np.float64)
                    * (s_b / s_y))
    assert np.abs(got - exact.clip(-128, 127)).max() <= 1
    if op == "qadd_broadcast":
        model = helper.make_model(helper.make_graph(
            [helper.make_node("QLinearAdd", ["a", "sa", "z", "b", "sb", "z", "sy", "z"], ["y"],
                              domain="com.microsoft")], "qladd",
            [helper.make_tensor_value_info(n, TensorProto.INT8, s)
             for n, s in (("a", [256, 1]), ("b", [1, 256]))],
            [helper.make_tensor_value_info("y", TensorProto.INT8, [256, 256])],
            [numpy_helper.from_array(np.array(v, np.float32), n)
             for n, v in (("sa", s_a), ("sb", s_b), ("sy", s_y))]
            + [numpy_helper.from_array(np.array(0, np.int8), "z")]),
            opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
            ir_version=8)
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        (theirs,) = session.run(None, {"a": qa, "b": qb})
        assert np.abs(got.astype(int) - theirs).max() <= 1


def test_power_of_two_mul_equals_onnxruntimes_qlinearmul():
    ort = pytest.importorskip("onnxruntime")
    qa, qb = _every_pair()
    node = Node("n", "qmul", ["a", "b"], ["y"], {"shift": 9})
    (got,) = run_node(node, [qa, qb])
    model = helper.make_model(helper.make_graph(
        [helper.make_node("QLinearMul", ["a", "sa", "z", "b", "sb", "z", "sy", "z"], ["y"],
                          domain="com.microsoft")], "qlmul",
        [helper.make_tensor_value_info(n, TensorProto.INT8, s)
         for n, s in (("a", [256, 1]), ("b", [1, 256]))],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [256, 256])],
        [numpy_helper.from_array(np.array(v, np.float32), n)
         for n, v in (("sa", 2.0 ** -5), ("sb", 2.0 ** -6), ("sy", 2.0 ** -2))]
        + [numpy_helper.from_array(np.array(0, np.int8), "z")]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {"a": qa, "b": qb})
    np.testing.assert_array_equal(got, theirs)


def test_qprelu_computes_as_dequantize_prelu_quantize():
    x = np.arange(-128, 128, dtype=np.int8).reshape(4, 4, 16)
    slope = np.array([0.25, -0.3, 1.7, 0.0], np.float32).reshape(1, 4, 1)
    node = Node("n", "qprelu", ["x", "slope"], ["y"], {"scale": 0.043, "out_scale": 0.051})
    (got,) = run_node(node, [x, slope])
    want = _qdq_reference("PRelu", [0.043], 0.051, [x], extra=[("slope", slope)])
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 100


def test_silu_table_is_dequantize_sigmoid_mul_quantize():
    """The fused table equals onnx's reference of the exporter's form, DequantizeLinear ->
    Sigmoid, Mul by the dequantised input -> QuantizeLinear, on every int8 input."""
    x = np.linspace(-6, 6, 64, dtype=np.float32).reshape(1, 64)
    nodes = [helper.make_node("Sigmoid", ["x"], ["g"]), helper.make_node("Mul", ["x", "g"], ["y"])]
    data = model_bytes(nodes, [("x", F32, x.shape)], [("y", F32, None)])
    integer = quantize_graph(from_bytes(data), {"x": x})
    (silu,) = [n for n in integer.nodes if n.op == "silu"]
    s_x = integer.tensors[silu.inputs[0]].real_scale
    s_y = integer.tensors[silu.outputs[0]].real_scale
    every = np.arange(-128, 128, dtype=np.int8)
    q = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["q", "sx"], ["f"]),
         helper.make_node("Sigmoid", ["f"], ["g"]), helper.make_node("Mul", ["f", "g"], ["m"]),
         helper.make_node("QuantizeLinear", ["m", "sy", "zero"], ["y"])], "qdq",
        [helper.make_tensor_value_info("q", TensorProto.INT8, [256])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [256])],
        [numpy_helper.from_array(np.array(s, np.float32), n) for s, n in ((s_x, "sx"), (s_y, "sy"))]
        + [numpy_helper.from_array(np.array(0, np.int8), "zero")])
    (want,) = ReferenceEvaluator(helper.make_model(
        q, opset_imports=[helper.make_opsetid("", 19)])).run(None, {"q": every})
    np.testing.assert_array_equal(np.array(silu.attrs["table"], np.int8), want)
    np.testing.assert_array_equal(run_node(silu, [every])[0], want)


# -- the gate fusion pass ---------------------------------------------------------------------


def _gated(gate, attrs=None, order=("x", "g"), extra_reader=False):
    nodes = [helper.make_node(gate, ["x"], ["g"], **(attrs or {})),
             helper.make_node("Mul", list(order), ["y"])]
    outputs = [("y", F32, None)] + ([("g", F32, None)] if extra_reader else [])
    return from_bytes(model_bytes(nodes, [("x", F32, (2, 3, 4, 4))], outputs))


@pytest.mark.parametrize("gate, attrs, order, fused", [
    ("Sigmoid", {}, ("x", "g"), "silu"),
    ("Sigmoid", {}, ("g", "x"), "silu"),
    ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}, ("g", "x"), "hardswish"),
    ("HardSigmoid", {"alpha": 0.2, "beta": 0.5}, ("x", "g"), None),
    ("Tanh", {}, ("x", "g"), None),
])
def test_a_tensor_times_its_own_gate_fuses_into_one_function(gate, attrs, order, fused):
    graph = _gated(gate, attrs, order)
    x = _random(np.random.default_rng(9), (2, 3, 4, 4), 4)
    expected = execute(graph, {"x": x})["y"]
    passed = run_passes(graph, PIPELINE)
    ops = [node.op for node in passed.nodes]
    assert ops == ([fused] if fused else [gate.lower(), "mul"])
    # The fused float kernel is the unfused arithmetic, bit for bit.
    np.testing.assert_array_equal(execute(passed, {"x": x})["y"], expected)


def test_a_gate_read_elsewhere_stays_beside_the_fused_function():
    passed = run_passes(_gated("Sigmoid", extra_reader=True), PIPELINE)
    assert sorted(node.op for node in passed.nodes) == ["sigmoid", "silu"]


# -- shape rules ------------------------------------------------------------------------------


@pytest.mark.parametrize("op, attrs, shapes, dtypes, message", [
    ("qmul", {"shift": 3}, [(2, 3, 4), (2, 2, 1)], [np.int8] * 2,
     r"int8 \(2, 3, 4\) and int8 \(2, 2, 1\) do not broadcast together$"),
    ("qsub", {"relu": False, "scale_a": 1.0, "scale_b": 1.0}, [(2, 3), (2, 3)],
     [np.int8, np.float32], r"its input float32 \(2, 3\) is not int8$"),
    ("qprelu", {"scale": 1.0, "out_scale": 1.0}, [(2, 3, 4), (3, 1)], [np.int8, np.float32],
     r"its slope float32 \(3, 1\) does not broadcast onto its input int8 \(2, 3, 4\)"),
])
def test_shape_rules_refuse_what_the_kernels_cannot_take(op, attrs, shapes, dtypes, message):
    node = Node("n", op, [f"in{i}" for i in range(len(shapes))], ["out"], attrs)
    _, rule, _ = HOST_SHAPES[op]
    with pytest.raises(GraphError, match=rf"^node 'n' \({op}\): {message}"):
        rule(node, *(Tensor(f"in{i}", shape, dtype)
                     for i, (shape, dtype) in enumerate(zip(shapes, dtypes))))


# -- a network of them: squeeze-excite, SiLU, PRelu, broadcast Add and Sub ------------------


def _se_model() -> bytes:
    """conv -> SiLU (x * Sigmoid(x)) -> squeeze-excite (GlobalAveragePool, 1x1 convs,
    HardSigmoid, Mul by [N, C, 1, 1]) -> PRelu per channel -> conv + the first batch row's
    excitation ([1, C, 1, 1], a computed tensor), minus the excitation -> Gemm."""
    rng = np.random.default_rng(21)
    f32 = np.float32
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c"], ["sig"]),
        helper.make_node("Mul", ["c", "sig"], ["act"]),
        helper.make_node("GlobalAveragePool", ["act"], ["pool"]),
        helper.make_node("Conv", ["pool", "w1", "b1"], ["fc1"]),
        helper.make_node("Relu", ["fc1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["fc2"]),
        helper.make_node("HardSigmoid", ["fc2"], ["gate"], alpha=1 / 6, beta=0.5),
        helper.make_node("Mul", ["act", "gate"], ["se"]),
        helper.make_node("PRelu", ["se", "slope"], ["p"]),
        helper.make_node("Conv", ["p", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("Slice", ["gate", "starts", "ends", "axes"], ["first"]),
        helper.make_node("Add", ["c3", "first"], ["plus"]),
        helper.make_node("Sub", ["plus", "gate"], ["minus"]),
        helper.make_node("Reshape", ["minus", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"], transB=1),
    ]
    inits = [initializer("w", (rng.standard_normal((8, 2, 3, 3)) * 0.4).astype(f32)),
             initializer("b", (rng.standard_normal(8) * 0.1).astype(f32)),
             initializer("w1", (rng.standard_normal((4, 8, 1, 1)) * 0.4).astype(f32)),
             initializer("b1", np.full(4, 0.1, f32)),
             initializer("w2", (rng.standard_normal((8, 4, 1, 1)) * 0.6).astype(f32)),
             initializer("b2", np.zeros(8, f32)),
             initializer("slope", rng.uniform(0, 0.5, (8, 1, 1)).astype(f32)),
             initializer("w3", (rng.standard_normal((8, 8, 3, 3)) * 0.2).astype(f32)),
             initializer("b3", np.zeros(8, f32)),
             initializer("starts", np.array([0], np.int64)),
             initializer("ends", np.array([1], np.int64)),
             initializer("axes", np.array([0], np.int64)),
             initializer("shape", np.array([-1, 8 * 6 * 6], np.int64)),
             initializer("fw", (rng.standard_normal((5, 8 * 6 * 6)) * 0.05).astype(f32)),
             initializer("fb", np.zeros(5, f32))]
    return model_bytes(nodes, [("x", F32, ("N", 2, 6, 6))], [("y", F32, None)], inits)


@pytest.fixture(scope="module")
def se_network():
    graph = from_bytes(_se_model(), batch=2)
    calibration = np.random.default_rng(22).standard_normal((16, 2, 6, 6)).astype(np.float32)
    return compile_network(graph, PRESETS["default"], {"x": calibration})


def _x(seed=23):
    return np.random.default_rng(seed).standard_normal((2, 2, 6, 6)).astype(np.float32)


def _check_run(network, options):
    result = network.run({"x": _x()}, keep=True, **options)
    reference = execute(network.graph, {"x": _x()}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    return result


def test_the_network_quantises_to_the_new_operators(se_network):
    graph = se_network.graph
    ops = {node.op: node for node in graph.nodes}
    assert {"silu", "qmul", "qprelu", "qadd_broadcast", "qsub", "hardsigmoid"} <= set(ops)
    assert "sigmoid" not in ops
    # The squeeze-excite product computes on blocked arrays; an operand that broadcasts over
    # the batch ([1, C, 1, 1] beside [2, C, 6, 6]) needs the logical ones.
    assert runs_blocked(graph, ops["qmul"]) and not runs_blocked(graph, ops["qadd_broadcast"])
    assert runs_blocked(graph, ops["qsub"])
    # The conv before the broadcast add keeps its own output: no epilogue adds [1, C, 1, 1].
    add = ops["qadd_broadcast"]
    assert graph.producer(add.inputs[0]).op == "qconv"
    assert len(graph.producer(add.inputs[0]).inputs) == 3


def test_the_network_saves_loads_and_runs_bit_exact(se_network):
    network = loads(dumps(se_network))
    result = _check_run(network, {"sim": "fsim"})
    expected = execute(from_bytes(_se_model(), batch=2), {"x": _x()})["y"]
    got = result.outputs["y"]
    assert float(np.ravel(got) @ np.ravel(expected)
                 / np.linalg.norm(got) / np.linalg.norm(expected)) > 0.99


def test_the_qdq_export_runs_on_onnxruntime_within_one_lsb(se_network):
    ort = pytest.importorskip("onnxruntime")
    integer = se_network.graph
    model = to_qdq(integer)
    computed = [n for n, t in integer.tensors.items() if t.dtype == np.int8 and not t.constant]
    for name in computed:
        model.graph.output.append(helper.make_tensor_value_info(
            name, TensorProto.INT8, list(integer.tensors[name].shape)))
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    theirs = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"x": _x()})))
    ours = execute(integer, {"x": _x()}, keep=True)
    checked = set()
    for node in integer.nodes:
        if node.outputs[0] not in computed or node.op in ("qconv", "qdense"):
            continue
        args = [theirs.get(name, ours[name]) for name in node.inputs]
        difference = np.abs(run_node(node, args)[0].astype(int)
                            - theirs[node.outputs[0]].astype(int))
        assert difference.max() <= 1, node.name
        checked.add(node.op)
    assert {"silu", "qmul", "qprelu", "qadd_broadcast", "qsub"} <= checked


def test_the_qdq_export_reads_back_into_the_same_integer_graph():
    """Mul, PRelu, Sub and a broadcast Add exported as QDQ and imported again: the same
    operators at the same scales compute the same integers."""
    rng = np.random.default_rng(24)
    nodes = [helper.make_node("Mul", ["a", "b"], ["m"]),
             helper.make_node("PRelu", ["m", "slope"], ["p"]),
             helper.make_node("Sub", ["p", "b"], ["s"]),
             helper.make_node("Slice", ["b", "starts", "ends", "axes"], ["first"]),
             helper.make_node("Add", ["s", "first"], ["y"])]
    inits = [initializer("slope", rng.uniform(0, 0.5, (3, 1, 1)).astype(np.float32)),
             initializer("starts", np.array([0], np.int64)),
             initializer("ends", np.array([1], np.int64)),
             initializer("axes", np.array([0], np.int64))]
    data = model_bytes(nodes, [("a", F32, (2, 3, 4, 4)), ("b", F32, (2, 3, 1, 1))],
                       [("y", F32, None)], inits)
    samples = {"a": _random(rng, (8, 3, 4, 4), 2), "b": _random(rng, (8, 3, 1, 1))}
    integer = quantize_graph(from_bytes(data), samples)
    again = quantize_graph(from_bytes(to_qdq(integer).SerializeToString()))
    ops = [n.op for n in integer.nodes]
    assert {"qmul", "qprelu", "qsub", "qadd_broadcast"} <= set(ops)
    assert [n.op for n in again.nodes] == ops
    feeds = {"a": samples["a"][:2], "b": samples["b"][:2]}
    np.testing.assert_array_equal(execute(again, feeds)["y"], execute(integer, feeds)["y"])


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.uint32, np.uint64])
def test_integer_element_types_compute_as_onnx_does(op, dtype):
    """int16 and the unsigned types ONNX's arithmetic takes import (they were refused) and
    compute as onnx's reference, wrapping and truncating division included."""
    rng = np.random.default_rng(25)
    info = np.iinfo(dtype)
    a = rng.integers(max(info.min, -1000), min(info.max, 60000), (2, 3, 4)).astype(dtype)
    b = rng.integers(1, 300, (3, 1)).astype(dtype)
    kind = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    data = model_bytes([helper.make_node(op, ["a", "b"], ["y"])],
                       [("a", kind, a.shape), ("b", kind, b.shape)], [("y", kind, None)])
    (expected,) = ReferenceEvaluator(onnx.load_from_string(data)).run(None, {"a": a, "b": b})
    got = execute(from_bytes(data), {"a": a, "b": b})["y"]
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
