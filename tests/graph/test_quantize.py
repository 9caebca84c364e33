"""Power-of-two quantisation: scales, the one-shift requant with rounding folded in the bias."""

from __future__ import annotations

import numpy as np
import pytest

from tests.graph.models import images, residual_cnn
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.kernels import conv_sum, execute
from vdla.graph.passes import run_passes
from vdla.graph.quantize import exponent_for, quantize


@pytest.fixture(scope="module")
def graphs():
    floating = run_passes(from_bytes(residual_cnn(seed=4).SerializeToString(), batch=8))
    return floating, quantize(floating, {"input": images(96, seed=2)})


def test_exponent_is_the_finest_that_holds_the_range():
    assert exponent_for(1.0) == 6      # 127 / 2**6 = 1.98 holds 1.0; 2**7 would clip
    assert exponent_for(127.0) == 0
    assert exponent_for(128.0) == -1
    assert exponent_for(0.0) == 30     # nothing to hold: the finest scale


def test_every_layer_requantises_with_one_rounding_shift(graphs):
    floating, integer = graphs
    values = execute(integer, {"input": images(8, seed=6)}, keep=True)
    for node in integer.nodes:
        if node.op != "qconv":
            continue
        x, w, b = (values[name] for name in node.inputs)
        acc = conv_sum(x, w, node.attrs["stride"], node.attrs["pads"], np.int64,
                       node.attrs["groups"], node.attrs["dilation"])
        shift = node.attrs["shift"]
        # The bias holds the layer's bias plus 2**(shift-1): the hardware's plain
        # shift then rounds half up, which is floor(real + 1/2) of the exact quotient.
        real_bias = b.astype(np.int64) - (1 << shift >> 1)
        exact = (acc + real_bias[None, :, None, None]) / 2.0 ** shift
        expected = np.clip(np.floor(exact + 0.5), -128, 127)
        if node.attrs["relu"]:
            expected = np.maximum(expected, 0)
        np.testing.assert_array_equal(values[node.outputs[0]], expected)
        e_x, e_w = (integer.tensors[name].exponent for name in node.inputs[:2])
        assert integer.tensors[node.outputs[0]].exponent == e_x + e_w - shift


def test_int8_graph_tracks_the_float_graph(graphs):
    floating, integer = graphs
    x = {"input": images(64, seed=7)[:8]}
    want, got = execute(floating, x)["probs"], execute(integer, x)["probs"]
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.abs(got - want).max() < 0.05
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.75


def test_calibration_may_clip_outliers_for_resolution():
    from vdla.graph.quantize import best_exponent, quantization_error
    values = np.concatenate([np.full(1000, 0.5 + 1 / 128), [1.0]])
    # 1.0 needs e=6 (step 1/64); e=7 clips it to 127/128 but halves every other step.
    assert best_exponent(values) == 7
    assert quantization_error(values, 7) < quantization_error(values, 6)
    assert best_exponent(np.array([1.0, -1.0])) == 6


def test_a_float_model_needs_calibration(graphs):
    floating, _ = graphs
    with pytest.raises(GraphError, match=r"^tensor 'input' has no scale: calibrate with sample "
                                         r"inputs \(--calibration\) or give a QDQ model$"):
        quantize(floating)


def test_onnxruntime_asymmetric_activations_are_refused(tmp_path):
    quantization = pytest.importorskip("onnxruntime.quantization")
    import onnx
    model = residual_cnn(seed=4, batch=1)
    onnx.save(model, tmp_path / "f.onnx")

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"input": images(1, seed=s)} for s in range(4)])

        def get_next(self):
            return next(self.items, None)

    quantization.quantize_static(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), Reader(),
                                 quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=quantization.QuantType.QInt8,
                                 weight_type=quantization.QuantType.QInt8)
    from vdla.frontend.onnx import load
    graph = load(tmp_path / "q.onnx")
    # Its default activations have zero points (scales that are not powers of two import).
    with pytest.raises(GraphError, match=r"^node 'input_QuantizeLinear' \(quantize\): zero point "
                                         r"int8 \[-?\d+\] is not supported: vdla's accelerator is "
                                         r"symmetric int8"):
        run_passes(graph)
