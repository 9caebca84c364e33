"""Operator definitions: validation and the numpy references."""

import numpy as np
import pytest

from vdla.compiler import Conv2d, Dense, ShapeError, op_from_dict


def naive_conv(data, weight, bias, stride, padding, shift, relu):
    """Loop-by-loop convolution, the slowest and most obvious formulation."""
    n, c, h, w = data.shape
    k, _, kh, kw = weight.shape
    oh = (h + 2 * padding[0] - kh) // stride[0] + 1
    ow = (w + 2 * padding[1] - kw) // stride[1] + 1
    out = np.zeros((n, k, oh, ow), dtype=np.int8)
    for b in range(n):
        for o in range(k):
            for y in range(oh):
                for x in range(ow):
                    total = 0
                    for ci in range(c):
                        for dy in range(kh):
                            for dx in range(kw):
                                iy, ix = y * stride[0] - padding[0] + dy, x * stride[1] - padding[1] + dx
                                if 0 <= iy < h and 0 <= ix < w:
                                    total += int(data[b, ci, iy, ix]) * int(weight[o, ci, dy, dx])
                    total += int(bias[o]) if bias is not None else 0
                    total = max(-128, min(127, total >> shift))
                    out[b, o, y, x] = max(total, 0) if relu else total
    return out


@pytest.mark.parametrize("shape", [
    dict(batch=2, in_channels=3, out_channels=5, height=7, width=6, kernel=(3, 2), stride=(2, 1),
         padding=(1, 1)),
    dict(batch=1, in_channels=4, out_channels=2, height=5, width=5, kernel=5, stride=3),
])
@pytest.mark.parametrize("epilogue", [dict(), dict(bias=True, shift=3, relu=True),
                                      dict(bias=True, shift=40)])
def test_conv_reference_matches_naive_loops(shape, epilogue, rng):
    op = Conv2d(**shape, **epilogue)
    inputs = op.random_inputs(rng)
    expected = naive_conv(inputs["data"], inputs["weight"], inputs.get("bias"), op.stride,
                          op.padding, op.shift, op.relu)
    assert np.array_equal(op.reference(**inputs), expected)


def test_dense_reference(rng):
    op = Dense(3, 20, 7, bias=True, shift=2, relu=False)
    inputs = op.random_inputs(rng)
    acc = inputs["data"].astype(np.int64) @ inputs["weight"].astype(np.int64).T + inputs["bias"]
    assert np.array_equal(op.reference(**inputs), np.clip(acc >> 2, -128, 127).astype(np.int8))


@pytest.mark.parametrize("kwargs, message", [
    (dict(kernel=9, padding=0), "larger than the padded input"),
    (dict(kernel=3, padding=3), "smaller than the kernel"),
    (dict(kernel=17, padding=16, height=40, width=40), "4-bit load pad"),
    (dict(stride=0), "positive"),
    (dict(in_channels=0), "in_channels"),
    (dict(shift=-1), "shift"),
    (dict(kernel=(3, 3, 3)), "kernel"),
])
def test_conv_validation(kwargs, message):
    base = dict(batch=1, in_channels=4, out_channels=4, height=8, width=8)
    base.update(kwargs)
    with pytest.raises(ShapeError, match=message):
        Conv2d(**base)


def test_dense_validation():
    with pytest.raises(ShapeError, match="in_features"):
        Dense(1, 0, 3)


def test_round_trip_through_dict():
    op = Conv2d(2, 3, 4, 9, 9, kernel=(3, 1), stride=2, padding=(1, 0), bias=True, shift=2)
    assert op_from_dict(op.to_dict()) == op
    dense = Dense(3, 4, 5, relu=True)
    assert op_from_dict(dense.to_dict()) == dense
    with pytest.raises(ShapeError, match="unknown operator"):
        op_from_dict({"op": "pool"})
