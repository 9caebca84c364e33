"""Pad (`graph.ops.movement`): a constant (any value), edge and reflect, with or without an
axes input, against onnx's reference on random cases; in int8 the constant quantised at the
input's scale, against onnxruntime's DequantizeLinear -> Pad -> QuantizeLinear, through a
network file on fsim before a conv it cannot fold into; the one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.graph.models import initializer, model_bytes
from tests.graph.reference import fed_first, onnx_reference, onnxruntime, qdq_node, vdla_float
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.kernels import execute, run_node
from vdla.graph.network import compile_network, quantize_graph
from vdla.graph.network_file import dumps, loads
from vdla.hw.config import PRESETS


def test_pad_matches_onnx_on_random_cases():
    rng = np.random.default_rng(0)
    for _ in range(40):
        shape = tuple(int(v) for v in rng.integers(1, 6, 4))
        mode = str(rng.choice(["constant", "edge", "reflect"]))
        limits = [shape[2] if mode == "reflect" else 4, shape[3] if mode == "reflect" else 4]
        spatial = [int(rng.integers(0, limit)) for limit in limits + limits]
        x = rng.standard_normal(shape).astype(np.float32)
        value = np.array(float(rng.choice([0.0, 1.25, -3.5])), np.float32)
        if rng.random() < 0.5:   # opset 18: pads for the given axes only
            axes = [-2, 3] if rng.random() < 0.5 else [2, -1]
            pads = np.array(spatial, np.int64)
            arrays, opset = [x, pads, value, np.array(axes, np.int64)], 18
        else:
            pads = np.array([0, 0, *spatial[:2], 0, 0, *spatial[2:]], np.int64)
            arrays, opset = [x, pads, value], 17
        names = ["x", "pads", "value", "axes"][:len(arrays)]
        node = helper.make_node("Pad", names, ["y"], mode=mode)
        data = fed_first(node, arrays, opset)
        (want,) = onnx_reference(data, {"x": x})
        graph, (got,) = vdla_float(data, {"x": x})
        np.testing.assert_array_equal(got, want, err_msg=f"{mode} {spatial}")
        assert [n.op for n in graph.nodes] == ["pad"]


def _pad_conv_model(mode="constant", value=0.75) -> bytes:
    """A Pad no conv can take (a non-zero value, or edge), then a conv."""
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["p"], mode=mode),
             helper.make_node("Conv", ["p", "w", "b"], ["y"])]
    inits = [initializer("pads", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)),
             initializer("value", np.array(value, np.float32)),
             initializer("w", (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)),
             initializer("b", np.zeros(4, np.float32))]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, (2, 3, 5, 6))],
                       [("y", TensorProto.FLOAT, None)], inits)


def _samples(seed, count=8):
    return {"x": np.random.default_rng(seed).standard_normal((count, 3, 5, 6))
            .astype(np.float32)}


@pytest.mark.parametrize("mode", ["constant", "edge"])
def test_an_int8_pad_computes_as_onnxruntime_between_dq_and_q(mode):
    integer = quantize_graph(from_bytes(_pad_conv_model(mode)), _samples(2))
    (pad,) = [n for n in integer.nodes if n.op == "pad"]
    step = integer.tensors[pad.inputs[0]].real_scale
    if mode == "constant":   # 0.75 at the input's power-of-two scale, half to even
        assert pad.attrs["value"] == float(np.rint(0.75 / step)) != 0
    q = np.random.default_rng(3).integers(-128, 128, (2, 3, 5, 6)).astype(np.int8)
    inits = [initializer("pads", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)),
             initializer("value", np.array(0.75, np.float32))]
    (theirs,) = onnxruntime(qdq_node(helper.make_node("Pad", ["f", "pads", "value"], ["g"],
                                                      mode=mode), step, step, inits),
                            {"q": q})
    (ours,) = run_node(pad, [q])
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_a_pad_before_a_conv_saves_loads_and_runs_bit_exact_on_fsim(mode):
    data = _pad_conv_model(mode)
    network = loads(dumps(compile_network(from_bytes(data), PRESETS["default"], _samples(2))))
    (pad,) = [n for n in network.graph.nodes if n.op == "pad"]   # the conv has no pads
    assert ("value" if mode == "constant" else mode) in pad.attrs
    feeds = {"x": _samples(2)["x"][:2]}
    result = network.run(feeds, keep=True, sim="fsim")
    reference = execute(network.graph, feeds, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    (want,) = onnxruntime(data, feeds)
    got = result.outputs["y"]
    assert float(np.ravel(got) @ np.ravel(want)
                 / np.linalg.norm(got) / np.linalg.norm(want)) > 0.99


def test_a_constant_int8_cannot_hold_is_refused_rather_than_saturated():
    with pytest.raises(GraphError, match=r"^node 'p' \(pad\): its constant value 1000 is "
                                         r"\d+ steps of its input's scale [0-9.e-]+, outside "
                                         r"int8 \(-128 to 127\); refused rather than "
                                         r"saturated$"):
        quantize_graph(from_bytes(_pad_conv_model(value=1000.0)), _samples(2))


@pytest.mark.parametrize("pads, mode, message", [
    ([0, 1, 0, 0, 0, 0, 0, 0], "constant",
     r"pads \[0, 1, 0, 0, 0, 0, 0, 0\]: only padding added to height and width is supported "
     r"\(none on batch or channels, none negative\)$"),
    ([0, 0, 4, 0, 0, 0, 0, 0], "reflect",
     r"pads \[0, 0, 4, 0, 0, 0, 0, 0\] in mode reflect: each must be smaller than its axis "
     r"\(4, 4\)$"),
    ([0, 0, 1, 1, 0, 0, 1, 1], "wrap",
     r"attribute mode='wrap' is not supported \(supported: 'constant', 'edge', 'reflect'\)$"),
])
def test_what_pad_cannot_take_is_refused_in_one_line(pads, mode, message):
    x = np.zeros((1, 2, 4, 4), np.float32)
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)
    with pytest.raises(GraphError, match=r"^node 'y' \(Pad\): " + message):
        from_bytes(fed_first(node, [x, np.array(pads, np.int64)]))
