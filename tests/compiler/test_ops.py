"""Operator definitions: validation and the numpy references."""

import numpy as np
import pytest

from vdla.compiler import Conv2d, Dense, ShapeError, compile_op, op_from_dict
from vdla.compiler.ops import accelerator_limits
from vdla.compiler.workloads import random_conv2d
from vdla.hw.config import PRESETS



def naive_conv(data, weight, bias, stride, padding, shift, relu, groups=1, dilation=(1, 1)):
    """Loop-by-loop convolution, the slowest and most obvious formulation."""
    n, c, h, w = data.shape
    k, per_group, kh, kw = weight.shape
    top, left, bottom, right = padding
    oh = (h + top + bottom - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + left + right - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, k, oh, ow), dtype=np.int8)
    for b in range(n):
        for o in range(k):
            first = o // (k // groups) * per_group
            for y in range(oh):
                for x in range(ow):
                    total = 0
                    for ci in range(per_group):
                        for dy in range(kh):
                            for dx in range(kw):
                                iy = y * stride[0] - top + dy * dilation[0]
                                ix = x * stride[1] - left + dx * dilation[1]
                                if 0 <= iy < h and 0 <= ix < w:
                                    total += int(data[b, first + ci, iy, ix]) \
                                        * int(weight[o, ci, dy, dx])
                    total += int(bias[o]) if bias is not None else 0
                    total = max(-128, min(127, total >> shift))
                    out[b, o, y, x] = max(total, 0) if relu else total
    return out


@pytest.mark.parametrize("shape", [
    dict(batch=2, in_channels=3, out_channels=5, height=7, width=6, kernel=(3, 2), stride=(2, 1),
         padding=(1, 1)),
    dict(batch=1, in_channels=4, out_channels=2, height=5, width=5, kernel=5, stride=3),
    dict(batch=2, in_channels=6, out_channels=4, height=6, width=7, kernel=(2, 3), stride=(1, 2),
         padding=(0, 4, 5, 1), groups=2, dilation=(2, 1)),
    dict(batch=1, in_channels=3, out_channels=6, height=5, width=6, kernel=3, padding=(3, 0, 1, 2),
         groups=3, dilation=3),
])
@pytest.mark.parametrize("epilogue", [dict(), dict(bias=True, shift=3, relu=True),
                                      dict(bias=True, shift=40)])
def test_conv_reference_matches_naive_loops(shape, epilogue, rng):
    op = Conv2d(**shape, **epilogue)
    inputs = op.random_inputs(rng)
    expected = naive_conv(inputs["data"], inputs["weight"], inputs.get("bias"), op.stride,
                          op.padding, op.shift, op.relu, op.groups, op.dilation)
    assert np.array_equal(op.reference(**inputs), expected)


def test_dense_reference(rng):
    op = Dense(3, 20, 7, bias=True, shift=2, relu=False)
    inputs = op.random_inputs(rng)
    acc = inputs["data"].astype(np.int64) @ inputs["weight"].astype(np.int64).T + inputs["bias"]
    assert np.array_equal(op.reference(**inputs), np.clip(acc >> 2, -128, 127).astype(np.int8))


def test_conv_sums_match_onnx_reference():
    """`Conv2d.accumulate` against onnx.reference's Conv over random shapes (integer-valued
    float data: every sum is exact in float64)."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(23)
    for _ in range(40):
        op = random_conv2d(rng)
        data = rng.integers(-128, 128, size=op.geometry().shapes["data"]).astype(np.float64)
        weight = rng.integers(-128, 128, size=op.weight_shape).astype(np.float64)
        top, left, bottom, right = op.padding
        node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=list(op.kernel),
                                strides=list(op.stride), dilations=list(op.dilation),
                                group=op.groups, pads=[top, left, bottom, right])
        graph = helper.make_graph(
            [node], "conv", [helper.make_tensor_value_info(name, onnx.TensorProto.DOUBLE, None)
                             for name in ("x", "w")],
            [helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, None)])
        expected = ReferenceEvaluator(helper.make_model(graph)).run(None, {"x": data,
                                                                          "w": weight})[0]
        assert expected.shape == op.output_shape, op.describe()
        assert np.array_equal(op.accumulate(data.astype(np.int64), weight.astype(np.int64)),
                              expected.astype(np.int64)), op.describe()


@pytest.mark.parametrize("kwargs, message", [
    (dict(kernel=9, padding=0), r"^no output height: the kernel spans 9 \(kernel 9, dilation 1\), "
                                r"more than the padded input height 8 \+ 0 \+ 0$"),
    (dict(kernel=3, dilation=(1, 5)), r"^no output width: the kernel spans 11 \(kernel 3, "
                                      r"dilation 5\), more than the padded input width 8 \+ 0 \+ 0$"),
    (dict(stride=0), r"^kernel and stride must be positive, got kernel \(3, 3\), stride \(0, 0\)$"),
    (dict(dilation=0), r"^dilation must be positive, got \(0, 0\)$"),
    (dict(dilation=(1, 2, 3)), r"^dilation: expected an int or a pair, got \(1, 2, 3\)$"),
    (dict(padding=(1, -1)), r"^padding must be >= 0, got \(1, -1, 1, -1\) \(top, left, bottom, "
                            r"right\)$"),
    (dict(padding=(1, 2, 3)), r"^padding: expected an int, \(height, width\) or \(top, left, "
                              r"bottom, right\), got \(1, 2, 3\)$"),
    (dict(groups=3), r"^groups 3 must divide in_channels 4 and out_channels 4$"),
    (dict(groups=2, out_channels=5), r"^groups 2 must divide in_channels 4 and out_channels 5$"),
    (dict(groups=0), r"^groups: expected a positive integer, got 0$"),
    (dict(in_channels=0), "in_channels"),
    (dict(shift=-1), "shift"),
    (dict(kernel=(3, 3, 3)), "kernel"),
])
def test_conv_validation(kwargs, message):
    base = dict(batch=1, in_channels=4, out_channels=4, height=8, width=8)
    base.update(kwargs)
    with pytest.raises(ShapeError, match=message):
        Conv2d(**base)


@pytest.mark.parametrize("kwargs, message", [
    (dict(kernel=17, padding=16, height=40, width=40),
     r"^padding 16 \(top\) exceeds the ISA's 4-bit load pad fields \(at most 15\); use --target cpu$"),
])
def test_accelerator_limits(kwargs, message):
    base = dict(batch=1, in_channels=16, out_channels=16, height=8, width=8)
    base.update(kwargs)
    op = Conv2d(**base)
    with pytest.raises(ShapeError, match=message):
        accelerator_limits(op.geometry(), PRESETS["default"])
    with pytest.raises(ShapeError, match=message):
        compile_op(op, PRESETS["default"])


def test_accelerator_takes_dilation_and_any_padding_the_field_holds():
    op = Conv2d(1, 32, 32, 9, 9, kernel=3, padding=(4, 0, 2, 1), dilation=(3, 1), groups=2)
    # extent 7 rows, 3 columns; groups of whole blocks keep the weight layout
    assert accelerator_limits(op.geometry(), PRESETS["default"]) == op.geometry()
    # Padding past the kernel's extent: windows that see only padding.
    op = Conv2d(1, 16, 16, 4, 4, kernel=(1, 3), stride=3, padding=(15, 3, 1, 15))
    assert accelerator_limits(op.geometry(), PRESETS["default"]) == op.geometry()


@pytest.mark.parametrize("config, groups", [("default", 32), ("default", 8), ("tiny", 16),
                                            ("odd", 8)])
def test_groups_smaller_than_a_block_tile_its_diagonal(config, groups):
    op = Conv2d(1, 32, 32 // (2 if config == "odd" else 1), 6, 6, groups=groups)
    geometry = accelerator_limits(op.geometry(), PRESETS[config])
    assert geometry.layouts["weight"] == "block_diagonal"


def test_dense_validation():
    with pytest.raises(ShapeError, match="in_features"):
        Dense(1, 0, 3)


def test_round_trip_through_dict():
    op = Conv2d(2, 3, 4, 9, 9, kernel=(3, 1), stride=2, padding=(1, 0), bias=True, shift=2)
    assert op_from_dict(op.to_dict()) == op
    # A layer older files could hold keeps their dict: symmetric padding as a pair,
    # no groups or dilation.
    assert op.to_dict() == {"op": "conv2d", "batch": 2, "in_channels": 3, "out_channels": 4,
                            "height": 9, "width": 9, "kernel": [3, 1], "stride": [2, 2],
                            "padding": [1, 0], "bias": True, "shift": 2, "relu": False}
    assert op.padding == (1, 0, 1, 0)
    general = Conv2d(1, 6, 4, 9, 9, kernel=(3, 1), padding=(0, 1, 2, 3), groups=2, dilation=(2, 1))
    assert general.to_dict()["padding"] == [0, 1, 2, 3]
    assert (general.to_dict()["groups"], general.to_dict()["dilation"]) == (2, [2, 1])
    assert op_from_dict(general.to_dict()) == general
    assert general.describe() == "conv2d 1x6x9x9 -> 4 k3x1 s1x1 p0,1,2,3 d2x1 g2"
    dense = Dense(3, 4, 5, relu=True)
    assert op_from_dict(dense.to_dict()) == dense
    with pytest.raises(ShapeError, match="unknown operator"):
        op_from_dict({"op": "pool"})
