"""Each graph pass alone: what it changes, and that the float graph computes the same."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.graph.models import images, initializer, model_bytes, residual_cnn
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.kernels import execute
from vdla.graph.passes import PIPELINE, run_passes
from vdla.graph.passes.batchnorm import fold_batchnorm
from vdla.graph.passes.constants import fold_constants
from vdla.graph.passes.fusion import fuse_activations, fuse_bias
from vdla.graph.passes.pads import split_pads
from vdla.graph.passes.qdq import read_qdq, read_scale, scale_exponent


@pytest.fixture
def graph():
    return from_bytes(residual_cnn(seed=2).SerializeToString(), batch=3)


def _same_function(before: Graph, after: Graph, atol=1e-5):
    x = {"input": images(3, seed=9)}
    np.testing.assert_allclose(execute(after, x)["probs"], execute(before, x)["probs"],
                               atol=atol)


def test_batchnorm_folds_into_the_conv(graph):
    folded = fold_batchnorm(graph.copy()).prune().check()
    assert [n.op for n in folded.nodes].count("batchnorm") == 0
    assert all(len(n.inputs) == 3 for n in folded.nodes if n.op == "conv")
    _same_function(graph, folded)


def test_relu_fuses_into_conv_and_add(graph):
    fused = fuse_activations(fold_batchnorm(graph.copy())).prune().check()
    assert "relu" not in [n.op for n in fused.nodes]
    assert {n.name: n.attrs["relu"] for n in fused.nodes if "relu" in n.attrs} == {
        "conv1": True, "conv2": True, "conv3": False, "residual": True, "fc": False}
    _same_function(graph, fused)


def test_a_relu_after_a_tensor_with_two_readers_stays(graph):
    g = graph.copy()
    g.outputs.append("c1")  # conv1's output now has a second reader
    fused = fuse_activations(g).check()
    assert fused.node("conv1").attrs["relu"] is False


def test_constant_add_after_matmul_becomes_the_bias():
    rng = np.random.default_rng(0)
    weight, bias = rng.standard_normal((6, 4)).astype(np.float32), np.arange(4, dtype=np.float32)
    model = model_bytes([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                         helper.make_node("Add", ["m", "b"], ["y"], name="bias")],
                        [("x", 1, [2, 6])], [("y", 1, [2, 4])],
                        [initializer("w", weight), initializer("b", bias)])
    graph = from_bytes(model)
    fused = fuse_bias(graph.copy()).prune().check()
    assert [n.op for n in fused.nodes] == ["dense"] and fused.outputs == ["y"]
    x = rng.standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(execute(fused, {"x": x})["y"], x @ weight + bias, rtol=1e-5)


def test_constant_folding_evaluates_all_constant_nodes():
    graph = Graph({"x": Tensor("x", (2,), np.float32),
                   "c": Tensor("c", (2,), np.float32, np.array([-1, 2], np.float32)),
                   "r": Tensor("r", (2,), np.float32),
                   "y": Tensor("y", (2,), np.float32)},
                  [Node("relu", "relu", ["c"], ["r"]), Node("add", "add", ["x", "r"], ["y"])],
                  ["x"], ["y"]).check()
    folded = fold_constants(graph.copy()).check()
    assert [n.name for n in folded.nodes] == ["add"]
    assert folded.value("r").tolist() == [0, 2]


def test_pipeline_keeps_the_function_and_runs_in_declared_order(graph):
    names = []
    result = run_passes(graph, dump=lambda name, g: names.append(name))
    assert names == [name for name, _ in PIPELINE]
    assert [n.op for n in result.nodes] == ["conv", "maxpool", "conv", "conv", "add",
                                            "global_avgpool", "flatten", "dense", "softmax"]
    _same_function(graph, result)


@pytest.mark.parametrize("pads, kept, host", [
    ((0, 0, 1, 1), (0, 0, 1, 1), None),              # asymmetric: the LOADs pad it
    ((3, 0, 1, 2), (3, 0, 1, 2), None),              # past the kernel: the LOADs pad it too
    ((17, 0, 1, 16), (15, 0, 1, 15), (2, 0, 0, 1)),  # past MAX_PAD: the excess on the host
])
def test_split_pads_moves_only_what_the_loads_cannot_pad(pads, kept, host):
    out_h, out_w = 4 + pads[0] + pads[2] - 1, 4 + pads[1] + pads[3] - 1
    graph = Graph({"x": Tensor("x", (1, 1, 4, 4), np.int8, exponent=0),
                   "w": Tensor("w", (1, 1, 2, 2), np.int8, np.ones((1, 1, 2, 2), np.int8)),
                   "b": Tensor("b", (1,), np.int32, np.zeros(1, np.int32)),
                   "y": Tensor("y", (1, 1, out_h, out_w), np.int8)},
                  [Node("c", "qconv", ["x", "w", "b"], ["y"],
                        {"kernel": (2, 2), "stride": (1, 1), "pads": pads, "groups": 1,
                         "dilation": (1, 1), "shift": 0, "relu": False})], ["x"], ["y"]).check()
    x = {"x": np.arange(16, dtype=np.int8).reshape(1, 1, 4, 4)}
    expected = execute(graph, x)["y"]
    split = split_pads(graph.copy()).check()
    assert [n.op for n in split.nodes] == (["qconv"] if host is None else ["pad", "qconv"])
    assert split.node("c").attrs["pads"] == kept
    if host is not None:
        assert split.node("c/pad").attrs["pads"] == host
    np.testing.assert_array_equal(execute(split, x)["y"], expected)


def test_qdq_scales_are_exponents_or_other_scales():
    assert scale_exponent(np.float32(0.125), "n") == 3
    assert scale_exponent(np.array([4.0, 4.0]), "n") == -2
    assert read_scale(np.float32(0.125), "n") == (3, None)
    assert read_scale(np.float32(0.1), "n") == (None, float(np.float32(0.1)))
    with pytest.raises(GraphError, match=r"^n: scale 0.1 is not a power of two \(vdla's "
                                         r"requantisation by one shift needs one\)$"):
        scale_exponent(np.float32(0.1), "n")
    with pytest.raises(GraphError, match=r"^n: per-channel scales are supported for weights "
                                         r"and biases only \(an activation needs one scale per "
                                         r"tensor\)$"):
        read_scale(np.array([0.5, 0.25]), "n")
    exponent, scales = read_scale(np.array([0.5, 0.25]), "n", per_channel=True)
    assert exponent is None and scales.tolist() == [0.5, 0.25]
    for bad in (0.0, -0.5, np.inf):
        with pytest.raises(GraphError, match=r"^n: scale .* is not a finite positive number$"):
            read_scale(np.float32(bad), "n")
    # Subnormal in float32: their products with other scales underflow to zero.
    assert read_scale(np.finfo(np.float32).tiny, "n") == (126, None)
    for bad in (1e-45, 1e-39):
        with pytest.raises(GraphError, match=r"^n: scale \S+ \('s'\) is outside float32's "
                                             r"normal range \(1.17549e-38 to 3.40282e\+38\); "
                                             r"refused$"):
            read_scale(np.float32(bad), "n", name="s")


def test_qdq_pairs_become_exponents():
    graph = Graph({"x": Tensor("x", (1, 2), np.float32),
                   "s": Tensor("s", (), np.float32, np.float32(0.25)),
                   "z": Tensor("z", (), np.int8, np.int8(0)),
                   "q": Tensor("q", (1, 2), np.int8), "d": Tensor("d", (1, 2), np.float32),
                   "y": Tensor("y", (1, 2), np.float32)},
                  [Node("q", "quantize", ["x", "s", "z"], ["q"], {"axis": 1}),
                   Node("d", "dequantize", ["q", "s", "z"], ["d"], {"axis": 1}),
                   Node("r", "relu", ["d"], ["y"])], ["x"], ["y"]).check()
    read = read_qdq(graph.copy()).prune().check()
    assert [n.op for n in read.nodes] == ["relu"] and read.tensors["x"].exponent == 2
    shifted = graph.copy()
    shifted.tensors["z"].value = np.int8(3)
    assert read_qdq(shifted).tensors["x"].zero_point == 3
    bad = graph.copy()
    bad.tensors["z"].value = np.int16(3)
    with pytest.raises(GraphError, match=r"^node 'q' \(quantize\): zero point int16 \[3\] is not "
                                         r"supported: vdla quantises activations to int8 or uint8 "
                                         r"with one zero point per tensor$"):
        read_qdq(bad)
