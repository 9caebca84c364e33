"""Where int8 loses accuracy in depthwise (MobileNet, EfficientNet) networks.

An SE block squeezes its input with a global average: the mean spans far less
than its input, so at the input's power-of-two step it would keep a few
levels of the range. The average takes its own calibrated exponent (finer),
and the pooled value comes within half of that step of onnxruntime's float
mean.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from vdla.frontend.onnx import from_bytes
from vdla.graph.kernels import execute
from vdla.graph.network import quantize_graph

CHANNELS, SIDE = 8, 12


def _squeeze_model() -> bytes:
    """x -> 1x1 conv -> ReLU -> global average (an output too) -> 1x1 conv (the SE's fc)."""
    rng = np.random.default_rng(0)
    conv = rng.normal(0, 0.5, (CHANNELS, CHANNELS, 1, 1)).astype(np.float32)
    fc = rng.normal(0, 0.5, (CHANNELS, CHANNELS, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["conv"]),
         helper.make_node("Relu", ["conv"], ["relu"]),
         helper.make_node("GlobalAveragePool", ["relu"], ["pooled"]),
         helper.make_node("Conv", ["pooled", "fc"], ["y"])],
        "squeeze",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS, SIDE, SIDE])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, CHANNELS, 1, 1]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, CHANNELS, 1, 1])],
        [numpy_helper.from_array(conv, "w"), numpy_helper.from_array(fc, "fc")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _samples(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(count, CHANNELS, SIDE, SIDE)).astype(
        np.float32)


def test_global_average_takes_its_own_finer_scale():
    ort = pytest.importorskip("onnxruntime")
    data = _squeeze_model()
    integer = quantize_graph(from_bytes(data), {"x": _samples(8, 1)})
    (pool,) = [node for node in integer.nodes if node.op == "qglobal_avgpool"]
    e_in = integer.tensors[pool.inputs[0]].exponent
    e_out = integer.tensors[pool.outputs[0]].exponent
    assert e_out >= e_in + 2, (e_in, e_out)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for x in _samples(4, 2):
        x = x[None]
        values = execute(integer, {"x": x}, keep=True)
        # The pool alone: the mean of its int8 input (dequantised) rounded at its own step.
        levels = values[pool.inputs[0]].astype(np.float64) * 2.0 ** -e_in
        mean = levels.mean(axis=(2, 3), keepdims=True)
        assert np.max(np.abs(values["pooled"] - mean)) <= 0.5 * 2.0 ** -e_out + 1e-6
        # And the whole: within the input's half step of onnxruntime's float mean.
        (expected,) = session.run(["pooled"], {"x": x})
        assert np.max(np.abs(values["pooled"] - expected)) <= 2.0 ** -e_in
