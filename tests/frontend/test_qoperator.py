"""onnxruntime's QOperator format (issue 37): rewritten into QDQ by `frontend.qoperator`.

A small float model using every operator onnxruntime's QOperator quantiser
writes (QLinearConv, QLinearAdd, QLinearLeakyRelu, QLinearMul, QLinearSigmoid,
QLinearAveragePool, QLinearConcat, QLinearGlobalAveragePool, QGemm, and
MaxPool and Flatten on the integer tensors) is quantised by onnxruntime twice
on the same samples, as QOperator and as QDQ. vdla's import of the QOperator
model is checked against onnxruntime's own run of it, node by node on
onnxruntime's inputs (within 1 LSB: a fixed-point layer's multiplier against
onnxruntime's float32), and against vdla's import of the QDQ model: the same
scales and the same integers.
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.graph.errors import GraphError

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

SHAPE = (1, 3, 8, 8)


def _float_model() -> bytes:
    from onnx import TensorProto, helper

    from tests.graph.models import initializer, model_bytes
    rng = np.random.default_rng(0)

    def weight(*shape, gain=0.4):
        return (rng.standard_normal(shape) * gain).astype(np.float32)

    inits = {"w1": weight(4, 3, 3, 3), "b1": weight(4, gain=0.1),
             "w2": weight(4, 4, 3, 3, gain=0.3), "b2": weight(4, gain=0.1),
             "w3": weight(5, 8, gain=0.3), "b3": weight(5, gain=0.1), "m": weight(1, 4, 1, 1)}
    node = helper.make_node
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             node("Relu", ["c1"], ["r1"], name="relu1"),
             node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             node("Add", ["c2", "r1"], ["s"], name="add"),
             node("LeakyRelu", ["s"], ["l"], name="leaky", alpha=0.1),
             node("Mul", ["l", "m"], ["mm"], name="mul"),
             node("Sigmoid", ["mm"], ["sg"], name="sig"),
             node("AveragePool", ["sg"], ["ap"], name="avg", kernel_shape=[2, 2],
                  strides=[2, 2]),
             node("MaxPool", ["l"], ["mp"], name="maxpool", kernel_shape=[2, 2],
                  strides=[2, 2]),
             node("Concat", ["ap", "mp"], ["cat"], name="cat", axis=1),
             node("GlobalAveragePool", ["cat"], ["g"], name="gap"),
             node("Flatten", ["g"], ["f"], name="flat"),
             node("Gemm", ["f", "w3", "b3"], ["y"], name="fc", transB=1)]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, list(SHAPE))],
                       [("y", TensorProto.FLOAT, None)],
                       [initializer(name, value) for name, value in inits.items()])


def _samples(count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((count,) + SHAPE) * 0.8 + 0.4).astype(np.float32)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """``(format, activations) -> path``: onnxruntime's QOperator and QDQ models, int8
    symmetric (``"QInt8"``) or uint8 asymmetric activations, calibrated alike."""
    folder = tmp_path_factory.mktemp("qoperator")
    source = folder / "float.onnx"
    source.write_bytes(_float_model())

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.feeds = iter({"x": x} for x in _samples(8, seed=1))

        def get_next(self):
            return next(self.feeds, None)

    paths = {}
    for fmt in ("QOperator", "QDQ"):
        for activations in ("QInt8", "QUInt8"):
            path = paths[fmt, activations] = folder / f"{fmt}_{activations}.onnx"
            quantization.quantize_static(
                str(source), str(path), Reader(),
                quant_format=getattr(quantization.QuantFormat, fmt),
                activation_type=getattr(quantization.QuantType, activations),
                weight_type=quantization.QuantType.QInt8,
                extra_options={"ActivationSymmetric": activations == "QInt8",
                               "WeightSymmetric": True})
    return paths


def _theirs(path, x: np.ndarray) -> dict[str, np.ndarray]:
    """onnxruntime's run of the QOperator model: every integer tensor (as int8, a uint8 one
    less 128) by the name vdla gives it (a QuantizeLinear's input; else the rewrite's
    ``<tensor>/float``)."""
    import onnx
    model = onnx.load(path)
    names = {}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear":
            names[node.output[0]] = node.input[0]
        elif node.op_type != "DequantizeLinear":
            names[node.output[0]] = f"{node.output[0]}/float"
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return {names[name]: (array.astype(np.int16) - (128 if array.dtype == np.uint8 else 0)
                          ).astype(np.int8)
            for name, array in zip(names, session.run(list(names), {"x": x}))}


def test_every_qoperator_node_is_within_one_lsb_of_onnxruntime(models):
    from vdla.bench.onnx_quantize import node_differences
    from vdla.frontend.onnx import load
    from vdla.graph.network import quantize_graph
    integer = quantize_graph(load(models["QOperator", "QInt8"]))
    x = _samples(1, seed=5)[0]
    theirs = _theirs(models["QOperator", "QInt8"], x)
    rows = node_differences(integer, {"x": x}, theirs)
    ops = {row["op"] for row in rows.values()}
    assert {"qconv", "qadd", "leakyrelu", "qaffine", "maxpool", "sigmoid", "qavgpool",
            "concat", "qglobal_avgpool", "flatten"} <= ops, ops
    worst = max(row["max_lsb"] for row in rows.values())
    assert worst <= 1, rows
    # The dense layer's output is the graph's: dequantised, checked against onnxruntime's.
    from vdla.graph.kernels import execute
    (y,) = execute(integer, {"x": x}).values()
    scale = integer.tensors["y/q"].scale
    np.testing.assert_allclose(y, theirs["y_quantized/float"].astype(np.float32) * scale,
                               atol=scale * 1.01 * 2)


def test_qoperator_imports_as_the_same_model_quantised_as_qdq(models):
    """The same integer graph, scales and integers, but where onnxruntime's two formats
    choose scales apart: its QDQ AveragePool keeps its input's scale, its
    QLinearAveragePool has its own, so the pool's output and what follows it differ."""
    from vdla.frontend.onnx import load
    from vdla.graph.kernels import execute
    from vdla.graph.network import quantize_graph
    qoperator = quantize_graph(load(models["QOperator", "QInt8"]))
    qdq = quantize_graph(load(models["QDQ", "QInt8"]))
    assert [n.op for n in qoperator.nodes] == [n.op for n in qdq.nodes]
    names = {"x": "x"}
    for ours, theirs in zip(qoperator.nodes, qdq.nodes):
        names.update(zip(ours.outputs, theirs.outputs))
    apart, origins = set(), set()
    for node in qoperator.nodes:
        (out,) = node.outputs
        a, b = qoperator.tensors[out], qdq.tensors[names[out]]
        if (a.exponent, a.scale, a.zero_point) != (b.exponent, b.scale, b.zero_point):
            origins.add(names[out])
        if names[out] in origins or any(name in apart for name in node.inputs):
            apart.add(out)
    assert origins == {"ap"}, origins
    same = [node for node in qoperator.nodes if node.outputs[0] not in apart]
    assert len(same) >= 8
    for x in _samples(3, seed=9):
        a = execute(qoperator, {"x": x}, keep=True)
        b = execute(qdq, {"x": x}, keep=True)
        for node in same:
            out = node.outputs[0]
            np.testing.assert_array_equal(a[out], b[names[out]], err_msg=node.name)


def test_uint8_activations_import_or_are_refused_in_one_line(models):
    """onnxruntime's default asymmetric uint8 activations: the same as its QDQ model, where
    vdla imports that (zero points), else its one-line zero-point refusal. This model's
    Mul constant is uint8 with a zero point far from 128, which vdla's symmetric int8
    weights cannot hold, in either format."""
    from vdla.frontend.onnx import load
    from vdla.graph.network import quantize_graph
    message = (r"\(dequantize\): zero point uint8 \[\d+\] is not supported: its uint8 "
               r"constant less the zero point spans -?\d+ to -?\d+, beyond int8")
    for fmt in ("QDQ", "QOperator"):
        with pytest.raises(GraphError, match=message):
            quantize_graph(load(models[fmt, "QUInt8"]))


def _edited(path, edit) -> bytes:
    import onnx
    model = onnx.load(path)
    edit(model)
    return model.SerializeToString()


def _node(model, op):
    return next(node for node in model.graph.node if node.op_type == op)


def _refusal(models, edit, message):
    from vdla.frontend.onnx import from_bytes
    with pytest.raises(GraphError, match=message):
        from_bytes(_edited(models["QOperator", "QInt8"], edit), source="q.onnx")


def test_an_operator_not_rewritten_is_refused_naming_it(models):
    def softmax(model):
        _node(model, "QLinearSigmoid").op_type = "QLinearSoftmax"
    _refusal(models, softmax, r"^node 'sig_quant' \(QLinearSoftmax\): operator QLinearSoftmax "
                              r"of domain com.microsoft is not supported \(of onnxruntime's "
                              r"QOperator format vdla imports QGemm, QLinearAdd, ")

    def argmax(model):
        _node(model, "MaxPool").op_type = "ArgMax"
        del _node(model, "ArgMax").attribute[:]
    _refusal(models, argmax, r"^node 'maxp(ool)?' \(ArgMax\): reads the integer tensor "
                             r"'l_quantized', but ArgMax is not a QOperator operator vdla "
                             r"rewrites")


def test_dynamic_quantisation_is_refused():
    from onnx import TensorProto, helper

    from tests.graph.models import initializer, model_bytes
    from vdla.frontend.onnx import from_bytes
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"], name="dq"),
             helper.make_node("MatMulInteger", ["q", "w", "z"], ["y32"], name="mm"),
             helper.make_node("Cast", ["y32"], ["y"], name="cast", to=TensorProto.FLOAT)]
    data = model_bytes(nodes, [("x", TensorProto.FLOAT, [1, 4])],
                       [("y", TensorProto.FLOAT, None)],
                       [initializer("w", np.ones((4, 2), np.uint8))])
    with pytest.raises(GraphError, match=r"^node 'dq' \(DynamicQuantizeLinear\): dynamic "
                                         r"quantisation is not supported"):
        from_bytes(data)


def test_operands_and_attributes_are_checked(models):
    def computed_scale(model):
        _node(model, "QLinearLeakyRelu").input[3] = "s_quantized"
    _refusal(models, computed_scale, r"^node 'leaky_quant' \(QLinearLeakyRelu\): its output "
                                     r"scale 's_quantized' must be an initializer")

    def channels_last(model):
        from onnx import helper
        node = _node(model, "QLinearGlobalAveragePool")
        del node.attribute[:]
        node.attribute.append(helper.make_attribute("channels_last", 1))
    _refusal(models, channels_last, r"^node 'gap_quant' \(QLinearGlobalAveragePool\): "
                                    r"attribute channels_last=1 is not supported")

    def unknown_attribute(model):
        from onnx import helper
        _node(model, "QLinearConv").attribute.append(helper.make_attribute("flavour", 2))
    _refusal(models, unknown_attribute, r"^node 'conv1_quant' \(QLinearConv\): attribute "
                                        r"flavour is not supported$")

    def float_bias(model):
        _node(model, "QLinearConv").input[8] = "w3_scale"
    _refusal(models, float_bias, r"^node 'conv1_quant' \(QLinearConv\): its bias 'w3_scale' "
                                 r"must be a one-dimensional int32 initializer$")

    def arity(model):
        del _node(model, "QLinearAdd").input[7:]
        del _node(model, "QLinearAdd").input[6:]
    _refusal(models, arity, r"^node 'add_quant' \(QLinearAdd\): expected 7-8 inputs, got 6$")

    def integer_output(model):
        model.graph.output[0].name = "y_quantized"
    _refusal(models, integer_output, r"^q.onnx: graph output 'y_quantized' is an integer "
                                     r"tensor; vdla's outputs are float")


def test_a_model_without_qoperator_nodes_is_left_as_it_is(models):
    import onnx

    from vdla.frontend.qoperator import is_qoperator, to_qdq
    model = onnx.load(models["QDQ", "QInt8"])
    before = model.SerializeToString()
    assert not is_qoperator(model)
    assert to_qdq(model).SerializeToString() == before
    assert is_qoperator(onnx.load(models["QOperator", "QInt8"]))
