"""``lrn`` (float) and ``qlrn`` (int8): ONNX's LRN, local response normalisation across
channels (AlexNet, Inception-v1).

``y = x / (bias + alpha / size * square_sum) ** beta``, where ``square_sum``
adds the squares of the channels from ``c - floor((size - 1) / 2)`` to
``c + ceil((size - 1) / 2)`` (those that exist). The float kernel computes
in float32 as onnx's reference does, adding the window's squares in channel
order. It is not linear, so its int8 form dequantises, computes and
requantises on the host: ``qlrn`` sums the int8 squares exactly (int64
prefix sums along the channels, so its work does not grow with ``size``),
scales the sum by ``scale**2`` and then computes as the float kernel does,
quantising at the output's own calibrated scale (``out_scale``, half to
even). At a power-of-two input scale whose squares stay normal and whose
window sums stay below 2**24 this is exactly onnx's reference between
DequantizeLinear and QuantizeLinear; against onnxruntime (its own power
function) within 1. It mixes channels, so it runs on logical arrays.
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import Op, quantize_float, rank

__all__ = ["OPS"]

_WHY = "a normalisation across channels (powers, division) in float32 on the host"
# Multiply-adds the float kernel may spend (its window's channels times its input's
# elements); the int8 kernel's work is its input's, whatever the window.
_MAX_FLOAT_WORK = 1 << 32


def _reach(size: int, channels: int) -> tuple[int, int]:
    """How many channels the window reaches below and above a channel (those that exist)."""
    below, above = (size - 1) // 2, math.ceil((size - 1) / 2)
    return min(below, channels - 1), min(above, channels - 1)


def _normalise(node: Node, x: np.ndarray, square_sum: np.ndarray) -> np.ndarray:
    """The float32 arithmetic of onnx's reference, after its square sum."""
    alpha, size = node.attrs["alpha"], node.attrs["size"]
    with np.errstate(over="ignore", under="ignore"):   # beyond float32: inf, then 0
        base = np.float32(node.attrs["bias"]) + np.float32(alpha / size) * square_sum
        return (x / base ** np.float32(node.attrs["beta"])).astype(np.float32)


def _lrn(node: Node, x):
    x = np.asarray(x, np.float32)
    channels = x.shape[1]
    below, above = _reach(node.attrs["size"], channels)
    with np.errstate(over="ignore", under="ignore"):
        squares = x * x
        square_sum = np.zeros_like(x)
        # Channel by channel in order, as numpy's sum over the window's channels adds them.
        for offset in range(-below, above + 1):
            low, high = max(0, -offset), min(channels, channels - offset)
            square_sum[:, low:high] += squares[:, low + offset:high + offset]
    return [_normalise(node, x, square_sum)]


def _qlrn(node: Node, q):
    channels = q.shape[1]
    below, above = _reach(node.attrs["size"], channels)
    squares = np.square(np.asarray(q, np.int32))
    prefix = np.zeros((q.shape[0], channels + 1) + q.shape[2:], np.int64)
    np.cumsum(squares, axis=1, dtype=np.int64, out=prefix[:, 1:])
    index = np.arange(channels)
    sums = np.take(prefix, np.minimum(index + above + 1, channels), axis=1)
    sums -= np.take(prefix, np.maximum(index - below, 0), axis=1)
    scale = node.attrs["scale"]
    with np.errstate(under="ignore"):
        square_sum = (sums * (scale * scale)).astype(np.float32)
        x = np.asarray(q, np.float32) * np.float32(scale)
    return [quantize_float(_normalise(node, x, square_sum), node.attrs["out_scale"])]


# -- ONNX import ------------------------------------------------------------------------------


def _check(where: str, attrs: dict) -> None:
    """A positive denominator: ``bias > 0`` and ``alpha >= 0`` (and finite numbers)."""
    if not all(math.isfinite(attrs[key]) for key in ("alpha", "beta", "bias")):
        raise GraphError(f"{where}: alpha {attrs['alpha']}, beta {attrs['beta']} and bias "
                         f"{attrs['bias']} must be finite")
    if not (attrs["bias"] > 0 and attrs["alpha"] >= 0):
        raise GraphError(f"{where}: bias {attrs['bias']:g} and alpha {attrs['alpha']:g}: vdla "
                         "needs bias > 0 and alpha >= 0 (a positive denominator)")


def _onnx_lrn(node) -> None:
    node.arity(1)
    shape = node.rank(0, (4,))
    size = node.attr("size")
    if not isinstance(size, int) or not 0 < size < 1 << 16:
        raise node.fail(f"attribute size={size!r} must be an integer from 1 to 65535")
    attrs = {"size": size, **{key: float(node.attr(key, default)) for key, default in
                              (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0))}}
    _check(node.where, attrs)
    below, above = _reach(size, shape[1])
    if (below + above + 1) * math.prod(shape) > _MAX_FLOAT_WORK:
        raise node.fail(f"its window of {below + above + 1} channels over {math.prod(shape):,} "
                        f"elements is more than vdla computes ({_MAX_FLOAT_WORK:,} "
                        "multiply-adds)")
    node.emit("lrn", **attrs)


# -- quantisation -----------------------------------------------------------------------------


def _quantize_lrn(q, node: Node) -> None:
    """The input's scale and the output's calibrated one (the values change range)."""
    s_x, s_y = q.input_scale(node), q.scale(node.outputs[0])
    q.emit(node, "qlrn", node.inputs, s_y, scale=q.real_scale(s_x),
           out_scale=q.real_scale(s_y))


# -- network file -----------------------------------------------------------------------------


def _normalised(node: Node, x: Tensor) -> tuple[int, ...]:
    shape = rank(node, x, 4)
    if x.dtype != np.int8:
        raise GraphError(f"{node.describe()}: its input is {x.describe()}, not int8")
    _check(node.describe(), node.attrs)
    return shape


def _export(writer, node: Node) -> None:
    writer.float_op(node, "LRN", size=node.attrs["size"], alpha=node.attrs["alpha"],
                    beta=node.attrs["beta"], bias=node.attrs["bias"])


_ATTRS = {"size": "count", "alpha": "float", "beta": "float", "bias": "float"}

OPS = [
    Op("lrn", "float", "float only: quantisation makes it a qlrn", _lrn,
       onnx={"LRN": _onnx_lrn}, quantize=_quantize_lrn),
    Op("qlrn", "host", _WHY, _qlrn, attrs={**_ATTRS, "scale": "scale", "out_scale": "scale"},
       shape=_normalised, dtype=np.int8, export=_export),
]
