"""`bench.onnx_quantize`: onnxruntime's QDQ models of the digits network, each scheme's scales."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

from vdla.bench.onnx_quantize import qdq_scales, quantize_qdq, quantized_tensors

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models"
DIGITS = MODELS / "digits.onnx"


@pytest.fixture(scope="module")
def data():
    return dict(np.load(MODELS / "digits_data.npz"))


def _initializers(model):
    return {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}


def _accuracy(path, data):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return (session.run(None, {"input": data["images"]})[0].argmax(axis=1)
            == data["labels"]).mean()


def _folded_conv1_weight():
    """conv1's weight with bn1 folded in, from the float model (numpy, not onnxruntime)."""
    values = _initializers(onnx.load(DIGITS))
    gain = values["bn1.scale"] / np.sqrt(values["bn1.var"] + 1e-5)
    return values["conv1.weight"] * gain[:, None, None, None]


@pytest.mark.parametrize("scheme", ["int8", "int8-pow2", "int8-pow2-nearest"])
def test_symmetric_schemes(tmp_path, data, scheme):
    path = tmp_path / f"digits.{scheme}.onnx"
    model = quantize_qdq(DIGITS, data["calibration"], path, scheme)
    values = _initializers(model)
    scales = qdq_scales(model)
    zero_points = [v for name, v in values.items() if name.endswith("zero_point")]
    assert zero_points and all(v.dtype in (np.int8, np.int32) and not v.any() for v in zero_points)
    assert {"input", "add1", "logits"} <= set(scales)
    expected = {"input": float(np.abs(data["calibration"]).max()) / 127,
                "ConvBnFusion_W_conv1.weight": float(np.abs(_folded_conv1_weight()).max()) / 127}
    for name, scale in expected.items():
        if scheme != "int8":
            scale = 2.0 ** (np.ceil if scheme == "int8-pow2" else np.round)(np.log2(scale))
            assert np.log2(scales[name]) == int(np.log2(scales[name]))
        assert scales[name] == pytest.approx(scale, rel=1e-6)
    # Every bias is int32 at its Conv's or Gemm's input scale times weight scale.
    produced_by = {node.output[0]: node for node in model.graph.node}
    for node in model.graph.node:
        if node.op_type in ("Conv", "Gemm"):
            x, w, b = (produced_by[name] for name in node.input)
            assert values[b.input[0]].dtype == np.int32
            assert values[b.input[1]] == pytest.approx(
                values[x.input[1]] * values[w.input[1]], rel=1e-6)
    assert abs(_accuracy(path, data) - data["float_accuracy"]) <= 0.005


def test_per_channel_weight_scales(tmp_path, data):
    model = quantize_qdq(DIGITS, data["calibration"], tmp_path / "pc.onnx", "int8-channel")
    values = _initializers(model)
    np.testing.assert_allclose(values["ConvBnFusion_W_conv1.weight_scale"],
                               np.abs(_folded_conv1_weight()).max(axis=(1, 2, 3)) / 127,
                               rtol=1e-6)
    scales = qdq_scales(model)
    assert "input" in scales and "ConvBnFusion_W_conv1.weight" not in scales
    assert abs(_accuracy(tmp_path / "pc.onnx", data) - data["float_accuracy"]) <= 0.005


def test_uint8_activations(tmp_path, data):
    model = quantize_qdq(DIGITS, data["calibration"], tmp_path / "u8.onnx", "uint8")
    values = _initializers(model)
    assert values["input_zero_point"].dtype == np.uint8
    assert values["ConvBnFusion_W_conv1.weight_quantized"].dtype == np.int8
    assert abs(_accuracy(tmp_path / "u8.onnx", data) - data["float_accuracy"]) <= 0.005


def test_bad_arguments(tmp_path, data):
    with pytest.raises(ValueError, match=r"^unknown quantisation scheme 'int4' "
                                         r"\(known: int8, int8-pow2, int8-pow2-nearest, "
                                         r"int8-channel, uint8\)$"):
        quantize_qdq(DIGITS, data["calibration"], tmp_path / "x.onnx", "int4")
    fixed = onnx.load(DIGITS)
    fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 4
    onnx.save(fixed, tmp_path / "batch4.onnx")
    with pytest.raises(ValueError, match="^6 calibration images do not fill batches of 4 "
                                         r"\(the model's batch size\)$"):
        quantize_qdq(tmp_path / "batch4.onnx", data["calibration"][:6], tmp_path / "x.onnx")


def test_quantized_tensors_are_what_the_model_computes(tmp_path, data):
    path = tmp_path / "digits.int8-pow2.onnx"
    model = quantize_qdq(DIGITS, data["calibration"], path, "int8-pow2")
    images = data["images"][:20]
    tensors = quantized_tensors(path, {"input": images})
    scales = qdq_scales(model)
    assert set(tensors) == set(scales) - {name for name in scales if name.endswith(".weight")}
    assert all(tensor.dtype == np.int8 for tensor in tensors.values())
    # The input is quantised once: numpy's round-half-even of x / scale, clipped.
    np.testing.assert_array_equal(
        tensors["input"], np.clip(np.round(images / scales["input"]), -128, 127))
    # Exposing the tensors changes nothing: the logits are the plain session's.
    plain = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(tensors["logits"] * np.float32(scales["logits"]),
                                  plain.run(None, {"input": images})[0])
