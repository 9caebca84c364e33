"""The committed digits model and data (`benchmarks/models/digits.py`): what CI runs on.

CI never retrains; these tests check the committed files against each other,
with onnxruntime as the independent executor.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models"


@pytest.fixture(scope="module")
def data():
    return dict(np.load(MODELS / "digits_data.npz"))


@pytest.fixture(scope="module")
def model():
    return onnx.load(MODELS / "digits.onnx")


def test_the_files_are_small():
    assert sum((MODELS / name).stat().st_size
               for name in ("digits.onnx", "digits_data.npz")) < 200_000


def test_the_model_is_valid_and_uses_the_issue_op_set(model):
    onnx.checker.check_model(model, full_check=True)
    assert [opset.version for opset in model.opset_import if opset.domain == ""] == [17]
    assert {node.op_type for node in model.graph.node} == {
        "Conv", "BatchNormalization", "Relu", "Add", "MaxPool", "AveragePool", "Flatten", "Gemm"}
    (graph_input,) = model.graph.input
    dims = [d.dim_param or d.dim_value for d in graph_input.type.tensor_type.shape.dim]
    assert graph_input.name == "input" and dims == ["N", 1, 8, 8]
    assert [output.name for output in model.graph.output] == ["logits"]


def test_the_split_is_the_held_out_360_and_disjoint_calibration(data):
    images, labels, calibration = data["images"], data["labels"], data["calibration"]
    assert images.shape == (360, 1, 8, 8) and images.dtype == np.float32
    assert calibration.shape == (64, 1, 8, 8) and calibration.dtype == np.float32
    assert labels.shape == (360,) and set(labels.tolist()) == set(range(10))
    for tensor in (images, calibration):  # sklearn's pixels are 0..16, stored as pixels / 16
        assert np.array_equal(tensor * 16, np.round(tensor * 16)) and tensor.max() <= 1
    held_out = {image.tobytes() for image in images}
    assert not any(image.tobytes() in held_out for image in calibration)


def test_onnxruntime_reproduces_the_recorded_accuracy_and_logits(model, data):
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    logits = session.run(None, {"input": data["images"]})[0]
    np.testing.assert_allclose(logits, data["float_logits"], rtol=0, atol=1e-4)
    accuracy = (logits.argmax(axis=1) == data["labels"]).mean()
    assert accuracy == data["float_accuracy"]
    assert accuracy >= 0.97
