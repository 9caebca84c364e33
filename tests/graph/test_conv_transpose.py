"""ConvTranspose (`graph.ops.conv_transpose`): float semantics against onnx's reference and
onnxruntime, one-line refusals, the phase rewrite (`split_phases`) bit-identical to the
zero-inserted conv, BatchNorm and ReLU folded, a network through a file, its QDQ export, and
fsim, the RTL and the cpu target bit-exact."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from tests.graph.models import initializer, model_bytes
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.export import to_qdq
from vdla.graph.ir import Node, Tensor
from vdla.graph.kernels import execute, run_node
from vdla.graph.network import compile_network, quantize_graph
from vdla.graph.network_file import HOST_SHAPES, dumps, loads
from vdla.graph.ops.conv_transpose import axis_phases
from vdla.graph.passes import INTEGER_PIPELINE, PIPELINE, run_passes
from vdla.graph.quantize import quantize
from vdla.hw.config import PRESETS


def _model(rng, channels=4, out=6, group=1, size=(5, 4), kernel=(3, 3), bias=True,
           relu=False, batchnorm=False, **attrs) -> bytes:
    weight = (rng.standard_normal((channels, out // group, *kernel)) * 0.3).astype(np.float32)
    inputs = ["x", "w"] + (["b"] if bias else [])
    inits = [initializer("w", weight)]
    if bias:
        inits.append(initializer("b", rng.standard_normal(out).astype(np.float32)))
    nodes = [helper.make_node("ConvTranspose", inputs, ["t"], name="up", group=group, **attrs)]
    last = "t"
    if batchnorm:
        names = ["scale", "beta", "mean", "var"]
        inits += [initializer(name, rng.uniform(0.5, 1.5, out).astype(np.float32))
                  for name in names]
        nodes.append(helper.make_node("BatchNormalization", ["t", *names], ["n"], name="bn"))
        last = "n"
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["r"], name="relu"))
        last = "r"
    nodes[-1].output[0] = "y"
    return model_bytes(nodes, [("x", TensorProto.FLOAT, ("N", channels, *size))],
                       [("y", TensorProto.FLOAT, None)], inits)


def _x(rng, count, channels=4, size=(5, 4)):
    return rng.standard_normal((count, channels, *size)).astype(np.float32)


# Strides, pads, output_padding, dilations, auto_pad and pads past the kernel's extent.
_CASES = [
    dict(strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(strides=[2, 3], pads=[0, 1, 2, 0], output_padding=[1, 2]),
    dict(strides=[3, 2], dilations=[2, 1], pads=[2, 0, 1, 3]),
    dict(strides=[1, 1], pads=[3, 2, 3, 1]),
    dict(strides=[2, 2], pads=[5, 3, 4, 2]),
    dict(strides=[4, 4], dilations=[2, 2], output_padding=[1, 3]),
    dict(strides=[3, 3], pads=[0, 0, 6, 7]),
    dict(strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(strides=[2, 1], auto_pad="SAME_LOWER", kernel_shape=[3, 3]),
    dict(strides=[2, 2], auto_pad="VALID"),
]


@pytest.mark.parametrize("attrs", _CASES)
def test_float_semantics_match_onnx_reference(attrs):
    rng = np.random.default_rng(0)
    data = _model(rng, **attrs)
    x = _x(rng, 2)
    want = ReferenceEvaluator(onnx.load_from_string(data)).run(None, {"x": x})[0]
    got = execute(from_bytes(data), {"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [dict(_CASES[1], group=2), dict(_CASES[2], group=2),
                                   dict(strides=[2, 2], output_shape=[10, 8]),
                                   dict(strides=[2, 2], output_shape=[9, 7],
                                        auto_pad="SAME_UPPER")])
def test_groups_and_output_shape_match_onnxruntime(attrs):
    # onnx's reference mixes up the groups and ignores output_shape: onnxruntime instead.
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(1)
    data = _model(rng, **attrs)
    x = _x(rng, 1)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    got = execute(from_bytes(data, batch=1), {"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _refused(data, message):
    with pytest.raises(GraphError, match=message):
        from_bytes(data)


def test_what_cannot_be_imported_is_refused_in_one_line():
    rng = np.random.default_rng(2)
    _refused(_model(rng, strides=[2, 2], pads=[1, 1, 1, 1], output_shape=[9, 7]),
             r"^node 'up' \(ConvTranspose\): pads \[1, 1, 1, 1\] and output_shape both given: "
             r"give one of them$")
    _refused(_model(rng, auto_pad="VALID", output_shape=[7, 6]),
             r"^node 'up' \(ConvTranspose\): output_shape with auto_pad=VALID: give one of "
             r"them$")
    # Shape inference allows pads that leave only output_padding's rows.
    _refused(_model(rng, size=(1, 4), kernel=(1, 1), strides=[3, 1], pads=[1, 0, 0, 0],
                    output_padding=[2, 0]),
             r"^node 'up' \(ConvTranspose\): pads \[1, 0, 0, 0\] crop away every input "
             r"pixel: the output would be its bias alone$")
    computed = model_bytes([helper.make_node("Relu", ["w0"], ["w"]),
                            helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up")],
                           [("x", TensorProto.FLOAT, (1, 4, 5, 4)),
                            ("w0", TensorProto.FLOAT, (4, 3, 3, 3))],
                           [("y", TensorProto.FLOAT, None)])
    _refused(computed, r"^node 'up' \(ConvTranspose\): its weight 'w' must be a constant$")
    one_d = model_bytes([helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up")],
                        [("x", TensorProto.FLOAT, (1, 4, 5))], [("y", TensorProto.FLOAT, None)],
                        [initializer("w", np.ones((4, 3, 3), np.float32))])
    _refused(one_d, r"^node 'up' \(ConvTranspose\): input 'x' has shape \(1, 4, 5\); expected "
                    r"rank 4$")


def test_one_axis_of_phases_reads_what_the_zero_inserted_conv_reads():
    """Each plan against the definition, on a random row: conv of the zero-inserted row
    (numpy's correlate) equals the phase convs interleaved."""
    rng = np.random.default_rng(3)
    for stride, crop, pad, kernel, dilation, size in [(2, 0, 2, 4, 1, 5), (2, 0, 1, 2, 1, 8),
                                                      (3, 2, 0, 3, 2, 4), (4, 0, 2, 3, 2, 3),
                                                      (3, 4, 0, 2, 1, 6), (2, 1, 0, 3, 1, 1)]:
        x = rng.integers(-9, 9, size)
        taps = rng.integers(-9, 9, kernel)
        zeros = np.zeros((size - 1) * stride + 1, np.int64)
        zeros[::stride] = x
        zeros = np.pad(zeros[crop:], (pad, pad + 1))
        dilated = np.zeros((kernel - 1) * dilation + 1, np.int64)
        dilated[::dilation] = taps
        want = np.correlate(zeros, dilated, "valid")
        plan = axis_phases(size, stride, crop, pad, kernel, dilation, len(want))
        padded = np.pad(x[plan.start:plan.end], plan.pads)
        phases = np.zeros((stride, plan.kernel), np.int64)
        for phase, tap, position in plan.taps:
            phases[phase, position] = taps[tap]
        got = np.stack([np.correlate(padded, row, "valid") for row in phases], axis=1)
        assert got.shape[0] == plan.outputs
        head, tail = plan.crop
        np.testing.assert_array_equal(got.reshape(-1)[head:len(got.reshape(-1)) - tail], want)


def _without_phases(graph, calibration, per_channel):
    floating = run_passes(graph, PIPELINE)
    return run_passes(quantize(floating, calibration, per_channel),
                      [p for p in INTEGER_PIPELINE if p[0] != "split_phases"])


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("attrs", [_CASES[0], dict(_CASES[1], group=2), _CASES[2], _CASES[4],
                                   dict(_CASES[5], group=2), _CASES[6]])
def test_the_phase_convs_compute_the_zero_inserted_convs_integers(attrs, per_channel):
    rng = np.random.default_rng(4)
    graph = from_bytes(_model(rng, relu=True, **attrs), batch=2)
    calibration = {"x": _x(rng, 8)}
    phased = quantize_graph(graph, calibration, per_channel)
    plain = _without_phases(graph, calibration, per_channel)
    assert [n.op for n in plain.nodes if n.op != "pad"][1:3] == ["insert_zeros", "qconv"]
    ops = [n.op for n in phased.nodes]
    assert "insert_zeros" not in ops and "interleave" in ops
    conv = phased.node("up")
    stride = attrs["strides"]
    assert conv.attrs["stride"] == (1, 1) and conv.attrs["dilation"] == (1, 1) and \
        phased.tensors[conv.outputs[0]].shape[1] == 6 * stride[0] * stride[1]
    if conv.attrs.get("per_channel"):   # the biases, then the multipliers: each per phase
        assert phased.tensors[conv.inputs[2]].shape == (2 * 6 * stride[0] * stride[1],)
    x = _x(rng, 2)
    np.testing.assert_array_equal(execute(phased, {"x": x})["y"], execute(plain, {"x": x})["y"])


def test_batchnorm_and_relu_fold_into_the_conv():
    """DCGAN's ConvTranspose, BatchNorm, ReLU: one conv, with the BatchNorm in its weights."""
    rng = np.random.default_rng(5)
    data = _model(rng, bias=False, batchnorm=True, relu=True, kernel=(4, 4), strides=[2, 2],
                  pads=[1, 1, 1, 1])
    graph = from_bytes(data, batch=2)
    floating = run_passes(graph, PIPELINE)
    assert [n.op for n in floating.nodes] == ["insert_zeros", "conv"]
    assert floating.nodes[1].attrs["relu"]
    x = _x(rng, 2)
    want = ReferenceEvaluator(onnx.load_from_string(data)).run(None, {"x": x})[0]
    np.testing.assert_allclose(execute(floating, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


def test_shape_rules_refuse_what_the_kernels_cannot_take():
    arity, rule, _ = HOST_SHAPES["interleave"]
    node = Node("i", "interleave", ["a"], ["b"], {"block": (2, 2), "crop": (0, 0, 0, 0)})
    with pytest.raises(GraphError, match=r"^node 'i' \(interleave\): 6 channels are not a "
                                         r"multiple of its block 2 x 2$"):
        rule(node, Tensor("a", (1, 6, 3, 3), np.int8))
    arity, rule, _ = HOST_SHAPES["insert_zeros"]
    node = Node("z", "insert_zeros", ["a"], ["b"], {"stride": (2, 2), "crop": (3, 0, 2, 0)})
    with pytest.raises(GraphError, match=r"^node 'z' \(insert_zeros\): its output would be "
                                         r"\(1, 6, 0, 5\)"):
        rule(node, Tensor("a", (1, 6, 3, 3), np.int8))
    assert rule(Node("z", "insert_zeros", ["a"], ["b"], {"stride": (2, 3), "crop": (1, 0, 0, 2)}),
                Tensor("a", (1, 6, 3, 3), np.int8)) == (1, 6, 4, 5)


def _network_model() -> bytes:
    """A stride-2 ConvTranspose (BatchNorm, ReLU), then a stride-1 one that crops (its
    insert_zeros stays), then a grouped stride-3 one with output_padding."""
    rng = np.random.default_rng(6)
    f32 = np.float32
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w1"], ["t1"], name="up1", strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["t1", "s", "b", "m", "v"], ["n1"], name="bn"),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu"),
        helper.make_node("ConvTranspose", ["r1", "w2", "b2"], ["t2"], name="crop",
                         pads=[3, 2, 2, 3]),
        helper.make_node("ConvTranspose", ["t2", "w3", "b3"], ["y"], name="up3", group=2,
                         strides=[3, 2], pads=[1, 0, 2, 1], output_padding=[1, 1]),
    ]
    inits = [initializer("w1", (rng.standard_normal((3, 8, 4, 4)) * 0.3).astype(f32)),
             *(initializer(n, rng.uniform(0.5, 1.5, 8).astype(f32)) for n in "sbmv"),
             initializer("w2", (rng.standard_normal((8, 6, 3, 3)) * 0.2).astype(f32)),
             initializer("b2", rng.standard_normal(6).astype(f32) * 0.1),
             initializer("w3", (rng.standard_normal((6, 2, 3, 2)) * 0.3).astype(f32)),
             initializer("b3", rng.standard_normal(4).astype(f32) * 0.1)]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, ("N", 3, 4, 4))],
                       [("y", TensorProto.FLOAT, None)], inits)


def _compiled(config: str):
    graph = from_bytes(_network_model(), batch=2)
    calibration = np.random.default_rng(7).standard_normal((16, 3, 4, 4)).astype(np.float32)
    return compile_network(graph, PRESETS[config], {"x": calibration})


@pytest.fixture(scope="module")
def network():
    return _compiled("default")


def _check_run(network, options):
    x = np.random.default_rng(8).standard_normal((2, 3, 4, 4)).astype(np.float32)
    result = network.run({"x": x}, keep=True, **options)
    reference = execute(network.graph, {"x": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    return x, result


@pytest.mark.parametrize("options", [{"sim": "fsim"}, {"target": "cpu"}])
def test_a_network_saves_loads_and_runs_bit_exact(network, options):
    loaded = loads(dumps(network))
    ops = [node.op for node in loaded.graph.nodes]
    assert ops.count("qconv") == 3 and ops.count("interleave") == 2 and \
        ops.count("insert_zeros") == 1
    x, result = _check_run(loaded, options)
    ort = pytest.importorskip("onnxruntime")   # onnx's reference mixes up the groups
    want = ort.InferenceSession(_network_model(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    got = result.outputs["y"]
    assert got.shape == want.shape
    assert float(np.ravel(got) @ np.ravel(want) / np.linalg.norm(got)
                 / np.linalg.norm(want)) > 0.99


def test_the_qdq_export_moves_the_same_int8_on_onnxruntime(network):
    ort = pytest.importorskip("onnxruntime")
    integer = network.graph
    model = to_qdq(integer)
    moved = [node for node in integer.nodes if node.op in ("insert_zeros", "interleave")]
    # Each node's input and output as onnxruntime computes them (a layer's may differ by one
    # step from vdla's: float against integer arithmetic).
    names = {name for node in moved for name in (node.inputs[0], node.outputs[0])}
    for name in sorted(names - {o.name for o in model.graph.output}):
        model.graph.output.append(helper.make_tensor_value_info(
            name, TensorProto.INT8, list(integer.tensors[name].shape)))
    x = np.random.default_rng(9).standard_normal((2, 3, 4, 4)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    theirs = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"x": x})))
    for node in moved:
        np.testing.assert_array_equal(run_node(node, [theirs[node.inputs[0]]])[0], theirs[node.outputs[0]],
                                      err_msg=node.name)


@pytest.mark.slow
@pytest.mark.rtl
def test_fsim_the_rtl_and_the_cpu_target_agree_bit_for_bit():
    network = _compiled("tiny")
    _, fsim = _check_run(network, {"sim": "fsim"})
    _, rtl = _check_run(network, {"sim": "rtl"})
    _, cpu = _check_run(network, {"target": "cpu"})
    for name, array in fsim.tensors.items():
        np.testing.assert_array_equal(rtl.tensors[name], array, err_msg=name)
        np.testing.assert_array_equal(cpu.tensors[name], array, err_msg=name)
    assert all(row["cycles"] for row in rtl.layers if row["place"] == "accel")
