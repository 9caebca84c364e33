"""`benchmarks/models/resnet18.py`: a valid ResNet-18 whose BatchNorms keep activations at scale."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime
import pytest

from benchmarks.models.resnet18 import (STATISTICS_IMAGES, build_resnet18, random_images)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("resnet18") / "resnet18.onnx"
    return path, build_resnet18(path, seed=3, batch=2)


def test_the_model_is_resnet18(built):
    path, model = built
    onnx.checker.check_model(str(path), full_check=True)
    ops = collections.Counter(node.op_type for node in model.graph.node)
    assert ops == {"Conv": 20, "BatchNormalization": 20, "Relu": 17, "Add": 8, "MaxPool": 1,
                   "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
    weights = sum(int(np.prod(init.dims)) for init in model.graph.initializer
                  if not init.name.endswith((".mean", ".var", ".scale", ".bias")))
    # torchvision's 11,689,512 parameters less the BNs' 4,800 scales and shifts and fc's bias
    assert weights == 11_689_512 - 2 * 4_800 - 1_000
    (graph_input,) = model.graph.input
    assert [d.dim_value for d in graph_input.type.tensor_type.shape.dim] == [2, 3, 224, 224]


def test_logits_are_finite_and_depend_on_the_image(built):
    path, _ = built
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    logits = session.run(None, {"input": random_images(2, seed=11)})[0]
    assert logits.shape == (2, 1000) and np.isfinite(logits).all()
    assert 0.3 < logits.std() < 10
    assert np.abs(logits[0] - logits[1]).mean() > 0.1 * logits.std()


def test_batchnorms_normalise_the_images_they_were_set_from(built):
    """On the statistics images, each BN's output per channel has its shift and scale."""
    path, model = built
    names = ["bn1", "layer4.1.bn2"]
    with_outputs = onnx.load(str(path))
    with_outputs.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    session = onnxruntime.InferenceSession(with_outputs.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    images = random_images(STATISTICS_IMAGES, seed=3 + 1)
    runs = [session.run(names, {"input": images[first:first + 2]})  # the model's batch of 2
            for first in range(0, len(images), 2)]
    initializers = {init.name: onnx.numpy_helper.to_array(init)
                    for init in model.graph.initializer}
    for index, name in enumerate(names):
        out = np.concatenate([run[index] for run in runs])  # (images, C, H, W)
        np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), initializers[f"{name}.bias"],
                                   atol=2e-3)
        np.testing.assert_allclose(out.std(axis=(0, 2, 3)), initializers[f"{name}.scale"],
                                   rtol=2e-3)


def test_the_same_seed_writes_the_same_bytes(tmp_path):
    build_resnet18(tmp_path / "a.onnx", seed=5)
    build_resnet18(tmp_path / "b.onnx", seed=5)
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def test_batch_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="^batch must be at least 1, not 0$"):
        build_resnet18(tmp_path / "x.onnx", batch=0)
