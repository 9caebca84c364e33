"""BatchNormalization (`graph.ops.batchnorm`): float semantics against onnx's reference, and
one that follows no layer (DenseNet's after a Concat) quantised as a per-channel ``qaffine``,
checked against onnxruntime's DequantizeLinear -> BatchNormalization -> QuantizeLinear."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.graph.models import initializer, model_bytes
from tests.graph.reference import fed_first, onnx_reference, onnxruntime, qdq_node, vdla_float
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network, quantize_graph
from vdla.graph.network_file import dumps, loads
from vdla.hw.config import PRESETS


def _params(rng, channels):
    return [rng.uniform(0.5, 1.5, channels).astype(np.float32),
            rng.uniform(-0.5, 0.5, channels).astype(np.float32),
            rng.uniform(-0.3, 0.3, channels).astype(np.float32),
            rng.uniform(0.2, 2.0, channels).astype(np.float32)]


_NODE = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                         epsilon=1e-3)


@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 7), (1, 5, 3, 5), (2, 1, 1, 9)])
def test_batchnorm_matches_onnx(shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    data = fed_first(_NODE, [x, *_params(rng, shape[1])])
    (want,) = onnx_reference(data, {"x": x})
    _, (got,) = vdla_float(data, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _after_concat(channels=(3, 2), size=(5, 7), seed=0) -> tuple[bytes, list]:
    """Concat of two inputs, then BatchNormalization: no layer for it to fold into."""
    rng = np.random.default_rng(seed)
    params = _params(rng, sum(channels))
    nodes = [helper.make_node("Concat", ["a", "c"], ["cat"], axis=1),
             helper.make_node("BatchNormalization", ["cat", "s", "b", "m", "v"], ["y"],
                              epsilon=1e-5)]
    inits = [initializer(name, value) for name, value in zip("sbmv", params)]
    inputs = [(name, TensorProto.FLOAT, (2, c, *size)) for name, c in zip("ac", channels)]
    return model_bytes(nodes, inputs, [("y", TensorProto.FLOAT, None)], inits), params


def _calibration(seed=1, channels=(3, 2), size=(5, 7), count=8):
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal((count, c, *size)).astype(np.float32)
            for name, c in zip("ac", channels)}


def test_a_batchnorm_after_no_layer_is_a_qaffine_as_onnxruntime_computes_it():
    data, params = _after_concat()
    integer = quantize_graph(from_bytes(data), _calibration())
    (affine,) = [n for n in integer.nodes if n.op == "qaffine"]
    assert not any(n.op == "batchnorm" for n in integer.nodes)
    s_x = integer.tensors[affine.inputs[0]].real_scale
    s_y = integer.tensors[affine.outputs[0]].real_scale
    every = np.arange(-128, 128, dtype=np.int8)
    q = np.resize(every, (2, 5, 5, 7)).astype(np.int8)   # every int8 value in every channel
    qdq = qdq_node(helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["f"],
                                    epsilon=1e-5), s_x, s_y,
                   [initializer(name, value) for name, value in zip("sbmv", params)])
    (theirs,) = onnxruntime(qdq, {"q": q})
    from vdla.graph.kernels import run_node
    args = [q] + [integer.value(name) for name in affine.inputs[1:]]
    (ours,) = run_node(affine, args)
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1
    assert np.mean(ours == theirs) > 0.99


def test_a_standalone_batchnorm_saves_loads_and_runs_bit_exact_on_fsim():
    data, _ = _after_concat()
    network = compile_network(from_bytes(data), PRESETS["default"], _calibration())
    network = loads(dumps(network))
    feeds = {name: value[:2] for name, value in _calibration().items()}   # in range
    result = network.run(feeds, keep=True, sim="fsim")
    reference = execute(network.graph, feeds, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    expected = execute(from_bytes(data), feeds)["y"]
    got = result.outputs["y"]
    step = network.graph.tensors["y/q"].real_scale
    inside = np.abs(expected) < 127 * step   # calibration may clip a few outliers
    # The input's rounding (half a step, times a factor below 2.3) and the output's.
    assert np.abs(got - expected)[inside].max() <= 1.7 * step
    assert inside.mean() > 0.95


def test_a_batchnorm_with_computed_statistics_is_refused_in_one_line():
    rng = np.random.default_rng(3)
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    s, b, _, v = _params(rng, 3)
    data = model_bytes([node], [("x", TensorProto.FLOAT, (2, 3, 4, 4)),
                                ("m", TensorProto.FLOAT, (3,))],
                       [("y", TensorProto.FLOAT, None)],
                       [initializer("s", s), initializer("b", b), initializer("v", v)])
    calibration = {"x": rng.standard_normal((2, 3, 4, 4)).astype(np.float32),
                   "m": np.full(3, 0.1, np.float32)}
    with pytest.raises(GraphError, match=r"^node 'y' \(batchnorm\): its parameter 'm' must be "
                                         r"a constant \(vdla quantises an inference-mode "
                                         r"BatchNorm as a per-channel affine function\)$"):
        quantize_graph(from_bytes(data), calibration)
