"""Residual fusion (`graph.passes.residual`): ``add(conv(x), r)`` as one qconv adding ``r``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.graph.models import images, initializer, model_bytes, residual_cnn
from vdla.frontend.onnx import from_bytes
from vdla.graph.export import to_qdq
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network, quantize_graph, residual_fusion
from vdla.graph.passes.residual import fused_shifts
from vdla.hw.config import PRESETS

CAL = {"input": images(48, seed=1)}


def _graph(model=None, batch=3):
    return from_bytes((model or residual_cnn(seed=5)).SerializeToString(), batch=batch)


def _ops(graph):
    return {node.name: node for node in graph.nodes}


def test_the_add_enters_the_conv_that_produces_an_operand():
    fused = quantize_graph(_graph(), CAL, fuse_residuals=True)
    plain = quantize_graph(_graph(), CAL)
    ops, plain_ops = _ops(fused), _ops(plain)
    assert "residual" not in ops and plain_ops["residual"].op == "qadd"
    conv3 = ops["conv3"]
    # conv3 now reads the pooled p1, writes the add's output (the relu after it included)
    # at the add's scale: one rounding, the conv's own int8 output gone.
    assert conv3.inputs[3] == "p1" and conv3.outputs == plain_ops["residual"].outputs
    assert conv3.attrs["relu"] and not plain_ops["conv3"].attrs["relu"]
    e_acc = fused.tensors[conv3.inputs[2]].exponent
    assert e_acc == fused.tensors[conv3.inputs[0]].exponent \
        + fused.tensors[conv3.inputs[1]].exponent
    assert conv3.attrs["residual_shift"] == e_acc - fused.tensors["p1"].exponent
    assert conv3.attrs["shift"] == e_acc - fused.tensors[conv3.outputs[0]].exponent
    assert fused.tensors[conv3.outputs[0]].exponent == plain.tensors[conv3.outputs[0]].exponent
    # The bias holds the fused shift's rounding term instead of the conv's own.
    raw = plain.value("conv3/bias_q").astype(np.int64) - (1 << plain_ops["conv3"].attrs["shift"]
                                                          >> 1)
    np.testing.assert_array_equal(fused.value("conv3/bias_q"),
                                  raw + (1 << conv3.attrs["shift"] >> 1))
    # Both networks compute the same up to their roundings: the fused one rounds once.
    x = images(8, seed=2)
    a = execute(fused, {"input": x})["probs"]
    b = execute(plain, {"input": x})["probs"]
    assert np.abs(a - b).max() < 0.02 and np.mean(a.argmax(1) == b.argmax(1)) >= 0.75


def test_only_targets_that_can_add_a_residual_fuse():
    odd = PRESETS["odd"]  # a 4x8 GEMM block: the residual cannot enter through the GEMM
    assert not residual_fusion(odd)("conv3")
    assert residual_fusion(odd, on_cpu=["conv3"])("conv3")
    assert residual_fusion(odd, target="cpu")("conv3")
    assert residual_fusion(PRESETS["tiny"])("conv3")
    assert not residual_fusion(PRESETS["tiny"], fuse=False)("conv3")
    network = compile_network(_graph(), odd, CAL)
    assert _ops(network.graph)["residual"].op == "qadd"
    network = compile_network(_graph(), odd, CAL, on_cpu=["conv3"])
    assert "residual" not in _ops(network.graph) and network.placement["conv3"] == "cpu"
    x = images(3, seed=3)
    reference = execute(network.graph, {"input": x}, keep=True)
    result = network.run({"input": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)


def _block(relu_before_add=False, second_reader=False, shortcut_is_input=False,
           shortcut_1x1=False, swap=False):
    """input -> conv a -> [relu] -> add(., shortcut) -> relu -> conv out; optionally a second
    reader of conv a's output."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((4, 4, 3, 3)) / 6).astype(np.float32)
    nodes = [helper.make_node("Conv", ["input", "w"], ["a"], name="conv_a", pads=[1, 1, 1, 1])]
    a = "a"
    if relu_before_add:
        nodes.append(helper.make_node("Relu", ["a"], ["ar"], name="relu_a"))
        a = "ar"
    shortcut = "input"
    if not shortcut_is_input:
        if shortcut_1x1:    # a ResNet downsample: fewer MACs per output than conv a
            nodes.append(helper.make_node("Conv", ["input", "w1"], ["s"], name="conv_s"))
        else:
            nodes.append(helper.make_node("Conv", ["input", "w"], ["s"], name="conv_s",
                                          pads=[1, 1, 1, 1]))
        shortcut = "s"
    operands = [shortcut, a] if swap else [a, shortcut]
    nodes.append(helper.make_node("Add", operands, ["sum"], name="add"))
    outputs = ["sum"]
    if second_reader:
        nodes.append(helper.make_node("Relu", ["a"], ["other"], name="other"))
        outputs.append("other")
    return onnx.load_from_string(model_bytes(
        nodes, [("input", TensorProto.FLOAT, [2, 4, 6, 6])],
        [(name, TensorProto.FLOAT, [2, 4, 6, 6]) for name in outputs],
        [initializer("w", w), initializer("w1", w[:, :, 1:2, 1:2] * 3)]))


@pytest.mark.parametrize("variant, fused", [
    (dict(), "conv_s"),                       # two equal convs meet: the second takes it
    # A 3x3 and a 1x1 conv meet: the one with more MACs per output takes the add in, in
    # either operand order, and the other is computed first.
    (dict(shortcut_1x1=True), "conv_a"),
    (dict(shortcut_1x1=True, swap=True), "conv_a"),
    (dict(shortcut_is_input=True), "conv_a"),  # the conv adds its own input
    (dict(relu_before_add=True), "conv_s"),    # a ReLU cannot move past the add: conv s
    (dict(relu_before_add=True, shortcut_is_input=True), None),   # ... and nothing fuses
    (dict(second_reader=True), "conv_s"),     # conv a's output is read twice: conv s fuses
])
@pytest.mark.slow
def test_which_convs_fuse(variant, fused):
    graph = from_bytes(_block(**variant).SerializeToString(), batch=2)
    calibration = {"input": np.random.default_rng(1).standard_normal((16, 4, 6, 6))
                   .astype(np.float32)}
    integer = quantize_graph(graph, calibration, fuse_residuals=True)
    ops = _ops(integer)
    residuals = {name for name, node in ops.items() if "residual_shift" in node.attrs}
    assert residuals == ({fused} if fused else set())
    assert ("add" in ops) is (fused is None)
    if fused is not None and variant.get("shortcut_is_input") is not True:
        order = [node.name for node in integer.nodes]
        other = ({"conv_a", "conv_s"} - {fused}).pop()
        if other in order:
            assert order.index(other) < order.index(fused)
    network = compile_network(graph, PRESETS["tiny"], calibration)
    x = calibration["input"][:2]
    reference = execute(network.graph, {"input": x}, keep=True)
    for options in ({"sim": "fsim"}, {"target": "cpu"}):
        result = network.run({"input": x}, keep=True, **options)
        for name, array in result.tensors.items():
            np.testing.assert_array_equal(array, reference[name], err_msg=f"{options} {name}")


def test_a_qdq_conv_output_keeps_its_two_roundings():
    """conv -> Q -> DQ -> Add (as other tools write QDQ models): the file quantises the conv's
    output, so it is not fused; vdla's own export of the unfused network is such a file."""
    plain = quantize_graph(_graph(), CAL)
    qdq = from_bytes(to_qdq(plain).SerializeToString(), batch=3)
    integer = quantize_graph(qdq, fuse_residuals=True)
    assert _ops(integer)["residual"].op == "qadd"
    assert "residual_shift" not in _ops(integer)["conv3"].attrs


def test_the_shifts_of_a_fused_layer():
    assert fused_shifts(20, 12, 14) == (8, 6)
    assert fused_shifts(20, 20, 21) == (0, 0)    # output no finer than the accumulator
    assert fused_shifts(20, 21, 14) is None      # the residual finer than the accumulator
    assert fused_shifts(40, 15, 14) is None      # d = 25 > MAX_RESIDUAL_SHIFT
    assert fused_shifts(60, 36, 10) == (24, 31)  # at most REQUANT's shift


@pytest.mark.rtl
def test_the_fused_network_on_the_rtl():
    network = compile_network(_graph(batch=2), PRESETS["tiny"], CAL)
    assert "residual_shift" in network.graph.node("conv3").attrs
    x = images(2, seed=12)
    result = network.run({"input": x}, sim="rtl", keep=True)
    reference = execute(network.graph, {"input": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
