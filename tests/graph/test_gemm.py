"""Gemm (`graph.ops.layers`): alpha and beta folded into the constant weight and C, transA
and transB, C of any shape that broadcasts, against onnx's reference on random cases; in
int8 through a network file on fsim; the one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.graph.models import initializer, model_bytes
from tests.graph.reference import fed_first, onnx_reference, onnxruntime, vdla_float
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network
from vdla.graph.network_file import dumps, loads
from vdla.hw.config import PRESETS

_C_SHAPES = [None, (), (1,), "n", (1, "n"), ("m", 1), ("m", "n")]


def test_gemm_matches_onnx_on_random_cases():
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(60):
        m, k, n = (int(v) for v in rng.integers(1, 8, 3))
        trans_a, trans_b = (int(v) for v in rng.integers(0, 2, 2))
        alpha, beta = (float(rng.choice([1.0, 0.5, -2.25])) for _ in range(2))
        c_shape = _C_SHAPES[int(rng.integers(0, len(_C_SHAPES)))]
        a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
        arrays = [a, b]
        if c_shape is not None:
            shape = tuple({"m": m, "n": n}.get(d, d) for d in c_shape)
            arrays.append(rng.standard_normal(shape).astype(np.float32))
        node = helper.make_node("Gemm", ["a", "b", "c"][:len(arrays)], ["y"], transA=trans_a,
                                transB=trans_b, alpha=alpha, beta=beta)
        data = fed_first(node, arrays)
        (want,) = onnx_reference(data, {"a": a})
        graph, (got,) = vdla_float(data, {"a": a})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(node))
        ops = [n.op for n in graph.nodes]
        assert ops == ["transpose"] * trans_a + ["dense"] + ["add"] * (
            c_shape in (("m", 1), ("m", "n")) and m > 1), (ops, node)
        seen.add((trans_a, trans_b, alpha != 1, beta != 1, c_shape))
    assert len(seen) > 40


def _gemm_model() -> bytes:
    """transA, alpha, beta and a C with one row per sample: a transpose, a dense and an add
    of a constant (the host's qaffine in int8)."""
    rng = np.random.default_rng(1)
    node = helper.make_node("Gemm", ["x", "w", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)
    inits = [initializer("w", (rng.standard_normal((6, 5)) * 0.5).astype(np.float32)),
             initializer("c", rng.uniform(-0.3, 0.3, (3, 5)).astype(np.float32))]
    return model_bytes([node], [("x", TensorProto.FLOAT, (6, 3))],
                       [("y", TensorProto.FLOAT, None)], inits)


def test_a_gemm_with_every_attribute_saves_loads_and_runs_bit_exact_on_fsim():
    calibration = {"x": np.random.default_rng(2).standard_normal((24, 3)).astype(np.float32)}
    network = loads(dumps(compile_network(from_bytes(_gemm_model()), PRESETS["default"],
                                          calibration)))
    assert [n.op for n in network.graph.nodes] == ["quantize_input", "transpose", "qdense",
                                                   "qaffine", "dequantize_output"]
    x = calibration["x"][:6]
    result = network.run({"x": x}, keep=True, sim="fsim")
    reference = execute(network.graph, {"x": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    (want,) = onnxruntime(_gemm_model(), {"x": x})
    got = result.outputs["y"]
    assert float(np.ravel(got) @ np.ravel(want)
                 / np.linalg.norm(got) / np.linalg.norm(want)) > 0.999


@pytest.mark.parametrize("inputs, attrs, message", [
    (["x", "b", "c"], {"alpha": 2.0},
     r"^node 'y' \(Gemm\): its weight 'b' must be a constant \(to fold alpha=2.0\)$"),
    (["x", "w", "c"], {"beta": 0.5},
     r"^node 'y' \(Gemm\): attribute beta=0.5 with a computed C \('c'\) is not supported "
     r"\(only 1\)$"),
    (["x", "w", "c"], {"alpha": float("inf")},
     r"^node 'y' \(Gemm\): attribute alpha=inf is not a finite number$"),
])
def test_what_gemm_cannot_take_is_refused_in_one_line(inputs, attrs, message):
    node = helper.make_node("Gemm", inputs, ["y"], **attrs)
    fed = [("x", TensorProto.FLOAT, (2, 3))]
    if "b" in inputs:
        fed.append(("b", TensorProto.FLOAT, (3, 4)))
    fed.append(("c", TensorProto.FLOAT, (2, 4)))
    data = model_bytes([node], fed, [("y", TensorProto.FLOAT, None)],
                       [initializer("w", np.ones((3, 4), np.float32))])
    with pytest.raises(GraphError, match=message):
        from_bytes(data)
