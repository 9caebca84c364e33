"""A transformer's operators (`graph.ops.matmul`, `graph.ops.transformer`, softmax inside a
network, `graph.passes.layernorm`, `graph.passes.gelu`): float semantics against onnx's
reference, int8 semantics against their definitions and against onnxruntime on vdla's QDQ
export, and the one-line refusals."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.export import to_qdq
from vdla.graph.ir import Node
from vdla.graph.kernels import KERNELS, execute
from vdla.graph.passes import PIPELINE, run_passes
from vdla.graph.quantize import best_exponent, quantize


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(name, dtype, list(shape))
                     for name, dtype, shape in inputs],
        [helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None) for name in outputs],
        [numpy_helper.from_array(np.asarray(value), name) for name, value in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _check(model, feeds, rtol=1e-5, atol=1e-6):
    """vdla's float graph computes what onnx's reference does; returns the graph."""
    expected = ReferenceEvaluator(model).run(None, feeds)
    graph = from_bytes(model.SerializeToString())
    got = execute(graph, feeds)
    for output, want in zip(model.graph.output, expected):
        have = got[output.name]
        assert have.shape == want.shape and have.dtype == want.dtype, output.name
        np.testing.assert_allclose(have, want, rtol=rtol, atol=atol, err_msg=output.name)
    return graph


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


_F = TensorProto.FLOAT


@pytest.mark.parametrize("a, b, constant", [
    ((2, 3, 5, 4), (2, 3, 4, 6), False),   # attention's Q K^T, per head
    ((1, 3, 5, 4), (2, 1, 4, 6), False),   # broadcast leading axes
    ((3, 5, 4), (4, 6), True),             # a projection: dense over the flattened axes
    ((2, 3, 5, 4), (4, 6), True),
    ((3, 5, 4), (3, 4, 6), True),          # a batched constant
    ((5, 4), (4, 6), False),               # two 2-D activations
])
def test_matmul_matches_onnx(a, b, constant):
    rng = np.random.default_rng(0)
    x, w = _f32(rng, *a), _f32(rng, *b)
    inputs = [("a", _F, a)] + ([] if constant else [("b", _F, b)])
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], inputs, ["y"],
                   [("b", w)] if constant else [])
    graph = _check(model, {"a": x} if constant else {"a": x, "b": w}, rtol=1e-5, atol=1e-5)
    ops = [node.op for node in graph.nodes]
    assert ops == (["reshape", "dense", "reshape"] if constant and len(b) == 2 and len(a) > 2
                   else ["matmul"])


def test_qmatmul_is_exact_integer_arithmetic_rounded_as_a_layer():
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (2, 3, 7, 40), dtype=np.int8)
    b = rng.integers(-128, 128, (2, 3, 40, 5), dtype=np.int8)
    exact = np.einsum("nhik,nhkj->nhij", a.astype(object), b.astype(object))
    for attrs, rounded in (
            ({"shift": 9}, lambda v: (v + 256) // 512),                       # half up
            ({"shift": 9, "round_even": True},
             lambda v: (v // 512) + ((v % 512 > 256) | ((v % 512 == 256) & (v // 512 % 2 == 1))))):
        (got,) = KERNELS["qmatmul"](Node("m", "qmatmul", ["a", "b"], ["y"], attrs), a, b)
        want = np.clip(np.vectorize(rounded, otypes=[object])(exact).astype(np.int64), -128, 127)
        np.testing.assert_array_equal(got, want)
    (got,) = KERNELS["qmatmul"](Node("m", "qmatmul", ["a", "b"], ["y"], {"scale": 0.003}), a, b)
    want = np.clip(np.rint(exact.astype(np.float64) * np.float32(0.003)), -128, 127)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_layer_normalization_matches_onnx(axis):
    rng = np.random.default_rng(2)
    shape = (2, 3, 8)
    normalised = shape[axis % 3:]
    model = _model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=axis,
                                     epsilon=1e-3)], [("x", _F, shape)], ["y"],
                   [("g", _f32(rng, *normalised)), ("b", _f32(rng, *normalised))])
    _check(model, {"x": _f32(rng, *shape) * 3}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, attrs, opset, scale", [
    ("Gelu", {}, 20, 3), ("Gelu", {"approximate": "tanh"}, 20, 3), ("Erf", {}, 17, 2),
    ("Sqrt", {}, 17, 1), ("Reciprocal", {}, 17, 1), ("Softmax", {"axis": 1}, 17, 2),
])
def test_functions_match_onnx(op, attrs, opset, scale):
    rng = np.random.default_rng(3)
    x = _f32(rng, 2, 3, 4, 5) * scale
    if op == "Sqrt":
        x = np.abs(x)
    model = _model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", _F, x.shape)], ["y"],
                   opset=opset)
    _check(model, {"x": x})


@pytest.mark.parametrize("exponent", [2.0, 0.5, 3.0])
def test_pow_by_a_constant_matches_onnx(exponent):
    rng = np.random.default_rng(4)
    x = np.abs(_f32(rng, 3, 7)) + 0.1
    model = _model([helper.make_node("Pow", ["x", "e"], ["y"])], [("x", _F, x.shape)], ["y"],
                   [("e", np.array(exponent, np.float32))])
    _check(model, {"x": x})


@pytest.mark.parametrize("indices, axis", [
    (np.array(0, np.int64), 1),            # the class token: a slice, its axis dropped
    (np.array(-1, np.int64), 0),
    (np.array([1, 3, 5], np.int64), 2),    # evenly spaced: a slice
    (np.array([4, 2, 0], np.int64), 2),
])
def test_gather_of_a_computed_tensor_at_constant_indices_matches_onnx(indices, axis):
    rng = np.random.default_rng(5)
    model = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)],
                   [("x", _F, (3, 4, 6))], ["y"], [("i", indices)])
    graph = _check(model, {"x": _f32(rng, 3, 4, 6)})
    assert {node.op for node in graph.nodes} <= {"slice", "reshape"}


def test_an_embedding_gather_and_its_int8_table():
    rng = np.random.default_rng(6)
    table = _f32(rng, 10, 4)
    model = _model([helper.make_node("Gather", ["t", "ids"], ["y"])],
                   [("ids", TensorProto.INT64, (2, 3))], ["y"], [("t", table)])
    ids = np.array([[0, 9, -1], [3, 3, 2]], np.int64)
    graph = _check(model, {"ids": ids})
    (node,) = graph.nodes
    assert node.op == "take"

    class _Q:   # the quantiser's calls a take makes
        def __init__(self):
            self.graph, self.tensors, self.emitted = graph, {}, None

        real_scale = staticmethod(lambda scale: 2.0 ** -scale[0])
        best_exponent = staticmethod(best_exponent)

        def constant(self, name, value, scale):
            self.tensors[name] = (value, scale)
            return name

        def emit(self, node, op, inputs, scale, **attrs):
            self.emitted = (op, inputs, scale)

    q = _Q()
    from vdla.graph.ops import OPS
    OPS["take"].quantize(q, node)
    op, (table_q, _), scale = q.emitted
    values, _ = q.tensors[table_q]
    assert op == "take" and scale == (5, None)   # 2**-5: |table| < 3.97
    np.testing.assert_array_equal(values, np.clip(np.rint(table * 32), -128, 127))
    (got,) = KERNELS["take"](Node("t", "take", ["t", "i"], ["y"], {"axis": 0}), values, ids)
    np.testing.assert_array_equal(got, values[ids % 10])


def test_expand_and_where_with_a_constant_mask_match_onnx():
    rng = np.random.default_rng(7)
    mask = rng.random((1, 4, 1)) < 0.5
    model = _model([helper.make_node("Expand", ["x", "s"], ["e"]),
                    helper.make_node("Where", ["m", "f", "e"], ["y"])],
                   [("x", _F, (3, 1, 5))], ["y"],
                   [("s", np.array([2, 3, 4, 5], np.int64)), ("m", mask),
                    ("f", np.array(-10.0, np.float32))])
    graph = _check(model, {"x": _f32(rng, 3, 1, 5)})
    assert [node.op for node in graph.nodes] == ["expand", "where"]


def _decomposed_layernorm(order_mul: bool = False):
    """The ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add export of a layer norm."""
    rng = np.random.default_rng(8)
    square = (helper.make_node("Mul", ["d", "d"], ["p"]) if order_mul
              else helper.make_node("Pow", ["d", "two"], ["p"]))
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
             helper.make_node("Sub", ["x", "m"], ["d"]), square,
             helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
             helper.make_node("Add", ["v", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n"]),
             helper.make_node("Mul", ["n", "g"], ["ng"]),
             helper.make_node("Add", ["ng", "b"], ["y"])]
    inits = [("two", np.array(2.0, np.float32)), ("eps", np.array(1e-5, np.float32)),
             ("g", _f32(rng, 8)), ("b", _f32(rng, 8))]
    return _model(nodes, [("x", _F, (2, 5, 8))], ["y"], inits, opset=14)


@pytest.mark.parametrize("order_mul", [False, True])
def test_the_layer_norm_decomposition_fuses_into_one_node(order_mul):
    model = _decomposed_layernorm(order_mul)
    x = np.random.default_rng(9).standard_normal((2, 5, 8)).astype(np.float32) * 4
    graph = run_passes(_check(model, {"x": x}, rtol=1e-5, atol=1e-5), PIPELINE)
    assert [node.op for node in graph.nodes] == ["layernorm"]
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(execute(graph, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


def test_a_decomposition_whose_variance_is_read_elsewhere_is_left_as_it_is():
    model = _decomposed_layernorm()
    model.graph.output.append(helper.make_tensor_value_info("v", _F, None))
    graph = run_passes(from_bytes(model.SerializeToString()), PIPELINE)
    assert "layernorm" not in {node.op for node in graph.nodes}


def _erf_gelu(form: str):
    c = {"sqrt2": np.array(np.sqrt(2), np.float32), "one": np.array(1, np.float32),
         "half": np.array(0.5, np.float32), "k": np.array(0.044715, np.float32),
         "c": np.array(np.sqrt(2 / np.pi), np.float32), "two": np.array(2.0, np.float32)}
    if form == "erf":         # PyTorch: x * 0.5 * (1 + erf(x / sqrt 2))
        nodes = [helper.make_node("Div", ["x", "sqrt2"], ["a"]),
                 helper.make_node("Erf", ["a"], ["e"]),
                 helper.make_node("Add", ["e", "one"], ["p"]),
                 helper.make_node("Mul", ["x", "p"], ["xp"]),
                 helper.make_node("Mul", ["xp", "half"], ["y"])]
    elif form == "erf_half_first":   # 0.5 * x first
        nodes = [helper.make_node("Mul", ["half", "x"], ["hx"]),
                 helper.make_node("Div", ["x", "sqrt2"], ["a"]),
                 helper.make_node("Erf", ["a"], ["e"]),
                 helper.make_node("Add", ["one", "e"], ["p"]),
                 helper.make_node("Mul", ["hx", "p"], ["y"])]
    elif form == "tanh":
        nodes = [helper.make_node("Pow", ["x", "three"], ["x3"]),
                 helper.make_node("Mul", ["x3", "k"], ["kx3"]),
                 helper.make_node("Add", ["x", "kx3"], ["in"]),
                 helper.make_node("Mul", ["in", "c"], ["sc"]),
                 helper.make_node("Tanh", ["sc"], ["t"]),
                 helper.make_node("Add", ["t", "one"], ["p"]),
                 helper.make_node("Mul", ["half", "x"], ["hx"]),
                 helper.make_node("Mul", ["hx", "p"], ["y"])]
        c["three"] = np.array(3.0, np.float32)
    else:                     # not a GELU: erf(x / 2)
        nodes = [helper.make_node("Div", ["x", "two"], ["a"]),
                 helper.make_node("Erf", ["a"], ["e"]),
                 helper.make_node("Add", ["e", "one"], ["p"]),
                 helper.make_node("Mul", ["x", "p"], ["xp"]),
                 helper.make_node("Mul", ["xp", "half"], ["y"])]
    used = {name for node in nodes for name in node.input}
    return _model(nodes, [("x", _F, (4, 6))], ["y"],
                  [(name, value) for name, value in c.items() if name in used], opset=14)


@pytest.mark.parametrize("form, fused", [("erf", {}), ("erf_half_first", {}),
                                         ("tanh", {"tanh": True}), ("not_gelu", None)])
def test_gelu_forms_fuse_into_one_table_and_others_do_not(form, fused):
    model = _erf_gelu(form)
    x = np.random.default_rng(10).standard_normal((4, 6)).astype(np.float32) * 3
    graph = run_passes(_check(model, {"x": x}), PIPELINE)
    if fused is None:
        assert "gelu" not in {node.op for node in graph.nodes}
        return
    (node,) = graph.nodes
    assert node.op == "gelu" and node.attrs == fused and node.inputs == ["x"]
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(execute(graph, {"x": x})["y"], want, rtol=1e-5, atol=1e-6)


def _block():
    """Attention and an MLP in miniature: every int8 operator of a transformer."""
    rng = np.random.default_rng(11)
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1),
             helper.make_node("MatMul", ["n", "wq"], ["q"]),
             helper.make_node("Transpose", ["n"], ["nt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "nt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "n"], ["c"]),
             helper.make_node("Gelu", ["c"], ["y"])]
    inits = [("g", (1 + 0.1 * rng.standard_normal(8)).astype(np.float32)),
             ("b", 0.1 * _f32(rng, 8)), ("wq", _f32(rng, 8, 8) / 3)]
    return _model(nodes, [("x", _F, (2, 6, 8))], ["y"], inits, opset=20)


def test_int8_block_is_what_onnxruntime_computes_on_its_qdq_export():
    """Each int8 operator computes as onnxruntime does between DequantizeLinear and
    QuantizeLinear (the matmuls' float32 sums may round differently by 1 step)."""
    model = _block()
    rng = np.random.default_rng(12)
    graph = run_passes(from_bytes(model.SerializeToString()), PIPELINE)
    integer = quantize(graph, {"x": rng.standard_normal((8, 6, 8)).astype(np.float32)})
    ops = {node.op for node in integer.nodes}
    assert {"qlayernorm", "qmatmul", "qsoftmax", "gelu", "qdense"} <= ops
    x = rng.standard_normal((2, 6, 8)).astype(np.float32)
    got = execute(integer, {"x": x}, keep=True)
    qdq = to_qdq(integer)
    for node in integer.nodes[:-1]:   # every int8 tensor an output of the QDQ model
        qdq.graph.output.append(helper.make_tensor_value_info(
            node.outputs[0], helper.np_dtype_to_tensor_dtype(
                np.dtype(integer.tensors[node.outputs[0]].dtype)), None))
    session = onnxruntime.InferenceSession(qdq.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    expected = dict(zip(names, session.run(None, {"x": x})))
    expected["x"] = x
    for node in integer.nodes[:-1]:   # each on onnxruntime's own inputs
        arrays = [expected[name] if integer.value(name) is None else integer.value(name)
                  for name in node.inputs]
        (have,) = KERNELS[node.op](node, *arrays)
        difference = np.abs(have.astype(np.float64) - expected[node.outputs[0]])
        assert difference.max() <= (1 if node.op in ("qmatmul", "qdense") else 0), \
            node.describe()
    (float_y,) = ReferenceEvaluator(model).run(None, {"x": x})
    y = got["y"].ravel().astype(np.float64)
    assert y @ float_y.ravel() / np.linalg.norm(y) / np.linalg.norm(float_y) > 0.99


@pytest.mark.parametrize("node, inputs, inits, message", [
    (helper.make_node("MatMul", ["a", "b"], ["y"]), [("a", _F, (4,))],
     [("b", np.ones((4, 6), np.float32))],
     r"its operands of shapes \(4,\) and \(4, 6\): a MatMul of a 1-D operand is not "
     r"supported \(rank 2 or more\)$"),
    (helper.make_node("Pow", ["a", "e"], ["y"]), [("a", _F, (2, 3))],
     [("e", np.ones(3, np.float32))],
     r"its exponent 'e' holds 3 values \(only one number is supported\)$"),
    (helper.make_node("Where", ["m", "a", "f"], ["y"]),
     [("m", TensorProto.BOOL, (2, 3)), ("a", _F, (2, 3))], [("f", np.zeros(1, np.float32))],
     r"its condition 'm' must be a constant bool tensor \(a mask\)$"),
    (helper.make_node("Gather", ["a", "i"], ["y"]), [("a", _F, (2, 3)), ("i", 7, (2,))], [],
     r"a Gather of a computed tensor at computed indices is not supported$"),
    (helper.make_node("Equal", ["a", "c"], ["y"]), [("a", _F, (2, 3))],
     [("c", np.ones((2, 3), np.float32))],
     r"of a computed tensor: not supported \(only of constants"),
    (helper.make_node("LayerNormalization", ["a", "g"], ["y", "mean"]), [("a", _F, (2, 3))],
     [("g", np.ones(3, np.float32))],
     r"its Mean and InvStdDev outputs are not supported \(training\)$"),
])
def test_what_cannot_be_imported_is_refused_in_one_line(node, inputs, inits, message):
    model = _model([node], inputs, list(node.output), inits, opset=18)
    op = node.op_type
    with pytest.raises(GraphError, match=rf"^node '{node.output[0]}' \({op}\): {message}"):
        from_bytes(model.SerializeToString())


def test_a_softmax_output_stays_float_and_one_inside_is_int8():
    model = _model([helper.make_node("Softmax", ["x"], ["p"], axis=1),
                    helper.make_node("Softmax", ["p"], ["y"], axis=-1)],
                   [("x", _F, (2, 4, 3))], ["y"])
    samples = np.random.default_rng(13).standard_normal((4, 4, 3)).astype(np.float32)
    integer = quantize(run_passes(from_bytes(model.SerializeToString()), PIPELINE),
                       {"x": samples})
    kinds = [(node.op, integer.tensors[node.outputs[0]].dtype) for node in integer.nodes]
    assert ("qsoftmax", np.int8) in kinds and ("softmax", np.float32) in kinds
    onnx.checker.check_model(to_qdq(integer))


@pytest.mark.parametrize("per_feature", [True, False])
def test_a_projections_bias_add_folds_into_its_dense_layer(per_feature):
    rng = np.random.default_rng(14)
    bias = _f32(rng, 6) if per_feature else _f32(rng, 5, 6)   # else one per token too
    model = _model([helper.make_node("MatMul", ["x", "w"], ["p"]),
                    helper.make_node("Add", ["b", "p"], ["y"])], [("x", _F, (2, 5, 4))], ["y"],
                   [("w", _f32(rng, 4, 6)), ("b", bias)])
    x = _f32(rng, 2, 5, 4)
    graph = run_passes(_check(model, {"x": x}, rtol=1e-5, atol=1e-5), PIPELINE)
    ops = [node.op for node in graph.nodes]
    if not per_feature:
        assert ops == ["reshape", "dense", "reshape", "add"]
        return
    assert ops == ["reshape", "dense", "reshape"]
    np.testing.assert_array_equal(graph.value(graph.nodes[1].inputs[2]), bias)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(execute(graph, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)
