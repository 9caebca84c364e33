"""`benchmarks/models_status.py`: the light graphs' seeded weights, and each model's record."""

from __future__ import annotations

import time

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

from benchmarks.models_status import _bounded, light_models, model_status, seeded_weights
from benchmarks.models.zoo import _Net

OPTIONS = {"samples": 2, "seed": 0, "config": "default", "max_gmacs": 5.0}


@pytest.fixture(scope="module")
def squeezenet():
    return onnx.load(light_models()["squeezenet"])


def test_the_nine_light_graphs_are_found():
    assert sorted(light_models()) == [
        "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
        "shufflenet", "squeezenet", "vgg19", "zfnet512"]


def test_seeded_weights_replace_every_constant_of_shape_reproducibly(squeezenet):
    seeded = seeded_weights(squeezenet, seed=0)
    assert "ConstantOfShape" in {node.op_type for node in squeezenet.graph.node}
    assert "ConstantOfShape" not in {node.op_type for node in seeded.graph.node}
    assert seeded.SerializeToString() == seeded_weights(squeezenet, seed=0).SerializeToString()
    assert seeded.SerializeToString() != seeded_weights(squeezenet, seed=1).SerializeToString()
    weights = {init.name: numpy_helper.to_array(init) for init in seeded.graph.initializer}
    conv = weights["conv1_w_0"]   # 64 x 3 x 3 x 3: He-normal, std sqrt(2 / 27)
    assert conv.shape == (64, 3, 3, 3)
    assert abs(conv.std() / np.sqrt(2 / 27) - 1) < 0.15
    rng = np.random.default_rng(0)
    images = rng.standard_normal((2, 1, 3, 224, 224)).astype(np.float32)
    session = onnxruntime.InferenceSession(seeded.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    first, second = (session.run(None, {"data_0": image})[0] for image in images)
    assert first.shape == (1, 1000, 1, 1) and not np.allclose(first, second, atol=1e-6)


def test_seeded_folded_batchnorms_are_scales_and_shifts():
    densenet = seeded_weights(onnx.load(light_models()["densenet121"]), seed=0)
    weights = {init.name: numpy_helper.to_array(init) for init in densenet.graph.initializer}
    # ConstantOfShapes that reach a Mul and an Add through Unsqueezes (the first two
    # blocks' are real initialisers, kept).
    scale, shift = weights["conv2_2/x1/bn_w_0"], weights["conv2_2/x1/bn_b_0"]
    assert 0.75 <= scale.min() and scale.max() <= 1.25 and np.ptp(scale) > 0.1
    assert abs(shift.mean()) < 0.1 and shift.min() < 0 < shift.max()
    variances = [name for node in densenet.graph.node if node.op_type == "BatchNormalization"
                 for name in node.input[4:5] if not name.startswith(("conv1/", "conv2_1/"))]
    assert len(variances) > 100 and all(0.5 <= weights[n].min() for n in variances)


def _tiny(seed: int = 0):
    net = _Net("tiny", seed, {"input": (1, 3, 8, 8)})
    x = net.node("Relu", [net.conv("input", "conv", 8, 3)], "relu")
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "pool")], "flatten", axis=1)
    return net.model([net.gemm(x, "fc", 4)])


def _unsupported(seed: int = 0):
    """A model vdla refuses at import: an operator it has no converter for."""
    net = _Net("unsupported", seed, {"input": (1, 3, 8, 8)})
    x = net.node("Einsum", [net.conv("input", "conv", 8, 3)], "einsum", equation="nchw->nchw")
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "pool")], "flatten", axis=1)
    return net.model([net.gemm(x, "fc", 4)])


def test_a_refused_model_records_the_stage_and_vdlas_line():
    record = model_status("unsupported", "test", _unsupported(), True, OPTIONS)
    assert (record["compiles"], record["stage"]) == (False, "import")
    assert record["refusal"].startswith("node 'einsum' (Einsum): operator Einsum is not "
                                        "supported")
    assert "crash" not in record


def test_a_model_over_the_budget_is_compiled_but_not_run():
    model = _tiny()
    record = model_status("tiny", "test", model, True, {**OPTIONS, "max_gmacs": 1e-9})
    assert record["compiles"] is True and record["refusal"] is None
    assert record["accel_mac_share"] == 1.0 and record["batch"] == 1
    assert record["run"].startswith("not run: 0.00 G MACs per sample, over --max-gmacs")
    assert "fsim" not in record


def _sleeps():
    time.sleep(30)


def test_a_model_past_its_time_is_stopped_and_says_where():
    began = time.monotonic()
    record = _bounded(("slow", "test", _sleeps, False, OPTIONS, None), timeout=1)
    assert time.monotonic() - began < 10
    assert record["timeout"] == "stopped after 1 s during start"
    assert record["compiles"] is None
