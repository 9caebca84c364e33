"""Fixed-point requantisation: the arithmetic against exact fractions, every tier bit-exact,
and models onnxruntime quantised with arbitrary scales within 1 LSB of onnxruntime."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from vdla.compiler.cpu import CpuKernel
from vdla.compiler.accel.driver import compile_op
from vdla.compiler.errors import ShapeError
from vdla.compiler.ops import Conv2d, Dense, Epilogue
from vdla.compiler.requant import CLAMP, fixed_point, fixed_point_per_channel, requantize
from vdla.graph.errors import GraphError
from vdla.hw.config import load_config
from vdla.runtime.runner import AccelRunner

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models"
# compiler.requant's bound: away from a rounding boundary by more than this, exact.
EXACT_BEYOND = Fraction(12, 1000)


def _sums(rng) -> np.ndarray:
    """Random int32 sums of every magnitude, with int32's extremes and zero."""
    bits = rng.integers(0, 32, 4000)
    values = rng.integers(-(1 << 31), 1 << 31, 4000, dtype=np.int64) >> bits
    return np.concatenate([values, [0, 1, -1, (1 << 31) - 1, -(1 << 31)]])


@pytest.mark.parametrize("seed", range(3))
def test_multiplier_is_exact_rounding_away_from_ties(seed):
    rng = np.random.default_rng(seed)
    # Requantisation factors from far below one output step per sum to far above.
    for scale in np.exp(rng.uniform(np.log(1e-9), np.log(300.0), 40)):
        multiplier, pre_shift, shift = fixed_point(scale)
        values = _sums(rng)
        ours = np.clip(requantize(values, multiplier, pre_shift, shift), -128, 127)
        # Exact in Python integers: v * n / d with scale == n / d.
        n, d = float(scale).as_integer_ratio()
        products = values.astype(object) * n
        exact = np.clip(((2 * products + d) // (2 * d)).astype(np.int64), -128, 127)
        assert np.abs(ours - exact).max() <= 1, scale
        # How far v * s lies from the nearest k + 1/2, in output steps.
        from_tie = np.abs((2 * (products % d) - d).astype(float)) / (2 * d)
        away = from_tie > float(EXACT_BEYOND)
        np.testing.assert_array_equal(ours[away], exact[away], err_msg=f"{scale}")


def test_multiplier_arithmetic_is_the_documented_integers():
    # floor((floor(u / 2**(q-1)) + 1) / 2) is floor(u / 2**q + 1/2), with the clamp first.
    rng = np.random.default_rng(7)
    for multiplier, pre_shift, shift in [(21810, 2, 22), (1, 0, 0), (CLAMP, 31, 31),
                                         (12345, 0, 1), (30000, 5, 17)]:
        values = _sums(rng)
        t = np.clip(values >> pre_shift, -CLAMP, CLAMP) * multiplier
        expected = [(Fraction(int(u), 1 << shift) + Fraction(1, 2)).__floor__() for u in t]
        assert requantize(values, multiplier, pre_shift, shift).tolist() == expected


def test_per_channel_multipliers_share_the_shifts():
    scales = np.array([0.0013, 0.004, 0.0007, 0.0021])
    multipliers, pre_shift, shift = fixed_point_per_channel(scales)
    assert pre_shift == max(fixed_point(s)[1] for s in scales)
    assert multipliers.max() <= CLAMP < round(0.004 * 2.0 ** (pre_shift + shift + 1))
    np.testing.assert_allclose(multipliers * 2.0 ** -(pre_shift + shift), scales, rtol=2e-4)
    values = _sums(np.random.default_rng(3))
    for k, scale in enumerate(scales):  # each channel within one step of exact rounding
        n, d = float(scale).as_integer_ratio()
        exact = np.clip(((2 * values.astype(object) * n + d) // (2 * d)).astype(np.int64),
                        -128, 127)
        ours = np.clip(requantize(values, int(multipliers[k]), pre_shift, shift), -128, 127)
        assert np.abs(ours - exact).max() <= 1


def test_fixed_point_picks_fifteen_bits_and_the_least_pre_shift():
    multiplier, pre_shift, shift = fixed_point(0.0013)
    assert 1 << 14 <= multiplier <= CLAMP
    assert CLAMP * 0.0013 * 2 ** pre_shift >= 129 > CLAMP * 0.0013 * 2 ** (pre_shift - 1)
    assert abs(multiplier * 2.0 ** -(pre_shift + shift) / 0.0013 - 1) < 2 ** -14
    assert fixed_point(2.0) == (1 << 14, 0, 13)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"^requantisation scale must be finite and > 0"):
            fixed_point(bad)


def test_epilogue_checks_its_fixed_point_fields():
    with pytest.raises(ShapeError, match=r"^multiplier: expected an integer in 1\.\.32767 for a "
                                         r"fixed-point multiplier, got 40000$"):
        Epilogue(True, 3, False, 40000)
    with pytest.raises(ShapeError, match=r"^pre_shift: expected an integer in 0\.\.31"):
        Epilogue(True, 3, False, 100, 32)
    with pytest.raises(ShapeError, match=r"^pre_shift 2 needs a multiplier$"):
        Epilogue(True, 3, False, None, 2)
    # Layers without one keep the dict (and so the program files and tuning logs) they had.
    assert "multiplier" not in Dense(1, 8, 8, bias=True, shift=3).to_dict()


OPS = [Conv2d(2, 13, 11, 10, 9, kernel=3, padding=1, bias=True, multiplier=21810, pre_shift=2,
              shift=22),
       Conv2d(1, 40, 72, 9, 9, kernel=3, padding=1, bias=True, relu=True, per_channel=True,
              shift=20),
       Conv2d(1, 32, 32, 9, 9, kernel=3, padding=1, groups=32, bias=True, per_channel=True,
              pre_shift=1, shift=18),
       Dense(3, 300, 21, bias=True, per_channel=True, pre_shift=3, shift=20),
       Conv2d(1, 20, 12, 9, 9, kernel=3, stride=2, padding=1, bias=True, relu=True,
              multiplier=CLAMP, pre_shift=0, shift=1),
       Dense(3, 300, 21, bias=True, multiplier=20000, pre_shift=3, shift=20),
       Dense(3, 37, 21, bias=True, relu=True, multiplier=23456, pre_shift=0, shift=0)]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.describe())
@pytest.mark.slow
def test_fsim_and_cpu_target_compute_the_reference_integers(op):
    inputs = op.random_inputs(np.random.default_rng(1), bias_range=1 << 16)
    expected = op.reference(**inputs)
    assert len(np.unique(expected)) > 1 or op.relu
    config = load_config("default")
    program = compile_op(op, config)
    np.testing.assert_array_equal(AccelRunner(config).run(program, inputs).outputs["out"], expected)
    kernel = CpuKernel(op, "int8")
    kernel.set_weights(inputs["weight"], inputs["bias"])
    np.testing.assert_array_equal(kernel.run(inputs["data"]), expected)


@pytest.mark.rtl
def test_rtl_computes_the_reference_integers():
    config = load_config("tiny")
    device = AccelRunner(config, sim="rtl")
    for op in OPS[:3]:
        inputs = op.random_inputs(np.random.default_rng(2), bias_range=1 << 16)
        got = device.run(compile_op(op, config), inputs).outputs["out"]
        np.testing.assert_array_equal(got, op.reference(**inputs), err_msg=op.describe())


def test_the_gpu_target_refuses_a_multiplier():
    from vdla.compiler.gpu.codegen import generate_op_cuda
    from vdla.compiler.gpu.schedule import GpuSchedule
    with pytest.raises(ShapeError, match=r"the gpu target has no fixed-point multiplier"):
        generate_op_cuda(OPS[2], "int8", GpuSchedule())


# -- models onnxruntime quantised (symmetric int8, its own scales) -------------------------

def _onnxruntime_model(tmp_path, source, calibration, scheme):
    pytest.importorskip("onnxruntime")
    from vdla.bench.onnx_quantize import quantize_qdq
    path = tmp_path / f"{scheme}.onnx"
    quantize_qdq(source, calibration, path, scheme)
    return path


def _digits(tmp_path_factory, scheme):
    data = np.load(MODELS / "digits_data.npz")
    path = _onnxruntime_model(tmp_path_factory.mktemp("digits"), MODELS / "digits.onnx",
                              data["calibration"], scheme)
    return path, data["images"][:64]


def _random(tmp_path_factory, scheme):
    import onnx

    from tests.graph.models import images, residual_cnn
    folder = tmp_path_factory.mktemp("random")
    onnx.save(residual_cnn(seed=5, channels=16), folder / "f.onnx")
    return (_onnxruntime_model(folder, folder / "f.onnx", images(16, seed=2), scheme),
            images(8, seed=9))


@pytest.fixture(scope="module")
def quantised(tmp_path_factory):
    """``quantised("digits_int8")``: (path, inputs) of a model onnxruntime quantised, built
    once: its per-tensor scales (``int8``: one multiplier a layer) or per-channel weight
    scales (``channel``)."""
    built = {}

    def get(name: str):
        if name not in built:
            source, scheme = name.split("_")
            build = _digits if source == "digits" else _random
            built[name] = build(tmp_path_factory, {"int8": "int8",
                                                   "channel": "int8-channel"}[scheme])
        return built[name]
    return get


MODELS_QUANTISED = ["digits_int8", "random_int8", "digits_channel", "random_channel"]


def _against_onnxruntime(path, x) -> dict[str, dict]:
    from vdla.bench.onnx_quantize import node_differences, quantized_tensors
    from vdla.frontend.onnx import load
    from vdla.graph.network import quantize_graph
    integer = quantize_graph(load(path, batch=len(x)))
    return node_differences(integer, {"input": x}, quantized_tensors(path, {"input": x}))


@pytest.mark.parametrize("model", MODELS_QUANTISED)
def test_onnxruntime_int8_model_is_within_one_lsb_per_node(model, quantised):
    path, x = quantised(model)
    rows = _against_onnxruntime(path, x)
    assert {row["op"] for row in rows.values()} >= {"qconv", "qadd"}
    for name, row in rows.items():
        assert row["max_lsb"] <= 1, (name, row)
        # Host operators compute as onnxruntime's float32 QDQ does: the same integers.
        if row["op"] not in ("qconv", "qdense"):
            assert row["mismatch_rate"] == 0, (name, row)
        else:  # a 15-bit multiplier against a float32 one: only near-ties differ
            assert row["mismatch_rate"] < 0.01, (name, row)


@pytest.mark.parametrize("model", MODELS_QUANTISED)
@pytest.mark.slow
def test_onnxruntime_int8_model_runs_bit_exact_on_fsim_and_cpu(model, quantised):
    from vdla.frontend.onnx import load
    from vdla.graph import network_file
    from vdla.graph.kernels import execute
    from vdla.graph.network import compile_network
    path, x = quantised(model)
    x = x[:4]
    network = compile_network(load(path, batch=len(x)), load_config("default"))
    layers = [n for n in network.graph.nodes if n.op in ("qconv", "qdense")]
    per_channel = model.endswith("channel")
    assert layers and all(bool(n.attrs.get("per_channel")) == per_channel
                          and bool(n.attrs.get("multiplier")) != per_channel for n in layers)
    reference = execute(network.graph, {"input": x}, keep=True)
    loaded = network_file.loads(network_file.dumps(network))
    for target in ("accel", "cpu"):
        result = loaded.run({"input": x}, sim="fsim", target=target, keep=True)
        for name, array in result.tensors.items():
            np.testing.assert_array_equal(array, reference[name], err_msg=f"{target} {name}")


def test_network_file_refuses_bad_fixed_point_attributes(quantised):
    from tests.graph.test_network_file import _resign
    from vdla.frontend.onnx import load
    from vdla.graph import network_file
    from vdla.graph.network import compile_network
    path, _ = quantised("digits_int8")
    data = network_file.dumps(compile_network(load(path, batch=1), load_config("tiny"),
                                              target="cpu"))

    def node(header, op):
        return next(n for n in header["nodes"] if n["op"] == op)
    for change, message in [
            (lambda h: node(h, "qconv")["attrs"].update(multiplier=1 << 15),
             r"node 'conv1' \('qconv'\): attribute multiplier=32768 is out of range$"),
            (lambda h: node(h, "quantize_input")["attrs"].update(scale=-1.0),
             r"node 'input/quantize' \('quantize_input'\): attribute scale=-1.0 must be a "
             r"finite number > 0$"),
            (lambda h: node(h, "qadd")["attrs"].update(shift=3),
             r"node 'add1' \('qadd'\): attributes \['relu', 'scale_a', 'scale_b', 'shift'\], "
             r"expected \['relu', 'shift', 'shift_a', 'shift_b'\] or \['relu', 'scale_a', "
             r"'scale_b'\] or \['relu', 'scale_a', 'scale_b', 'zero_a', 'zero_b', "
             r"'zero_y'\]$"),
            (lambda h: h["tensors"][0].update(scale="big"),
             r"tensor 'input': dtype 'float32', exponent or scale is not supported$")]:
        with pytest.raises(GraphError, match=f"^network file: {message}"):
            network_file.loads(_resign(data, change))


@pytest.mark.parametrize("model", ["digits_int8", "digits_channel"])
def test_fixed_point_graph_exports_as_qdq_and_comes_back_the_same(model, quantised):
    from vdla.frontend.onnx import from_bytes, load
    from vdla.graph.export import to_qdq
    from vdla.graph.kernels import execute
    from vdla.graph.network import quantize_graph
    path, x = quantised(model)
    integer = quantize_graph(load(path, batch=len(x)))
    back = quantize_graph(from_bytes(to_qdq(integer).SerializeToString(), batch=len(x)))
    assert [(n.op, n.attrs) for n in back.nodes] == [(n.op, n.attrs) for n in integer.nodes]
    np.testing.assert_array_equal(execute(back, {"input": x})["logits"],
                                  execute(integer, {"input": x})["logits"])


@pytest.mark.slow
def test_per_channel_power_of_two_weights_run_bit_exact_and_export(tmp_path):
    import onnx

    from tests.cli.click_runner import invoke
    from tests.graph.models import images, residual_cnn
    from vdla.cli.main import cli
    from vdla.frontend.onnx import load
    from vdla.graph.kernels import execute
    from vdla.graph.network import compile_network, quantize_graph
    onnx.save(residual_cnn(seed=5, channels=16), tmp_path / "f.onnx")
    x = images(2, seed=9)
    network = compile_network(load(tmp_path / "f.onnx", batch=2), load_config("default"),
                              {"input": images(16, seed=2)}, per_channel=True)
    layers = [n for n in network.graph.nodes if n.op in ("qconv", "qdense")]
    assert any(n.attrs.get("per_channel") for n in layers)
    for node in layers:  # per-channel powers of two: every multiplier one
        if node.attrs.get("per_channel"):
            bias = network.graph.value(node.inputs[2])
            multipliers = bias[len(bias) // 2:]
            assert all(m & (m - 1) == 0 for m in multipliers.tolist())
    reference = execute(network.graph, {"input": x}, keep=True)
    for target in ("accel", "cpu"):
        result = network.run({"input": x}, sim="fsim", target=target, keep=True)
        for name, array in result.tensors.items():
            np.testing.assert_array_equal(array, reference[name], err_msg=f"{target} {name}")
    np.save(tmp_path / "cal.npy", images(16, seed=2))
    result = invoke(cli, ["quantize", tmp_path / "f.onnx", "--calibration", tmp_path / "cal.npy",
                          "--batch", 2, "--per-channel", "-o", tmp_path / "q.onnx"])
    assert result.exit_code == 0, result.output
    back = quantize_graph(load(tmp_path / "q.onnx", batch=2))
    (output,) = network.graph.outputs
    np.testing.assert_array_equal(execute(back, {"input": x})[output], reference[output])


def _qdq_conv(s_x: float, s_w: float, s_y: float) -> bytes:
    """x -> Q/DQ(s_x) -> Conv(DQ(int8 weight, s_w)) -> Q/DQ(s_y): scales as written."""
    from onnx import TensorProto, helper

    from tests.graph.models import initializer, model_bytes
    weight = np.random.default_rng(0).integers(-100, 100, (3, 2, 3, 3)).astype(np.int8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"], name="q_x"),
             helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xf"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["w", "sw", "z"], ["wf"], name="dq_w"),
             helper.make_node("Conv", ["xf", "wf"], ["c"], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "sy", "z"], ["cq"], name="q_y"),
             helper.make_node("DequantizeLinear", ["cq", "sy", "z"], ["y"], name="dq_y")]
    inits = [initializer(name, np.array(value, np.float32))
             for name, value in (("sx", s_x), ("sw", s_w), ("sy", s_y))]
    inits += [initializer("z", np.array(0, np.int8)), initializer("w", weight)]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                       [("y", TensorProto.FLOAT, [1, 3, 4, 4])], inits)


@pytest.mark.parametrize("scales, message", [
    ((1e-30, 1e-30, 0.1), r"the accumulator's scale \(input's times weight's\) 0 leaves "
                          r"float32's normal range \(1.17549e-38 to 3.40282e\+38\); its scales: "
                          r"input 1e-30 \('x'\), weight 1e-30 \('wf'\), output 0.1 \('y'\)$"),
    ((1e20, 1e20, 0.1), r"the accumulator's scale \(input's times weight's\) inf leaves "),
    ((1e19, 1e19, 1e-10), r"the requantisation factor \(accumulator's over output's\) inf "
                          r"leaves "),
    ((1e-20, 1e-15, 1e10), r"the requantisation factor \(accumulator's over output's\) "
                           r"1.4013e-45 leaves "),
])
@pytest.mark.filterwarnings("error")
def test_scale_products_float32_cannot_hold_are_refused(scales, message):
    """onnxruntime multiplies scales in float32; where that underflows or overflows, the
    layer's requantisation factor would be 0 or infinite: refused, naming the scales."""
    from vdla.frontend.onnx import from_bytes
    from vdla.graph.network import quantize_graph
    with pytest.raises(GraphError, match=r"^node 'conv' \(conv\): " + message):
        quantize_graph(from_bytes(_qdq_conv(*scales)))


def test_subnormal_qdq_scales_are_refused_naming_the_tensor():
    from vdla.frontend.onnx import from_bytes
    from vdla.graph.network import quantize_graph
    with pytest.raises(GraphError, match=r"^node 'dq_w' \(dequantize\): scale 1.4013e-45 \('sw'\) "
                                         r"is outside float32's normal range \(1.17549e-38 to "
                                         r"3.40282e\+38\); refused$"):
        quantize_graph(from_bytes(_qdq_conv(0.1, 1e-45, 0.1)))


@pytest.mark.filterwarnings("error")
def test_add_scale_ratios_float32_cannot_hold_are_refused():
    """A QDQ add whose operand-to-output scale ratio overflows float32 (onnxruntime's
    QLinearAdd computes it there): refused, naming the scales."""
    from onnx import TensorProto, helper

    from tests.graph.models import initializer, model_bytes
    from vdla.frontend.onnx import from_bytes
    from vdla.graph.network import quantize_graph
    nodes = [helper.make_node("QuantizeLinear", [x, "sx", "z"], [f"{x}q"], name=f"q_{x}")
             for x in ("a", "b")]
    nodes += [helper.make_node("DequantizeLinear", [f"{x}q", "sx", "z"], [f"{x}f"],
                               name=f"dq_{x}") for x in ("a", "b")]
    nodes += [helper.make_node("Add", ["af", "bf"], ["s"], name="add"),
              helper.make_node("QuantizeLinear", ["s", "sy", "z"], ["sq"], name="q_y"),
              helper.make_node("DequantizeLinear", ["sq", "sy", "z"], ["y"], name="dq_y")]
    inits = [initializer("sx", np.array(3e30, np.float32)),
             initializer("sy", np.array(1e-10, np.float32)), initializer("z", np.array(0, np.int8))]
    model = model_bytes(nodes, [("a", TensorProto.FLOAT, [1, 4]), ("b", TensorProto.FLOAT, [1, 4])],
                        [("y", TensorProto.FLOAT, [1, 4])], inits)
    with pytest.raises(GraphError, match=r"^node 'add' \(add\): the ratio of an operand's scale "
                                         r"to the output's inf leaves float32's normal range "
                                         r"\(1.17549e-38 to 3.40282e\+38\); its scales: 3e\+30 "
                                         r"\('a'\), 3e\+30 \('b'\), output 1e-10 \('y'\)$"):
        quantize_graph(from_bytes(model))
