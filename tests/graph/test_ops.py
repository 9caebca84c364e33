"""The operator registry (`graph.ops`): its views, and the data-movement, shape and
elementwise operators against onnx's own reference (`onnx.reference.ReferenceEvaluator`),
float and int8, through a network file and on every tier."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.graph.models import initializer, model_bytes
from vdla.frontend.onnx import CONVERTERS, from_bytes
from vdla.graph import ops
from vdla.graph.errors import GraphError
from vdla.graph.export import to_qdq
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.kernels import KERNELS, execute
from vdla.graph.network import compile_network, quantize_graph
from vdla.graph.network_file import HOST_SHAPES, NODE_ATTRS, dumps, loads
from vdla.graph.placement import LAYER_OPS
from vdla.graph.quantize import quantize
from vdla.hw.config import PRESETS


def test_the_tables_are_views_of_the_registry():
    assert set(CONVERTERS) == set(ops.ONNX)
    assert set(KERNELS) == {name for name, op in ops.OPS.items() if op.kernel is not None}
    assert set(LAYER_OPS) == {"qconv", "qdense"}
    assert set(NODE_ATTRS) == set(HOST_SHAPES) | set(LAYER_OPS)
    for name, op in ops.OPS.items():
        # What a network file holds runs (a kernel), is checked (a shape rule) and exports.
        if op.attrs is not None:
            assert op.kernel is not None and op.export is not None, name
            assert op.place in ("host", "layer") and (op.shape is not None) == (
                op.place == "host"), name
        # A float operator is quantised away; an import-time one never becomes a node.
        assert op.place != "float" or op.quantize is not None or name in (
            "batchnorm", "quantize", "dequantize"), name
        assert op.place != "import" or op.kernel is None and op.attrs is None, name
        assert op.why, name


def _fed_first(node, arrays, opset=17):
    """A model of ``node`` with its first input fed and the others initialisers."""
    names = list(node.input)
    inputs = [(names[0], helper.np_dtype_to_tensor_dtype(arrays[0].dtype), arrays[0].shape)]
    inits = [initializer(name, array) for name, array in zip(names[1:], arrays[1:]) if name]
    return model_bytes([node], inputs, [(out, TensorProto.UNDEFINED, None)
                                        for out in node.output], inits, opset)


def _both(node, arrays, opset=17):
    """(onnx's reference outputs, vdla's float graph and outputs) of one node."""
    data = _fed_first(node, arrays, opset)
    expected = ReferenceEvaluator(onnx.load_from_string(data)).run(
        None, {node.input[0]: arrays[0]})
    graph = from_bytes(data)
    got = execute(graph, {node.input[0]: arrays[0]})
    return expected, graph, [got[name] for name in node.output]


def _assert_same(node, arrays, opset=17, exact=True):
    expected, graph, got = _both(node, arrays, opset)
    for want, have in zip(expected, got):
        assert have.shape == want.shape and have.dtype == want.dtype, (node, have.shape)
        if exact:
            np.testing.assert_array_equal(have, want)
        else:
            np.testing.assert_allclose(have, want, rtol=1e-6, atol=1e-6)
    return graph


def _random(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_concat_matches_onnx_on_random_cases():
    rng = np.random.default_rng(0)
    for _ in range(30):
        rank = int(rng.integers(1, 5))
        shape = [int(n) for n in rng.integers(1, 5, rank)]
        axis = int(rng.integers(-rank, rank))
        arrays = []
        for _ in range(int(rng.integers(1, 4))):
            shape[axis] = int(rng.integers(1, 4))
            arrays.append(_random(rng, shape))
        names = [f"x{i}" for i in range(len(arrays))]
        node = helper.make_node("Concat", names, ["y"], axis=axis)
        graph = _assert_same(node, arrays)
        assert [n.op for n in graph.nodes] == ["concat"]


def test_slice_matches_onnx_on_random_cases_negative_steps_and_clamps_included():
    rng = np.random.default_rng(1)
    for _ in range(60):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(n) for n in rng.integers(1, 7, rank))
        axes = [int(a) for a in rng.permutation(rank)[:int(rng.integers(1, rank + 1))]]
        steps = [int(rng.choice([-3, -2, -1, 1, 2, 3])) for _ in axes]
        starts, ends = [], []
        for axis, step in zip(axes, steps):
            size = shape[axis]
            # Non-empty: pick the first and last index kept, then ends past them (clamped).
            first = int(rng.integers(0, size))
            if step > 0:
                starts.append(int(rng.choice([first, first - size])))
                ends.append(int(rng.choice([first + 1, size, 1 << 62])))
            else:
                starts.append(int(rng.choice([first, first - size, 1 << 62])))
                ends.append(int(rng.choice([-size - 1, -(1 << 62)])) if first == 0 or
                            rng.random() < 0.5 else int(rng.integers(-1, first)))
        x = _random(rng, shape)
        node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
        consts = [np.array(v, np.int64) for v in (starts, ends, axes, steps)]
        expected = ReferenceEvaluator(onnx.load_from_string(_fed_first(node, [x, *consts]))).run(
            None, {"x": x})[0]
        if expected.size == 0:
            continue   # vdla's tensors are never empty (refused at import)
        _assert_same(node, [x, *consts])


def test_split_becomes_one_slice_per_output():
    x = np.arange(2 * 7 * 3, dtype=np.float32).reshape(2, 7, 3)
    node = helper.make_node("Split", ["x", "split"], ["a", "b", "c"], axis=1)
    graph = _assert_same(node, [x, np.array([2, 4, 1], np.int64)])
    assert [(n.name, n.op) for n in graph.nodes] == [
        ("a/0", "slice"), ("a/1", "slice"), ("a/2", "slice")]
    # opset 18: num_outputs, the last part the smaller
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)
    _assert_same(node, [x], opset=18)


def test_transpose_squeeze_and_unsqueeze_match_onnx():
    rng = np.random.default_rng(2)
    x = _random(rng, (2, 1, 3, 1, 4))
    for perm in ([4, 0, 2, 1, 3], None):
        node = helper.make_node("Transpose", ["x"], ["y"], **({"perm": perm} if perm else {}))
        assert [n.op for n in _assert_same(node, [x]).nodes] == ["transpose"]
    for axes in ([1], [-2, 1], None):
        node = helper.make_node("Squeeze", ["x", "axes"] if axes else ["x"], ["y"])
        arrays = [x, np.array(axes, np.int64)] if axes else [x]
        assert [n.op for n in _assert_same(node, arrays).nodes] == ["reshape"]
    node = helper.make_node("Unsqueeze", ["x", "axes"], ["y"])
    _assert_same(node, [x, np.array([0, -1, 3], np.int64)])
    node = helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0, 6])   # opset 11: attribute
    _assert_same(node, [x], opset=11)


@pytest.mark.parametrize("op, attrs", [
    ("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}),
    ("Sigmoid", {}), ("Tanh", {}), ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.1})])
def test_elementwise_functions_match_onnx(op, attrs):
    x = (np.random.default_rng(3).standard_normal((2, 3, 4, 5)) * 6).astype(np.float32)
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    _assert_same(node, [x], exact=False)


@pytest.mark.parametrize("op, constant_first", [
    ("Mul", False), ("Mul", True), ("Sub", False), ("Sub", True), ("Div", False)])
def test_arithmetic_with_a_constant_matches_onnx(op, constant_first):
    rng = np.random.default_rng(4)
    x, c = _random(rng, (2, 3, 4)), (rng.uniform(0.5, 2, (3, 1)) * rng.choice([-1, 1], (3, 1))
                                     ).astype(np.float32)
    if constant_first:
        node = helper.make_node(op, ["c", "x"], ["y"])
        data = model_bytes([node], [("x", TensorProto.FLOAT, x.shape)],
                           [("y", TensorProto.FLOAT, None)], [initializer("c", c)])
        expected = ReferenceEvaluator(onnx.load_from_string(data)).run(None, {"x": x})[0]
        np.testing.assert_allclose(execute(from_bytes(data), {"x": x})["y"], expected)
    else:
        _assert_same(helper.make_node(op, ["x", "c"], ["y"]), [x, c])


@pytest.mark.parametrize("node, arrays, message", [
    (helper.make_node("Div", ["c", "x"], ["y"]), None,
     r"a Div of a constant by a computed tensor is not supported"),
    (helper.make_node("Div", ["x", "c"], ["y"]),
     [np.ones((2, 3), np.float32), np.array([1, 0, 2], np.float32)],
     r"its divisor 'c' holds zeros$"),
    (helper.make_node("Gather", ["x", "i"], ["y"]),
     [np.ones((3, 3), np.float32), np.array([0, 2, 1], np.int64)],
     r"a Gather of a computed tensor at indices \[0, 2, 1\] \(shape \(3,\)\) is not "
     r"supported \(only a scalar or evenly spaced 1-D indices: a slice\)$"),
    (helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32),
     [np.ones((2, 3), np.float32)],
     r"a Cast of a computed tensor to int32 is not supported"),
])
def test_what_cannot_be_imported_is_refused_in_one_line(node, arrays, message):
    if arrays is None:   # the constant first
        data = model_bytes([node], [("x", TensorProto.FLOAT, (2, 3))],
                           [("y", TensorProto.FLOAT, None)],
                           [initializer("c", np.ones(3, np.float32))])
    else:
        data = _fed_first(node, arrays)
    with pytest.raises(GraphError, match=rf"^node 'y' \({node.op_type}\): {message}"):
        from_bytes(data)


def test_torch_view_chain_folds_into_a_constant_reshape():
    """``x.view(x.size(0), -1)``: Shape -> Gather -> Unsqueeze -> Concat -> Reshape, with a
    Cast on the way: one reshape node, the shape arithmetic folded at import."""
    i64 = np.int64
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
             helper.make_node("Cast", ["n"], ["n64"], to=TensorProto.INT64),
             helper.make_node("Unsqueeze", ["n64", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "rest"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    data = model_bytes(nodes, [("x", TensorProto.FLOAT, ("N", 2, 3))],
                       [("y", TensorProto.FLOAT, None)],
                       [initializer("zero", np.array(0, i64)),
                        initializer("axes", np.array([0], i64)),
                        initializer("rest", np.array([-1], i64))])
    graph = from_bytes(data, batch=4)
    assert [(n.op, n.attrs) for n in graph.nodes] == [("reshape", {"shape": (4, 6)})]


# -- int8 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("op, attrs", [
    ("HardSigmoid", {"alpha": 0.2, "beta": 0.5}), ("HardSwish", {}), ("Sigmoid", {}),
    ("Tanh", {}), ("LeakyRelu", {"alpha": 0.1})])
def test_a_table_is_what_dequantize_function_quantize_computes(op, attrs):
    """Each entry equals onnx's reference of DequantizeLinear -> op -> QuantizeLinear at the
    same scales, for all 256 int8 inputs."""
    x = np.linspace(-5, 5, 64, dtype=np.float32).reshape(1, 64)
    data = _fed_first(helper.make_node(op, ["x"], ["y"], **attrs), [x])
    integer = quantize_graph(from_bytes(data), {"x": x})
    (table_node,) = [n for n in integer.nodes if "table" in n.attrs]
    s_x = integer.tensors[table_node.inputs[0]].real_scale
    s_y = integer.tensors[table_node.outputs[0]].real_scale
    qdq = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["q", "sx"], ["f"]),
         helper.make_node(op, ["f"], ["g"], **attrs),
         helper.make_node("QuantizeLinear", ["g", "sy", "zero"], ["y"])], "qdq",
        [helper.make_tensor_value_info("q", TensorProto.INT8, [256])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [256])],
        [numpy_helper.from_array(np.array(s, np.float32), name) for s, name in
         ((s_x, "sx"), (s_y, "sy"))] + [numpy_helper.from_array(np.array(0, np.int8), "zero")])
    model = helper.make_model(qdq, opset_imports=[helper.make_opsetid("", 19)])
    every = np.arange(-128, 128, dtype=np.int8)
    (expected,) = ReferenceEvaluator(model).run(None, {"q": every})
    np.testing.assert_array_equal(np.array(table_node.attrs["table"], np.int8), expected)
    assert len(set(table_node.attrs["table"])) > 20   # the scales give the table a range


def test_a_concat_of_two_scales_requantises_onto_the_coarser():
    """int8 ``a`` at 2**-7 and ``b`` at 2**-4: ``a`` moves to 2**-4 (rint(q / 8), half to
    even), ``b`` passes as it is."""
    graph = Graph({"a": Tensor("a", (2, 3), np.float32), "b": Tensor("b", (2, 5), np.float32),
                   "y": Tensor("y", (2, 8), np.float32)},
                  [Node("cat", "concat", ["a", "b"], ["y"], {"axis": 1})], ["a", "b"], ["y"])
    integer = quantize(graph.check(), {"a": np.full((2, 3), 0.9, np.float32),
                                       "b": np.full((2, 5), 7.0, np.float32)})
    assert [n.op for n in integer.nodes] == ["quantize_input", "quantize_input", "requantize",
                                             "concat", "dequantize_output"]
    assert integer.tensors["a/q"].exponent == 7 and integer.tensors["b/q"].exponent == 4
    qa = np.array([[-128, -4, 4], [12, 20, 127]], np.int8)
    qb = np.arange(-5, 5, dtype=np.int8).reshape(2, 5)
    values = execute(integer, {"a": qa.astype(np.float32) / 128,
                               "b": qb.astype(np.float32) / 16}, keep=True)
    np.testing.assert_array_equal(values["y/q"] if "y/q" in values else values["cat"],
                                  np.concatenate([np.rint(qa / 8.0), qb], axis=1))


def test_shape_rules_refuse_inputs_the_kernels_cannot_take():
    def rule(op, attrs, *tensors):
        node = Node("n", op, [t.name for t in tensors], ["out"], attrs)
        return HOST_SHAPES[op][1](node, *tensors)

    x = Tensor("x", (2, 3, 4), np.int8)
    assert rule("concat", {"axis": -1}, x, Tensor("z", (2, 3, 1), np.int8)) == (2, 3, 5)
    with pytest.raises(GraphError, match=r"^node 'n' \(concat\): joins int8 \(2, 3, 4\) and "
                                         r"int8 \(2, 2, 4\) along axis 2: the other axes"):
        rule("concat", {"axis": 2}, x, Tensor("z", (2, 2, 4), np.int8))
    with pytest.raises(GraphError, match=r"slice 3:3:1 is not a non-empty slice of an axis of 3$"):
        rule("slice", {"starts": (0, 3, 0), "ends": (2, 3, 4), "steps": (1, 1, 1)}, x)
    assert rule("slice", {"starts": (1, 2, 3), "ends": (2, -1, -1), "steps": (1, -1, -2)},
                x) == (1, 3, 2)
    with pytest.raises(GraphError, match=r"perm \[0, 0, 1\] is not a permutation"):
        rule("transpose", {"perm": (0, 0, 1)}, x)
    with pytest.raises(GraphError, match=r"its input is float32 \(2,\); a table maps int8$"):
        rule("sigmoid", {"table": (0,) * 256}, Tensor("f", (2,), np.float32))


# -- a network of them, through a file, on every tier -----------------------------------------


def _movement_model() -> bytes:
    """Conv, then a channel concat with the input, a transpose and back, a slice, a table
    (sigmoid), a scaling by a constant, a shift, a reshape and a dense layer."""
    rng = np.random.default_rng(5)
    f32 = np.float32
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("LeakyRelu", ["c"], ["r"], alpha=0.1),
        helper.make_node("Concat", ["r", "x"], ["cat"], axis=1),
        helper.make_node("Transpose", ["cat"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["t"], ["u"], perm=[0, 3, 1, 2]),
        helper.make_node("Slice", ["u", "starts", "ends", "axes", "steps"], ["s"]),
        helper.make_node("Sigmoid", ["s"], ["g"]),
        helper.make_node("Mul", ["g", "half"], ["m"]),
        helper.make_node("Sub", ["m", "shift"], ["d"]),
        helper.make_node("Reshape", ["d", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"], transB=1),
    ]
    inits = [initializer("w", (rng.standard_normal((6, 2, 3, 3)) * 0.3).astype(f32)),
             initializer("b", np.zeros(6, f32)),
             initializer("starts", np.array([1, 7], np.int64)),
             initializer("ends", np.array([8, -100], np.int64)),
             initializer("axes", np.array([1, 3], np.int64)),
             initializer("steps", np.array([1, -2], np.int64)),
             initializer("half", np.array(0.5, f32)),
             initializer("shift", rng.uniform(0, 0.5, (1, 7, 1, 1)).astype(f32)),
             initializer("shape", np.array([-1, 7 * 8 * 4], np.int64)),
             initializer("fw", (rng.standard_normal((5, 7 * 8 * 4)) * 0.1).astype(f32)),
             initializer("fb", np.zeros(5, f32))]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, ("N", 2, 8, 8))],
                       [("y", TensorProto.FLOAT, None)], inits)


@pytest.fixture(scope="module")
def movement_network():
    graph = from_bytes(_movement_model(), batch=2)
    calibration = np.random.default_rng(6).standard_normal((16, 2, 8, 8)).astype(np.float32)
    return compile_network(graph, PRESETS["default"], {"x": calibration})


def _check_run(network, options):
    x = np.random.default_rng(7).standard_normal((2, 2, 8, 8)).astype(np.float32)
    result = network.run({"x": x}, keep=True, **options)
    reference = execute(network.graph, {"x": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    return result


@pytest.mark.parametrize("options", [{"sim": "fsim"}, {"target": "cpu"}])
def test_a_network_of_the_new_operators_saves_loads_and_runs_bit_exact(movement_network,
                                                                       options):
    network = loads(dumps(movement_network))
    ops_used = {node.op for node in network.graph.nodes}
    assert {"leakyrelu", "concat", "transpose", "slice", "sigmoid", "qaffine"} <= ops_used
    assert all(network.placement[node.name] == "host" for node in network.graph.nodes
               if node.op not in LAYER_OPS)
    result = _check_run(network, options)
    float_graph = from_bytes(_movement_model(), batch=2)
    x = np.random.default_rng(7).standard_normal((2, 2, 8, 8)).astype(np.float32)
    expected = execute(float_graph, {"x": x})["y"]
    got = result.outputs["y"]
    assert float(np.ravel(got) @ np.ravel(expected)
                 / np.linalg.norm(got) / np.linalg.norm(expected)) > 0.99


@pytest.mark.rtl
def test_the_new_operators_run_on_the_rtl(movement_network):
    _check_run(movement_network, {"sim": "rtl"})


def test_the_qdq_export_runs_on_onnxruntime_within_one_lsb(movement_network):
    ort = pytest.importorskip("onnxruntime")
    integer = movement_network.graph
    model = to_qdq(integer)
    computed = [n for n, t in integer.tensors.items() if t.dtype == np.int8 and not t.constant]
    for name in computed:
        model.graph.output.append(helper.make_tensor_value_info(
            name, TensorProto.INT8, list(integer.tensors[name].shape)))
    x = np.random.default_rng(8).standard_normal((2, 2, 8, 8)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    theirs = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"x": x})))
    from vdla.graph.kernels import run_node
    ours = execute(integer, {"x": x}, keep=True)
    for node in integer.nodes:
        if node.outputs[0] not in computed or node.op in LAYER_OPS:
            continue
        args = [theirs.get(name, ours[name]) for name in node.inputs]
        difference = np.abs(run_node(node, args)[0].astype(int)
                            - theirs[node.outputs[0]].astype(int))
        # Data movement is exact; the tables and the affine map compute as onnxruntime.
        assert difference.max() <= (0 if node.op in ("concat", "slice", "transpose",
                                                     "reshape") else 1), node.name


def test_a_concat_with_a_constant_quantises_it_at_the_common_scale():
    """A class token beside computed tokens: the constant weighs in with the scale holding its
    range and is quantised at the common one, as QuantizeLinear would (half to even)."""
    constant = np.array([[3.3], [-0.26]], np.float32)
    graph = Graph({"a": Tensor("a", (2, 3), np.float32),
                   "c": Tensor("c", (2, 1), np.float32, constant),
                   "y": Tensor("y", (2, 4), np.float32)},
                  [Node("cat", "concat", ["a", "c"], ["y"], {"axis": 1})], ["a"], ["y"])
    integer = quantize(graph.check(), {"a": np.full((4, 3), 0.5, np.float32)})
    (cat,) = [node for node in integer.nodes if node.op == "concat"]
    assert integer.tensors[cat.outputs[0]].real_scale == 2.0 ** -5   # 3.3 < 127 / 32
    np.testing.assert_array_equal(integer.value(cat.inputs[1]).ravel(), [106, -8])
