"""`bench.onnx_builder`: checked models, and nodes measured as they are added."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

from vdla.bench.onnx_builder import GraphBuilder


def _small(feed=None):
    rng = np.random.default_rng(0)
    graph = GraphBuilder("small", feed=feed)
    weight = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    x = graph.node("Conv", ["x"], "conv", {"weight": weight, "bias": np.ones(4, np.float32)},
                   kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = graph.node("Relu", [x], "relu")
    graph.node("GlobalAveragePool", [x], "pool")
    return graph, weight


def test_fed_values_are_what_the_whole_model_computes():
    x = np.random.default_rng(1).standard_normal((2, 2, 5, 5)).astype(np.float32)
    graph, weight = _small({"x": x})
    model = graph.model({"x": [2, 2, 5, 5]}, {"pool": [2, 4, 1, 1]})
    assert [init.name for init in model.graph.initializer] == ["conv.weight", "conv.bias"]
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(graph.values["pool"], session.run(None, {"x": x})[0], rtol=1e-6)
    # numpy's own convolution of one output position as the independent reference
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = np.einsum("nchw,kchw->nk", padded[:, :, 0:3, 0:3], weight) + 1
    np.testing.assert_allclose(graph.values["conv"][:, :, 0, 0], expected, rtol=1e-5)


def test_without_a_feed_nothing_runs_and_symbolic_batches_are_kept():
    graph, _ = _small()
    assert graph.values is None
    model = graph.model({"x": ["N", 2, 5, 5]}, {"pool": ["N", 4, 1, 1]})
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"


def test_a_name_used_twice_is_refused():
    graph, _ = _small()
    with pytest.raises(ValueError, match="^graph 'small' already has a tensor named 'relu'$"):
        graph.node("Relu", ["conv"], "relu")


def test_a_data_set_batchnorm_normalises_its_feed_and_images_have_any_size():
    from vdla.bench.onnx_builder import random_images
    x = random_images(3, seed=2, size=20)
    assert x.shape == (3, 3, 20, 20) and abs(float(x.mean())) < 0.3 and 0.7 < x.std() < 1.3
    graph = GraphBuilder("bn", feed={"x": x})
    y = graph.batchnorm("x", "bn", np.random.default_rng(0))
    out = graph.values[y].astype(np.float64)
    scale, bias = graph.initializers["bn.scale"], graph.initializers["bn.bias"]
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), bias, atol=1e-5)
    np.testing.assert_allclose(out.std(axis=(0, 2, 3)), scale, rtol=1e-3)
