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


def test_exponents_hold_the_range_or_refuse_it():
    assert exponent_for(127.0 * 2 ** 24) == -24
    assert exponent_for(2.0 ** -31) == 30          # rounds to one step of the finest scale
    with pytest.raises(GraphError, match=r"^tensor 'c': its largest magnitude 2.13073e\+09 is "
                                         r"outside what vdla's power-of-two scales 2\*\*24 to "
                                         r"2\*\*-30 hold in int8 \(4.65661e-10 to 2.13071e\+09\); "
                                         r"refused rather than saturated$"):
        exponent_for(127.0 * 2 ** 24 * 1.00001, "tensor 'c'")
    with pytest.raises(GraphError, match=r"refused rather than rounded to zero$"):
        exponent_for(2.0 ** -32, "tensor 'c'")
    with pytest.raises(GraphError, match=r"^tensor 'c': calibration saw a non-finite value "
                                         r"\(nan\)$"):
        exponent_for(float("nan"), "tensor 'c'")


def _conv_model(weight, bias=None, tail=(), tail_inits=()):
    """x (1, 2, 6, 6) -> Conv(weight[, bias]) -> c, then ``tail`` nodes ending in y."""
    from onnx import TensorProto, helper

    from tests.graph.models import initializer, model_bytes
    inputs = ["x", "w"] + (["b"] if bias is not None else [])
    inits = [initializer("w", np.asarray(weight, np.float32))]
    if bias is not None:
        inits.append(initializer("b", np.asarray(bias, np.float32)))
    nodes = [helper.make_node("Conv", inputs, ["c" if tail else "y"], name="conv"), *tail]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                       [("y", TensorProto.FLOAT, None)], [*inits, *tail_inits])


def _samples(count=8):
    return np.random.default_rng(3).standard_normal((count, 2, 6, 6)).astype(np.float32)


def _against_onnxruntime(model: bytes, per_channel=False):
    """vdla's int8 result and onnxruntime's float one, on the calibration samples."""
    ort = pytest.importorskip("onnxruntime")
    from vdla.graph.network import quantize_graph
    samples = _samples()
    integer = quantize_graph(from_bytes(model), {"x": samples}, per_channel)
    session = ort.InferenceSession(model)
    got = np.concatenate([execute(integer, {"x": x[None]})["y"] for x in samples])
    want = np.concatenate([session.run(None, {"x": x[None]})[0] for x in samples])
    return got, want


WEIGHT = np.random.default_rng(1).standard_normal((3, 2, 3, 3)).astype(np.float32)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("factor, message", [
    (1e12, r"^tensor 'y': its largest magnitude 1.\d+e\+13 is outside what vdla's power-of-two "
           r"scales 2\*\*24 to 2\*\*-30 hold in int8 .*; refused rather than saturated$"),
    (1e30, r"^tensor 'y': its largest magnitude 1.\d+e\+31 is outside .*saturated$"),
    (1e-12, r"^tensor 'y': its largest magnitude 1.\d+e-11 is outside .*rounded to zero$"),
])
def test_activations_beyond_the_exponent_range_are_refused_not_saturated(factor, message):
    from vdla.graph.network import quantize_graph
    with pytest.raises(GraphError, match=message):
        quantize_graph(from_bytes(_conv_model(WEIGHT * factor)), {"x": _samples()})


def test_large_activations_within_the_range_track_onnxruntime():
    got, want = _against_onnxruntime(_conv_model(WEIGHT * 1e8))
    cosine = np.sum(got * want) / np.linalg.norm(got) / np.linalg.norm(want)
    assert cosine > 0.999


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("per_channel", [False, True])
def test_all_zero_weights_compute_their_bias(per_channel):
    """A zero weight has no range: its scale keeps the bias at the output's step."""
    bias = [0.1, -0.3, 7.5]
    got, want = _against_onnxruntime(_conv_model(np.zeros_like(WEIGHT), bias), per_channel)
    np.testing.assert_array_equal(want, np.broadcast_to(
        np.reshape(np.float32(bias), (1, 3, 1, 1)), want.shape))
    step = 2.0 ** -exponent_for(7.5)
    assert np.abs(got - want).max() <= step / 2


@pytest.mark.filterwarnings("error")
def test_a_zero_channel_and_a_zero_activation_take_sane_scales():
    from onnx import helper

    from tests.graph.models import initializer
    weight = WEIGHT.copy()
    weight[1] = 0
    got, want = _against_onnxruntime(_conv_model(weight, [0.1, -0.3, 0.2]), per_channel=True)
    assert np.sum(got * want) / np.linalg.norm(got) / np.linalg.norm(want) > 0.999
    step = 2.0 ** -exponent_for(np.abs(want).max())
    assert np.abs(got[:, 1] - np.float32(-0.3)).max() <= step / 2
    # conv -> relu is zero on every sample (its bias is below every sum): the next conv
    # still computes its own bias.
    tail = [helper.make_node("Relu", ["c"], ["r"], name="relu"),
            helper.make_node("Conv", ["r", "w2", "b2"], ["y"], name="conv2")]
    tail_inits = [initializer("w2", np.ones((2, 3, 1, 1), np.float32)),
                  initializer("b2", np.array([0.5, -3.0], np.float32))]
    got, want = _against_onnxruntime(_conv_model(WEIGHT, [-100.0] * 3, tail, tail_inits))
    assert np.abs(want).max() == 3.0
    np.testing.assert_allclose(got, want, atol=2.0 ** -6)


def test_all_zero_calibration_is_refused_saying_so():
    from vdla.graph.network import quantize_graph
    with pytest.raises(GraphError, match=r"^graph input 'x' is zero in every calibration sample: "
                                         r"it has no range to choose a scale from \(calibrate "
                                         r"with real samples\)$"):
        quantize_graph(from_bytes(_conv_model(WEIGHT)), {"x": np.zeros((4, 2, 6, 6),
                                                                       np.float32)})


def test_a_bias_beyond_int32_names_the_scales():
    from vdla.graph.network import quantize_graph
    graph = from_bytes(_conv_model(WEIGHT, [1e9, 0, 0]))
    with pytest.raises(GraphError, match=r"^node 'conv' \(conv\): its bias \(up to 1e\+09\) does "
                                         r"not fit int32 at the accumulator's scale 2\*\*-\d+ "
                                         r"\(the input's 2\*\*-\d+ times the weight's "
                                         r"2\*\*-\d+\)$"):
        quantize_graph(graph, {"x": _samples()})


def _qdq_power_of_two_conv(seed: int, relu: bool) -> bytes:
    """x -> Q/DQ(2**-4) -> Conv(DQ(int8 weight, 2**-5), DQ(int32 bias, 2**-9)) [-> Relu]
    -> Q/DQ(2**-7): symmetric int8, powers of two, so the requantisation is a shift by 2
    and a quarter of the outputs are ties."""
    from onnx import TensorProto, helper

    from tests.graph.models import initializer, model_bytes
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"], name="q_x"),
             helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xf"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["w", "sw", "z"], ["wf"], name="dq_w"),
             helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bf"], name="dq_b"),
             helper.make_node("Conv", ["xf", "wf", "bf"], ["c"], name="conv", pads=[1] * 4)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"], name="relu"))
    nodes += [helper.make_node("QuantizeLinear", ["r" if relu else "c", "sy", "z"], ["cq"],
                               name="q_y"),
              helper.make_node("DequantizeLinear", ["cq", "sy", "z"], ["y"], name="dq_y")]
    inits = [initializer(name, np.array(2.0 ** -e, np.float32))
             for name, e in (("sx", 4), ("sw", 5), ("sb", 9), ("sy", 7))]
    inits += [initializer("z", np.array(0, np.int8)), initializer("zb", np.array(0, np.int32)),
              initializer("w", rng.integers(-8, 9, (5, 3, 3, 3)).astype(np.int8)),
              initializer("b", rng.integers(-300, 300, 5).astype(np.int32))]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, [2, 3, 6, 6])],
                       [("y", TensorProto.FLOAT, [2, 5, 6, 6])], inits)


@pytest.mark.parametrize("relu", [False, True])
def test_a_qdq_models_power_of_two_layers_round_ties_as_onnxruntime(relu):
    """A QDQ model's layers round ties half to even (REQUANT_EVEN): identical to
    onnxruntime's int8 run, in numpy, on fsim and as the cpu target's C, and through a
    network file; a calibrated layer keeps half up."""
    ort = pytest.importorskip("onnxruntime")
    from vdla.graph import network_file
    from vdla.graph.network import compile_network
    from vdla.hw.config import load_config
    model = _qdq_power_of_two_conv(3, relu)
    x = (np.random.default_rng(4).integers(-100, 100, (2, 3, 6, 6)) / 16).astype(np.float32)
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": x})
    network = compile_network(from_bytes(model, batch=2), load_config("default"))
    (layer,) = [n for n in network.graph.nodes if n.op == "qconv"]
    assert layer.attrs["shift"] == 2 and layer.attrs["round_even"] is True
    (output,) = network.graph.outputs
    np.testing.assert_array_equal(execute(network.graph, {"x": x})[output], expected)
    loaded = network_file.loads(network_file.dumps(network))
    for target in ("accel", "cpu"):
        got = loaded.run({"x": x}, sim="fsim", target=target).outputs[output]
        np.testing.assert_array_equal(got, expected, err_msg=target)
    # The check can fail: half up (REQUANT) rounds this model's ties otherwise.
    layer.attrs.pop("round_even")
    assert np.any(execute(network.graph, {"x": x})[output] != expected)


def test_calibrated_layers_round_half_up(graphs):
    """vdla's own scales were chosen for REQUANT's half up: their layers keep it."""
    layers = [n for n in graphs[1].nodes if n.op in ("qconv", "qdense")]
    assert layers and not any("round_even" in n.attrs for n in layers)
