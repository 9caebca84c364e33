"""Stem packing (`graph.passes.stem`) and its host operator ``im2col`` (`graph.ops.im2col`):
where the pass applies, bit-exactness with the unpacked network on every tier, and cycles."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.graph.models import initializer, model_bytes
from vdla.compiler.accel.driver import compile_op
from vdla.frontend.onnx import from_bytes
from vdla.graph import network as network_module
from vdla.graph.errors import GraphError
from vdla.graph.export import to_qdq
from vdla.graph.ir import Node, Tensor
from vdla.graph.kernels import execute
from vdla.graph.network import _estimated_cycles, compile_network, quantize_graph
from vdla.graph.network_file import HOST_SHAPES, dumps, loads
from vdla.graph.ops.base import MAX_TENSOR_ELEMENTS
from vdla.graph.ops.im2col import im2col
from vdla.graph.passes.stem import stem_cycles
from vdla.graph.placement import layer_op
from vdla.hw.config import PRESETS


# -- im2col -----------------------------------------------------------------------------------


def _loop_im2col(x, kernel, stride, pads, dilation):
    """The patches by their definition, one element at a time."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    top, left, bottom, right = pads
    oh = (h + top + bottom - (kh - 1) * dh - 1) // sh + 1
    ow = (w + left + right - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, c * kh * kw, oh, ow), x.dtype)
    for b in range(n):
        for ch in range(c):
            for i in range(kh):
                for j in range(kw):
                    for y in range(oh):
                        for z in range(ow):
                            row, col = y * sh - top + i * dh, z * sw - left + j * dw
                            if 0 <= row < h and 0 <= col < w:
                                out[b, (ch * kh + i) * kw + j, y, z] = x[b, ch, row, col]
    return out


@pytest.mark.parametrize("seed", range(8))
def test_im2col_is_the_windows_as_channels(seed):
    rng = np.random.default_rng(seed)
    kernel = tuple(int(k) for k in rng.integers(1, 4, 2))
    stride = tuple(int(s) for s in rng.integers(1, 3, 2))
    dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
    pads = tuple(int(p) for p in rng.integers(0, 4, 4))
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(5, 9)),
             int(rng.integers(5, 9)))
    x = rng.integers(-128, 128, shape).astype(np.int8)
    expected = _loop_im2col(x, kernel, stride, pads, dilation)
    np.testing.assert_array_equal(im2col(x, kernel, stride, pads, dilation), expected)
    node = Node("n", "im2col", ["x"], ["y"], {"kernel": kernel, "stride": stride,
                                              "pads": pads, "dilation": dilation})
    _, rule, _ = HOST_SHAPES["im2col"]
    assert rule(node, Tensor("x", shape, np.int8)) == expected.shape


@pytest.mark.parametrize("attrs, shape, message", [
    ({}, (2, 3, 8), r"input 'x' is int8 \(2, 3, 8\), not of rank 4$"),
    ({"kernel": (3, 3), "dilation": (3, 1)}, (1, 1, 6, 6),
     r"its kernel spans 7x3 but its padded input is 6x6$"),
    ({"kernel": (2, 2), "pads": (0, 0, 1 << 13, 1 << 13)}, (1, 4, 1 << 13, 1 << 13),
     rf"its padded input 1x4x16384x16384 holds more than the {MAX_TENSOR_ELEMENTS:,} "
     "elements a network's tensor may hold$"),
    ({"kernel": (16, 16)}, (1, 4, 1 << 12, 1 << 12),
     rf"its output 1x1024x4081x4081 holds more than the {MAX_TENSOR_ELEMENTS:,} elements"),
])
def test_im2col_shape_rule_refuses_what_its_kernel_cannot_run(attrs, shape, message):
    attrs = {"kernel": (1, 1), "stride": (1, 1), "pads": (0, 0, 0, 0), "dilation": (1, 1),
             **attrs}
    _, rule, _ = HOST_SHAPES["im2col"]
    with pytest.raises(GraphError, match=rf"^node 'n' \(im2col\): {message}"):
        rule(Node("n", "im2col", ["x"], ["y"], attrs), Tensor("x", shape, np.int8))


# -- networks ---------------------------------------------------------------------------------


def _model(channels: int, size: tuple[int, int], convs, seed: int = 0) -> bytes:
    """A chain of Convs (``(name, out channels, attrs)``, each followed by a Relu; a name
    starting with ``pool`` is a 2x2 MaxPool instead) ending in a global pool and Flatten."""
    rng = np.random.default_rng(seed)
    nodes, inits, x, c = [], [], "input", channels
    for name, out, attrs in convs:
        if name.startswith("pool"):
            nodes.append(helper.make_node("MaxPool", [x], [name], name=name,
                                          kernel_shape=[2, 2], strides=[2, 2]))
            x = name
            continue
        attrs = dict(attrs)
        kernel = attrs.pop("kernel", (3, 3))
        groups = attrs.get("group", 1)
        weight = rng.standard_normal((out, c // groups, *kernel)) / np.sqrt(c * np.prod(kernel))
        inits += [initializer(f"{name}_w", weight.astype(np.float32)),
                  initializer(f"{name}_b", rng.uniform(-0.1, 0.1, out).astype(np.float32))]
        nodes += [helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"],
                                   name=name, **attrs),
                  helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"], name=f"{name}_relu")]
        x, c = f"{name}_r", out
    nodes += [helper.make_node("GlobalAveragePool", [x], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["y"], name="flatten")]
    return model_bytes(nodes, [("input", TensorProto.FLOAT, ["N", channels, *size])],
                       [("y", TensorProto.FLOAT, None)], inits)


def _samples(channels, size, count, seed):
    return np.random.default_rng(seed).uniform(-1, 1, (count, channels, *size)).astype(
        np.float32)


def _compile(channels, size, convs, config="default", batch=2, **options):
    graph = from_bytes(_model(channels, size, convs), batch=batch)
    calibration = {"input": _samples(channels, size, 16, 1)}
    return graph, calibration, compile_network(graph, PRESETS[config], calibration, **options)


def _packed(network) -> set[str]:
    return {node.name.removesuffix("/im2col") for node in network.graph.nodes
            if node.op == "im2col"}


STEM = ("stem", 8, {"kernel": (7, 7), "strides": [2, 2], "pads": [3, 3, 3, 3]})


@pytest.mark.parametrize("channels, convs, config, options, packed", [
    # ResNet's stem shape: 3 channels of a 16-wide block, 49 taps into 10 blocks.
    (3, [STEM], "default", {}, {"stem"}),
    # From a host node (a max pool of a layer's output): packed where it wins.
    (3, [("first", 3, {"kernel": (1, 1)}), ("pool", 0, {}),
         ("second", 8, {"pads": [1, 1, 1, 1]})], "tiny", {}, {"second"}),
    # 1x1 (nothing to fold), a full block of channels, groups: left alone.
    (3, [("point", 8, {"kernel": (1, 1), "strides": [2, 2]})], "default", {}, set()),
    (16, [("full", 8, {"pads": [1, 1, 1, 1]})], "default", {}, set()),
    (4, [("grouped", 4, {"group": 2, "pads": [1, 1, 1, 1]})], "tiny", {}, set()),
    # The cost model says no: 8 of 16 channels, 3x3 stride 1 (the patches load 9x the input).
    (8, [("dense8", 16, {"pads": [1, 1, 1, 1]})], "default", {}, set()),
    # Layers the cpu target runs.
    (3, [STEM], "default", {"on_cpu": ["stem"]}, set()),
    (3, [STEM], "default", {"target": "cpu"}, set()),
])
def test_the_pass_packs_host_fed_few_channel_convs_where_the_cost_model_says(
        channels, convs, config, options, packed):
    size = (32, 32) if channels == 8 else (12, 12)
    _, _, network = _compile(channels, size, convs, config, **options)
    assert _packed(network) == packed
    for name in packed:   # a 1x1 conv over the patches: C * KH * KW channels
        conv = network.graph.node(name)
        assert conv.attrs["kernel"] == (1, 1) and conv.attrs["pads"] == (0, 0, 0, 0)
        assert conv.inputs[0] == f"{name}/im2col"
        taps = np.prod(network.graph.node(f"{name}/im2col").attrs["kernel"])
        assert network.graph.tensors[conv.inputs[1]].shape[1:] == (3 * taps, 1, 1)


def test_a_conv_an_accelerator_layer_feeds_is_left_alone_where_packing_would_win():
    """Its input lies blocked in DRAM: packing it would bring it back to the host."""
    _, _, network = _compile(3, (12, 12), [("first", 3, {"kernel": (1, 1)}),
                                           ("second", 8, {"pads": [1, 1, 1, 1]})], "tiny")
    assert _packed(network) == set()
    before, after = stem_cycles(network.graph, network.graph.node("second"), PRESETS["tiny"])
    assert after < before


def test_patches_larger_than_a_tensor_may_be_are_not_made(monkeypatch):
    from vdla.graph.ops import im2col as module
    limit = 2 * 147 * 6 * 6 - 1   # a 12x12 stem's patches, less one element
    monkeypatch.setattr(module, "MAX_TENSOR_ELEMENTS", limit)
    _, _, network = _compile(3, (12, 12), [STEM], "default")
    assert _packed(network) == set()
    before, after = stem_cycles(network.graph, network.graph.node("stem"), PRESETS["default"])
    assert after == float("inf") > before


ODD = [  # channels, size, the stem's Conv attributes, config
    (1, (9, 7), {"kernel": (3, 2), "strides": [2, 1], "pads": [0, 1, 2, 1]}, "tiny"),
    (2, (8, 11), {"kernel": (3, 3), "dilations": [2, 1], "pads": [2, 0, 1, 3]}, "tiny"),
    (3, (11, 10), {"kernel": (5, 3), "strides": [1, 2], "dilations": [1, 2],
                   "pads": [2, 1, 2, 2]}, "default"),
    (3, (13, 13), {"kernel": (7, 7), "strides": [2, 2], "pads": [3, 3, 3, 3]}, "default"),
]


@pytest.mark.parametrize("channels, size, attrs, config", ODD)
def test_packed_networks_are_bit_exact_with_the_unpacked_on_fsim_and_the_cpu_target(
        channels, size, attrs, config):
    graph, calibration, network = _compile(channels, size, [("stem", 5, attrs),
                                                            ("tail", 4, {"kernel": (1, 1)})],
                                           config, batch=2)
    assert _packed(network) == {"stem"}
    unpacked = quantize_graph(graph, calibration)
    assert not any(node.op == "im2col" for node in unpacked.nodes)
    x = _samples(channels, size, 2, 9)
    expected = execute(unpacked, {"input": x}, keep=True)
    network = loads(dumps(network))   # through a network file
    for options in ({"sim": "fsim"}, {"target": "cpu"}):
        result = network.run({"input": x}, keep=True, **options)
        np.testing.assert_array_equal(result.outputs["y"], expected["y"])
        for name in ("stem_r", "tail_r"):   # the layers' int8 outputs
            np.testing.assert_array_equal(result.tensors[name], expected[name], err_msg=name)


def test_the_packed_stem_takes_fewer_estimated_cycles_and_exports_exactly():
    """The cost model's estimate of each form as compiled; the QDQ export's im2col (a
    one-hot Conv) on onnxruntime gives the kernel's patches."""
    graph, calibration, network = _compile(3, (16, 16), [STEM], "default")
    config = PRESETS["default"]
    unpacked = quantize_graph(graph, calibration)
    op = layer_op(unpacked, unpacked.node("stem"))
    before = _estimated_cycles(compile_op(op, config), op, config)
    after = network.metadata["estimated_cycles"]["stem"]
    assert after < 0.6 * before
    ort = pytest.importorskip("onnxruntime")
    model = to_qdq(network.graph)
    model.graph.output.append(helper.make_tensor_value_info(
        "stem/im2col", TensorProto.INT8, list(network.graph.tensors["stem/im2col"].shape)))
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    x = _samples(3, (16, 16), 2, 4)
    theirs = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"input": x})))
    ours = execute(network.graph, {"input": x}, keep=True)
    np.testing.assert_array_equal(theirs["stem/im2col"], ours["stem/im2col"])


@pytest.mark.slow
@pytest.mark.rtl
def test_the_packed_stem_is_bit_exact_and_faster_on_the_rtl(monkeypatch):
    channels, size, attrs, _ = ODD[0]
    convs = [("stem", 5, attrs), ("tail", 4, {"kernel": (1, 1)})]
    _, _, network = _compile(channels, size, convs, "tiny", batch=1)
    assert _packed(network) == {"stem"}
    x = _samples(channels, size, 1, 3)
    rtl = network.run({"input": x}, sim="rtl", keep=True)
    fsim = network.run({"input": x}, sim="fsim", keep=True)
    for name, array in fsim.tensors.items():
        np.testing.assert_array_equal(rtl.tensors[name], array, err_msg=name)
    monkeypatch.setattr(network_module, "TARGET_PIPELINE", [])
    _, _, unpacked = _compile(channels, size, convs, "tiny", batch=1)
    assert _packed(unpacked) == set()
    plain = unpacked.run({"input": x}, sim="rtl")
    np.testing.assert_array_equal(plain.outputs["y"], rtl.outputs["y"])
    cycles = {row["name"]: row["cycles"] for row in rtl.layers}
    assert cycles["stem"] < {row["name"]: row["cycles"] for row in plain.layers}["stem"]
