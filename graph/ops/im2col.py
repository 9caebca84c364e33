"""``im2col``: a convolution's input windows laid out as channels, for stem packing.

A layer with few input channels fills a GEMM block's reduction poorly (3
channels of a 16-wide block). `graph.passes.stem` rewrites such a conv as an
``im2col`` on the host followed by a 1x1 conv whose reduction is the
original's ``C * KH * KW`` taps, packed densely into blocks.

``im2col`` on ``x`` of shape (N, C, H, W), with the conv's kernel, stride,
pads (top, left, bottom, right) and dilation, writes (N, C * KH * KW, OH, OW):
channel ``(c * KH + i) * KW + j`` at ``(y, x)`` holds ``x[n, c, y * sh - top +
i * dh, x * sw - left + j * dw]``, zero outside the input (the quantised zero:
scales are symmetric). That is the order of a (K, C, KH, KW) weight reshaped to
(K, C * KH * KW, 1, 1), so the 1x1 conv sums exactly the original's products.

It moves values without computing (an int8 tensor keeps its scale) and mixes
channels with taps, so it runs on logical arrays only: the blocked layout
splits channels into blocks. Its QDQ form is a float Conv with one-hot
weights, which is exact.
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import MAX_TENSOR_ELEMENTS, Op, rank, windows

__all__ = ["OPS", "im2col"]

_WHY = ("a conv's windows as channels, on the host, so that a layer with few input channels "
        "fills the accelerator's GEMM blocks (graph.passes.stem)")


def im2col(x: np.ndarray, kernel, stride, pads, dilation=(1, 1)) -> np.ndarray:
    """The (N, C * KH * KW, OH, OW) patches of ``x`` (N, C, H, W), zero-padded.

    Parameters
    ----------
    x : numpy.ndarray
    kernel, stride, dilation : (int, int)
    pads : (int, int, int, int)
        Top, left, bottom, right.
    """
    taps = windows(x, kernel, stride, pads, 0, dilation)   # (N, C, OH, OW, KH, KW)
    n, c, oh, ow, kh, kw = taps.shape
    return np.ascontiguousarray(taps.transpose(0, 1, 4, 5, 2, 3)).reshape(n, c * kh * kw, oh,
                                                                          ow)


def _kernel(node: Node, x):
    attrs = node.attrs
    return [im2col(x, attrs["kernel"], attrs["stride"], attrs["pads"], attrs["dilation"])]


def _shape(node: Node, x: Tensor) -> tuple[int, ...]:
    """The patches' shape; the padded input and the patches are capped as tensors are."""
    n, c, h, w = rank(node, x, 4)
    attrs = node.attrs
    top, left, bottom, right = attrs["pads"]
    padded = (h + top + bottom, w + left + right)
    extent = tuple((k - 1) * d + 1 for k, d in zip(attrs["kernel"], attrs["dilation"]))
    if padded[0] < extent[0] or padded[1] < extent[1]:
        raise GraphError(f"{node.describe()}: its kernel spans {extent[0]}x{extent[1]} but its "
                         f"padded input is {padded[0]}x{padded[1]}")
    oh, ow = ((size - span) // s + 1 for size, span, s in zip(padded, extent, attrs["stride"]))
    taps = attrs["kernel"][0] * attrs["kernel"][1]
    for what, shape in (("padded input", (n, c, *padded)), ("output", (n, c * taps, oh, ow))):
        if math.prod(shape) > MAX_TENSOR_ELEMENTS:
            raise GraphError(f"{node.describe()}: its {what} {'x'.join(map(str, shape))} holds "
                             f"more than the {MAX_TENSOR_ELEMENTS:,} elements a network's "
                             "tensor may hold")
    return n, c * taps, oh, ow


def _export(writer, node: Node) -> None:
    """A float Conv whose weights pick one tap each: every output is one input times 1."""
    attrs = node.attrs
    c = writer.graph.tensors[node.inputs[0]].shape[1]
    kh, kw = attrs["kernel"]
    if (c * kh * kw) ** 2 > MAX_TENSOR_ELEMENTS:
        raise GraphError(f"{node.describe()}: its one-hot weights ({c * kh * kw} taps squared) "
                         f"hold more than {MAX_TENSOR_ELEMENTS:,} elements")
    onehot = np.eye(c * kh * kw, dtype=np.float32).reshape(c * kh * kw, c, kh, kw)
    name = writer.constant(f"{node.name}/taps", onehot)
    writer.float_op(node, "Conv", [name], kernel_shape=[kh, kw], strides=list(attrs["stride"]),
                    pads=list(attrs["pads"]), dilations=list(attrs["dilation"]))


OPS = [
    Op("im2col", "host", _WHY, _kernel,
       attrs={"kernel": "pair", "stride": "pair", "pads": "pads", "dilation": "pair"},
       shape=_shape, export=_export),
]
