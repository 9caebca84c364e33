"""ONNX LSTM and GRU (`graph.ops.recurrent`): float semantics against onnxruntime, the refusals,
the QDQ export of qlstm/qgru on onnxruntime, and the LSTM language model compiled and run on
fsim and the cpu target."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.kernels import execute

_OUTPUTS = {"LSTM": ("Y", "Y_h", "Y_c"), "GRU": ("Y", "Y_h")}


def _model(kind, *, steps=4, batch=2, features=3, hidden=5, direction="forward", layout=0,
           bias=True, initial=True, peepholes=False, outputs=(0, 1, 2), seed=0, **attrs):
    """One LSTM or GRU node with constant weights; its input X and the model."""
    rng = np.random.default_rng(seed)
    gates = 4 if kind == "LSTM" else 3
    dirs = 2 if direction == "bidirectional" else 1

    def normal(*shape, scale=0.5):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    inits = {"W": normal(dirs, gates * hidden, features), "R": normal(dirs, gates * hidden, hidden)}
    inputs = ["X", "W", "R", "", ""]
    if bias:
        inits["B"] = normal(dirs, 2 * gates * hidden, scale=0.3)
        inputs[3] = "B"
    state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    for name in ("h0", "c0")[:2 if kind == "LSTM" else 1]:
        inits[name] = normal(*state) if initial else None
        inputs.append(name if initial else "")
    if peepholes:
        inits["P"] = normal(dirs, 3 * hidden, scale=0.3)
        inputs.append("P")
    while not inputs[-1]:
        inputs.pop()
    names = [name if index in outputs else "" for index, name in enumerate(_OUTPUTS[kind])]
    while not names[-1]:
        names.pop()
    node = helper.make_node(kind, inputs, names, "rnn", hidden_size=hidden, direction=direction,
                            layout=layout, **attrs)
    x_shape = (steps, batch, features) if layout == 0 else (batch, steps, features)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in names if name],
        [numpy_helper.from_array(value, name) for name, value in inits.items()
         if value is not None])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, normal(*x_shape, scale=1.0)


def _onnxruntime(model, x):
    """onnxruntime's outputs; a layout-1 node (which onnxruntime lacks) as Transposes around
    the layout-0 node."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    node = model.graph.node[0]
    layout = next(a for a in node.attribute if a.name == "layout")
    if layout.i == 1:
        layout.i = 0
        nodes = [helper.make_node("Transpose", ["X"], ["X/t"], perm=[1, 0, 2])]
        node.input[0] = "X/t"
        for index in (5, 6):
            if index < len(node.input) and node.input[index]:
                name = node.input[index]
                nodes.append(helper.make_node("Transpose", [name], [f"{name}/t"],
                                              perm=[1, 0, 2]))
                node.input[index] = f"{name}/t"
        after = []
        for index, name in enumerate(list(node.output)):
            if name:
                node.output[index] = f"{name}/t"
                after.append(helper.make_node("Transpose", [f"{name}/t"], [name],
                                              perm=[2, 0, 1, 3] if index == 0 else [1, 0, 2]))
        del model.graph.node[:]
        model.graph.node.extend(nodes + [node] + after)
    return onnxruntime.InferenceSession(model.SerializeToString()).run(None, {"X": x})


def _check(model, x):
    graph = from_bytes(model.SerializeToString())
    got = execute(graph, {"X": x})
    expected = _onnxruntime(model, x)
    for output, want in zip(model.graph.output, expected):
        np.testing.assert_allclose(got[output.name], want, rtol=1e-5, atol=1e-5,
                                   err_msg=output.name)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("bias", [False, True])
def test_float_semantics_match_onnxruntime(kind, direction, layout, bias):
    """Bias and initial states together or neither; every output read."""
    model, x = _model(kind, direction=direction, layout=layout, bias=bias, initial=bias,
                      seed=layout + 2 * bias)
    _check(model, x)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("clip", [None, 0.8])
def test_gru_linear_before_reset_and_clip(linear_before_reset, clip):
    attrs = {"linear_before_reset": linear_before_reset} | ({"clip": clip} if clip else {})
    model, x = _model("GRU", direction="bidirectional", seed=3, **attrs)
    _check(model, x)


@pytest.mark.parametrize("attrs", [{}, {"clip": 0.6}, {"input_forget": 1}])
def test_lstm_peepholes_clip_and_input_forget(attrs):
    model, x = _model("LSTM", direction="bidirectional", peepholes=True, seed=4, **attrs)
    _check(model, x)


@pytest.mark.parametrize("outputs", [(1,), (2,), (1, 2)])
def test_only_the_states_read(outputs):
    """Y left out: the nodes of Y_h and Y_c alone (each named after its ONNX output)."""
    model, x = _model("LSTM", direction="reverse", outputs=outputs, seed=5)
    _check(model, x)
    graph = from_bytes(model.SerializeToString())
    assert sorted(n.outputs[0] for n in graph.nodes if n.op == "lstm") == sorted(
        _OUTPUTS["LSTM"][i] for i in outputs)


def test_input_projection_is_one_dense_over_every_step():
    model, _ = _model("GRU", steps=7, batch=3, features=4, hidden=5, direction="bidirectional")
    graph = from_bytes(model.SerializeToString())
    (dense,) = [node for node in graph.nodes if node.op == "dense"]
    assert graph.tensors[dense.inputs[0]].shape == (21, 4)
    assert graph.tensors[dense.outputs[0]].shape == (21, 30)


def _refused(model, message):
    with pytest.raises(GraphError, match=rf"^node 'rnn' \((LSTM|GRU)\): {message}"):
        from_bytes(model.SerializeToString())


@pytest.mark.parametrize("kind, attrs, message", [
    ("LSTM", {"activations": ["Sigmoid", "Tanh", "Relu"]},
     r"attribute activations=\['Sigmoid', 'Tanh', 'Relu'\] is not supported \(only the "
     r"defaults, Sigmoid, Tanh, Tanh per direction\)$"),
    ("GRU", {"activation_alpha": [1.0]}, r"attribute activation_alpha is not supported"),
    ("GRU", {"linear_before_reset": 2},
     r"attribute linear_before_reset=2 is not supported \(supported: 0, 1\)$"),
    ("LSTM", {"clip": -1.0}, r"attribute clip=-1.0 is not a finite number > 0$"),
    ("LSTM", {"input_forget": 3}, r"attribute input_forget=3 is not supported"),
])
def test_unsupported_attributes_are_refused(kind, attrs, message):
    model, _ = _model(kind, **attrs)
    _refused(model, message)


def test_default_activations_given_explicitly_are_accepted():
    model, x = _model("LSTM", direction="bidirectional",
                      activations=["Sigmoid", "Tanh", "Tanh"] * 2)
    _check(model, x)


def test_partial_or_computed_sequence_lengths_are_refused():
    model, _ = _model("GRU", steps=4, batch=2, bias=True, initial=False)
    node = model.graph.node[0]
    model.graph.initializer.append(numpy_helper.from_array(np.array([4, 3], np.int32), "lens"))
    node.input[4:] = ["lens"] if len(node.input) >= 5 else []
    if len(node.input) < 5:
        node.input.append("lens")
    _refused(model, r"its sequence_lens \[4, 3\] are not all the sequence's length 4 \(only "
                    r"full sequences are supported\)$")
    model.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.array([4, 4], np.int32),
                                                                 "lens"))
    from_bytes(model.SerializeToString())
    del model.graph.initializer[-1]
    model.graph.input.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [2]))
    _refused(model, r"its sequence_lens \('lens'\) must be a constant$")


def test_computed_weights_are_refused():
    model, _ = _model("LSTM")
    weight = next(init for init in model.graph.initializer if init.name == "R")
    model.graph.input.append(helper.make_tensor_value_info("R", TensorProto.FLOAT,
                                                           list(weight.dims)))
    model.graph.initializer.remove(weight)
    _refused(model, r"its recurrent weight R \('R'\) must be a constant$")


# -- the language model -----------------------------------------------------------------------


def _lstm_lm():
    path = Path(__file__).parents[2] / "benchmarks" / "models" / "lstm_lm.py"
    spec = importlib.util.spec_from_file_location("lstm_lm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mini_lm():
    from vdla.graph.network import compile_network
    from vdla.hw.config import PRESETS
    lm = _lstm_lm()
    data = lm.build("mini").SerializeToString()
    network = compile_network(from_bytes(data), PRESETS["default"],
                              {"embedded": lm.embed("mini", lm.tokens("mini", 4, seed=2))})
    x = lm.embed("mini", lm.tokens("mini", seed=1))
    expected = onnxruntime.InferenceSession(data).run(None, {"embedded": x})[0]
    return network, x, expected


def test_the_language_model_places_projections_on_the_accelerator(mini_lm):
    network, _, _ = mini_lm
    places = {node.op: set() for node in network.graph.nodes}
    for node in network.graph.nodes:
        places[node.op].add(network.placement[node.name])
    assert places["qdense"] == {"accel"} and places["qlstm"] == {"host"}
    assert sum(node.op == "qdense" for node in network.graph.nodes) == 3


@pytest.mark.parametrize("options", [{"sim": "fsim"}, {"target": "cpu"}])
def test_the_language_model_runs_bit_exact_and_close_to_onnxruntime(mini_lm, options):
    network, x, expected = mini_lm
    result = network.run({"embedded": x}, **options)
    reference = execute(network.graph, {"embedded": x})
    np.testing.assert_array_equal(result.outputs["logits"], reference["logits"])
    got = result.outputs["logits"].astype(np.float64).ravel()
    want = expected.astype(np.float64).ravel()
    assert got @ want / (np.linalg.norm(got) * np.linalg.norm(want)) >= 0.99


# -- QDQ export -------------------------------------------------------------------------------


def _exported_node_on(model, integer, node, values):
    """onnxruntime's output of ``node``'s exported form, fed vdla's own int8 inputs: the
    exported model with the node's int8 inputs made graph inputs (their producers removed)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    fed = [name for name in node.inputs if integer.tensors[name].dtype == np.int8]
    kept = [n for n in model.graph.node if not set(n.output) & set(fed)]
    del model.graph.node[:]
    model.graph.node.extend(kept)
    model.graph.input.extend(helper.make_tensor_value_info(
        name, TensorProto.INT8, list(integer.tensors[name].shape)) for name in fed)
    del model.graph.output[:]
    out = node.outputs[0]
    model.graph.output.append(helper.make_tensor_value_info(
        out, TensorProto.INT8, list(integer.tensors[out].shape)))
    feeds = {name: values[name] for name in [*integer.inputs, *fed]}
    (got,) = onnxruntime.InferenceSession(model.SerializeToString()).run(None, feeds)
    return got


@pytest.mark.parametrize("kind, options", [
    ("LSTM", {"direction": "forward"}),
    ("LSTM", {"direction": "reverse", "peepholes": True, "clip": 0.9}),
    ("LSTM", {"direction": "bidirectional", "peepholes": True, "layout": 1}),
    ("LSTM", {"direction": "forward", "peepholes": True, "input_forget": 1}),
    ("GRU", {"direction": "forward", "linear_before_reset": 0}),
    ("GRU", {"direction": "reverse", "linear_before_reset": 1, "clip": 0.7}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1, "layout": 1}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 0, "bias": False,
             "initial": False}),
])
def test_qdq_export_runs_on_onnxruntime_within_one_lsb(kind, options):
    """Every output (Y, Y_h, Y_c) of a quantised LSTM/GRU, exported as QDQ."""
    model, x = _model(kind, steps=5, batch=3, features=4, hidden=6, seed=7, **options)
    _check_export(kind, model, {"X": x})


@pytest.mark.parametrize("layout", [0, 1])
def test_qdq_export_of_a_computed_initial_state(layout):
    """initial_h and initial_c fed: quantised at the input, dequantised for the recurrence."""
    model, x = _model("LSTM", steps=3, batch=2, features=4, hidden=5, seed=8, layout=layout,
                      direction="bidirectional")
    feeds = {"X": x}
    for name in ("h0", "c0"):
        init = next(i for i in model.graph.initializer if i.name == name)
        feeds[name] = numpy_helper.to_array(init)
        model.graph.initializer.remove(init)
        model.graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                               list(init.dims)))
    integer = _check_export("LSTM", model, feeds)
    assert sum(n.op == "dequantize_output" for n in integer.nodes) == 3 + 2


def _check_export(kind, model, feeds):
    """The graph quantised (calibrated on ``feeds``) and exported as QDQ: onnxruntime's
    LSTM/GRU on the dequantised projection, fed vdla's int8 inputs, within 1 LSB of vdla's
    qlstm/qgru kernel; the whole exported model a few LSBs from vdla's outputs."""
    from vdla.graph.export import to_qdq
    from vdla.graph.kernels import run_node
    from vdla.graph.network import quantize_graph
    integer = quantize_graph(from_bytes(model.SerializeToString()), feeds)
    nodes = [n for n in integer.nodes if n.op == f"q{kind.lower()}"]
    assert sorted(n.attrs["which"] for n in nodes) == list(range(len(_OUTPUTS[kind])))
    qdq = to_qdq(integer)
    values = execute(integer, feeds, keep=True)
    worst = 0
    for node in nodes:
        ours = run_node(node, [values[name] for name in node.inputs])[0]
        np.testing.assert_array_equal(ours, values[node.outputs[0]])
        theirs = _exported_node_on(qdq, integer, node, values)
        assert theirs.shape == ours.shape == integer.tensors[node.outputs[0]].shape
        assert np.abs(ours).max() > 8, node.name   # the comparison sees the output's range
        worst = max(worst, int(np.abs(ours.astype(int) - theirs.astype(int)).max()))
    assert worst <= 1, worst
    # The whole model on onnxruntime (its own QDQ projection, a LSB off here and there):
    # the float outputs a few of their int8 steps from vdla's.
    session = onnxruntime.InferenceSession(qdq.SerializeToString())
    steps = {n.outputs[0]: integer.tensors[n.inputs[0]].real_scale for n in integer.nodes
             if n.op == "dequantize_output"}
    for output, got in zip(session.get_outputs(), session.run(None, feeds)):
        assert np.abs(got - values[output.name]).max() <= 3 * steps[output.name], output.name
    return integer
