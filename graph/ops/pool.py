"""Pooling: ``maxpool`` (float and int8), ``avgpool`` and ``global_avgpool`` (float), and
their integer forms ``qavgpool`` and ``qglobal_avgpool``.

The accelerator's ISA has no pooling: every pool runs on the host, on blocked
arrays as on logical ones (it does not mix channels or batch; axes after the
spatial ones are carried along). A max keeps its input's scale; an average
of int8 values at one power-of-two scale is an exact integer mean rounded
half to even, and with other scales onnxruntime's float32 arithmetic between
its DequantizeLinear and QuantizeLinear. ONNX's ``ceil_mode=1`` is imported as
padding (`_ceil_mode`), so the int8 kernels and the network file know only
floor-mode pools.
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import (MAX_TENSOR_ELEMENTS, Op, pad_spatial, rank, saturate_int8,
                                 onnx_spatial, windows)

__all__ = ["OPS"]

_WHY = "the accelerator's ISA has no pooling"

# Elements combined per numpy call when a window's taps are combined in order, chunk by chunk.
_TAP_CHUNK_ELEMENTS = 1 << 22


def _reduce_taps(x: np.ndarray, node: Node, fill, combine, dtype) -> np.ndarray:
    """``combine`` over a pooling window's taps, in row-major tap order.

    Each output is ``combine(... combine(tap0, tap1) ..., tapN)``, so float sums
    round the same however the work is split. The Python loop runs over the
    fewer of the taps (one strided slice of every output position each) and
    the output positions (one window each, `_combine_window`): a huge window
    over a few positions costs no more Python steps than a small one.
    """
    (kh, kw), (sh, sw) = node.attrs["kernel"], node.attrs["stride"]
    padded = pad_spatial(np.asarray(x, dtype), node.attrs["pads"], fill)
    oh = (padded.shape[2] - kh) // sh + 1
    ow = (padded.shape[3] - kw) // sw + 1
    if 0 < oh and 0 < ow and oh * ow < kh * kw:
        out = np.empty(padded.shape[:2] + (oh, ow) + padded.shape[4:], dtype)
        for oy in range(oh):
            for ox in range(ow):
                window = padded[:, :, oy * sh:oy * sh + kh, ox * sw:ox * sw + kw]
                out[:, :, oy, ox] = _combine_window(window, combine, dtype)
        return out
    out = None
    for dy in range(kh):
        for dx in range(kw):
            tap = padded[:, :, dy:dy + sh * (oh - 1) + 1:sh, dx:dx + sw * (ow - 1) + 1:sw]
            out = tap.copy() if out is None else combine(out, tap, out=out)
    return out


def _combine_window(window: np.ndarray, combine, dtype) -> np.ndarray:
    """``combine`` over one (N, C, KH, KW, ...) window's taps in row-major order.

    ``combine.accumulate`` is sequential (``r[i] = combine(r[i - 1], a[i])``),
    unlike ``combine.reduce``, which may sum pairwise; rows of taps go through it
    in chunks of about `_TAP_CHUNK_ELEMENTS`, each starting from the last one's result.
    """
    rows = np.moveaxis(window, (2, 3), (0, 1))  # (KH, KW, N, C, ...)
    step = max(1, _TAP_CHUNK_ELEMENTS // max(1, rows[0].size))
    result = None
    for start in range(0, len(rows), step):
        chunk = np.array(rows[start:start + step], dtype)  # a copy, accumulated in place
        taps = chunk.reshape((-1,) + chunk.shape[2:])
        if result is not None:
            combine(result, taps[0], out=taps[0])
        combine.accumulate(taps, axis=0, out=taps)
        result = taps[-1]
    return result


def _maxpool(node: Node, x):
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return [_reduce_taps(x, node, fill, np.maximum, x.dtype)]


def _pool_counts(x, node: Node) -> np.ndarray:
    """Per output position, the elements its window averages over."""
    kernel = node.attrs["kernel"]
    trailing = (1,) * (x.ndim - 4)  # a blocked layout's axes after the spatial ones
    if node.attrs.get("count_include_pad"):
        return np.full((1, 1, 1, 1) + trailing, kernel[0] * kernel[1], np.int64)
    ones = np.ones((1, 1) + x.shape[2:4], np.int64)
    counts = windows(ones, kernel, node.attrs["stride"], node.attrs["pads"], 0).sum(axis=(4, 5))
    return counts.reshape(counts.shape + trailing)


def _avgpool(node: Node, x):
    sums = _reduce_taps(x, node, 0, np.add, np.float64)
    return [(sums / _pool_counts(x, node)).astype(np.float32)]


def _rounded_mean(sums: np.ndarray, counts) -> np.ndarray:
    """``sums / counts`` rounded half to even (a tie is exact in float64: counts < 2**26)."""
    return saturate_int8(np.clip(np.rint(sums / counts), -128, 127))


def _float_mean(node: Node, x, sums) -> np.ndarray:
    """As onnxruntime between DequantizeLinear and QuantizeLinear: the float32 mean of the
    dequantised values, quantised at the output's scale (half to even), zero points too."""
    levels = np.asarray(x, np.float32) - np.float32(node.attrs.get("in_zero_point", 0))
    mean = (sums(levels * np.float32(node.attrs["scale"]))
            / np.asarray(_pool_counts(x, node) if node.op == "qavgpool"
                         else x.shape[2] * x.shape[3], np.float32))
    return saturate_int8(np.clip(np.rint(mean.astype(np.float32)
                                         / np.float32(node.attrs["out_scale"]))
                                 + node.attrs.get("out_zero_point", 0), -128, 127))


def _qavgpool(node: Node, x):
    if "scale" in node.attrs:
        return [_float_mean(node, x, lambda v: _reduce_taps(v, node, 0, np.add, np.float32))]
    sums = _reduce_taps(x, node, 0, np.add, np.int64)
    return [_rounded_mean(sums, _pool_counts(x, node))]


def _qglobal_avgpool(node: Node, x):
    if "scale" in node.attrs:
        return [_float_mean(node, x, lambda v: v.sum(axis=(2, 3), keepdims=True,
                                                     dtype=np.float32))]
    return [_rounded_mean(np.asarray(x, np.int64).sum(axis=(2, 3), keepdims=True),
                          x.shape[2] * x.shape[3])]


# -- ONNX import ------------------------------------------------------------------------------


def _onnx_pool(op: str):
    def convert(node) -> None:
        node.arity(1)
        node.rank(0, (4,))
        if len(node.outputs) != 1:
            raise node.fail("the Indices output is not supported")
        kernel = node.ints("kernel_shape", (), 2)
        if node.ints("dilations", (1, 1), 2) != (1, 1):
            raise node.fail(f"attribute dilations={node.attrs['dilations']} is not supported "
                            "(only 1)")
        attrs = onnx_spatial(node, kernel)
        if any(p >= k for p, k in zip(attrs["pads"], kernel + kernel)):
            raise node.fail(f"pads {attrs['pads']} reach a whole kernel {kernel} (outputs "
                            "would see only padding); not supported")
        ceil = node.attr("ceil_mode", 0, (0, 1))
        node.attr("storage_order", 0, (0,))
        if op == "avgpool":
            attrs["count_include_pad"] = bool(node.attr("count_include_pad", 0, (0, 1)))
        source = node.inputs[0]
        if ceil:
            source = _ceil_mode(node, attrs)
        node.emit(op, [source], **attrs)
    return convert


def _ceil_mode(node, attrs: dict) -> str:
    """ONNX's ``ceil_mode=1`` as padding: the pool's input, with ``attrs`` made floor mode.

    Each axis has ``ceil((size + pads - kernel) / stride) + 1`` outputs, less the
    last where it would start past the input and its top (left) padding. The
    windows that reach past the bottom (right) padding see fewer elements: for a
    max, and for an average that does not count padding, that is more padding
    at the end (-inf, or not counted). An average that counts padding divides
    by the elements of the window inside the input and its given padding, but
    not beyond: that padding becomes zeros (a ``pad`` node) that it counts as
    elements, and the pool pads only the rest, uncounted.
    """
    height, width = node.importer.shape(node.inputs[0])[2:]
    top, left, bottom, right = attrs["pads"]
    extra = []
    for size, k, s, low, high in zip((height, width), attrs["kernel"], attrs["stride"],
                                     (top, left), (bottom, right)):
        count = -(-(size + low + high - k) // s) + 1
        if (count - 1) * s >= size + low:
            count -= 1
        extra.append(max(0, (count - 1) * s + k - (size + low + high)))
    pads = (top, left, bottom + extra[0], right + extra[1])
    n, c = node.importer.shape(node.inputs[0])[:2]
    ours = (n, c) + tuple((size + low + high - k) // s + 1 for size, k, s, low, high in zip(
        (height, width), attrs["kernel"], attrs["stride"], pads[:2], pads[2:]))
    theirs = node.importer.inferred_shape(node)
    if ours != theirs:
        raise node.fail(f"ceil_mode=1 gives output {ours} by ONNX's rule (no window starts in "
                        f"the bottom or right padding), but onnx shape inference says {theirs}, "
                        "which the next nodes' shapes follow; not supported")
    source = node.inputs[0]
    if attrs.get("count_include_pad") and any(extra) and any(attrs["pads"]):
        source = f"{node.name}/padded"
        shape = (n, c, height + top + bottom, width + left + right)
        node.importer.spend(math.prod(shape), 0, f"{node.where}: its padded input")
        node.importer.tensors[source] = Tensor(source, shape, np.float32)
        node.importer.nodes.append(Node(f"{node.name}/pad", "pad", [node.inputs[0]], [source],
                                        {"pads": attrs["pads"]}))
        pads = (0, 0, extra[0], extra[1])
    if any(extra) and "count_include_pad" in attrs:
        attrs["count_include_pad"] = False
    attrs["pads"] = pads
    return source


def _onnx_global(node) -> None:
    node.arity(1)
    node.rank(0, (4,))
    node.emit("global_avgpool")


# -- quantisation -----------------------------------------------------------------------------


def _quantize_average(op: str):
    def quantize(q, node: Node) -> None:
        """An average: exact integers at one power-of-two scale, else onnxruntime's float32
        arithmetic between the input's scale and the output's (which may differ)."""
        scale, zero = q.input_scale(node), q.input_zero(node)
        recorded = q.graph.tensors[node.outputs[0]]
        out = (recorded.exponent, recorded.scale) if recorded.quantized else scale
        calibrated = q.exponents.get(node.outputs[0])
        if not recorded.quantized and scale[0] is not None and calibrated is not None:
            # A mean spans less than its input (a global one far less: an SE block's
            # squeeze): at the input's step it would keep a few levels of it.
            out = (max(scale[0], calibrated), None)
        out_zero = recorded.zero_point if recorded.quantized else zero
        if scale == out and scale[0] is not None and not zero and not out_zero:
            q.emit(node, op, node.inputs[:1], scale)
        else:
            zeros = {"in_zero_point": zero, "out_zero_point": out_zero} if zero or out_zero else {}
            q.emit(node, op, node.inputs[:1], out, scale=q.real_scale(scale),
                   out_scale=q.real_scale(out), zero_point=out_zero, **zeros)
    return quantize


# -- network file -----------------------------------------------------------------------------


def _pooled(node: Node, x: Tensor) -> tuple[int, ...]:
    """A pool's output shape. Each side's padding is smaller than the window (as ONNX
    requires: no window sees only padding, so an average never divides by zero)."""
    n, c, h, w = rank(node, x, 4)
    (kh, kw), (sh, sw) = node.attrs["kernel"], node.attrs["stride"]
    top, left, bottom, right = pads = node.attrs["pads"]
    if max(top, bottom) >= kh or max(left, right) >= kw:
        raise GraphError(f"{node.describe()}: pads {pads} reach a whole {kh}x{kw} window "
                         "(a window would see only padding)")
    if h + top + bottom < kh or w + left + right < kw:
        raise GraphError(f"{node.describe()}: its {kh}x{kw} window is larger than its padded "
                         f"input ({h + top + bottom}x{w + left + right})")
    # The kernel pads its input first: that array is capped as tensors are.
    if n * c * (h + top + bottom) * (w + left + right) > MAX_TENSOR_ELEMENTS:
        raise GraphError(f"{node.describe()}: its padded input {n}x{c}x{h + top + bottom}x"
                         f"{w + left + right} holds more than the {MAX_TENSOR_ELEMENTS:,} "
                         "elements a network's tensor may hold")
    return n, c, (h + top + bottom - kh) // sh + 1, (w + left + right - kw) // sw + 1


def _global(node: Node, x: Tensor) -> tuple[int, ...]:
    n, c, _, _ = rank(node, x, 4)
    return n, c, 1, 1


# -- QDQ export -------------------------------------------------------------------------------


def _export_pool(onnx_op: str):
    def export(writer, node: Node) -> None:
        attrs = {}
        if node.op != "qglobal_avgpool":
            attrs = {"kernel_shape": list(node.attrs["kernel"]),
                     "strides": list(node.attrs["stride"]), "pads": list(node.attrs["pads"])}
        if node.op == "qavgpool":
            attrs["count_include_pad"] = int(node.attrs["count_include_pad"])
        writer.float_op(node, onnx_op, **attrs)
    return export


_SPATIAL = {"kernel": "pair", "stride": "pair", "pads": "pads"}
_FLOAT_MEAN = [{}, {"scale": "scale", "out_scale": "scale"},
               {"scale": "scale", "out_scale": "scale", "in_zero_point": "int",
                "out_zero_point": "int"}]

OPS = [
    Op("maxpool", "host", _WHY, _maxpool, onnx={"MaxPool": _onnx_pool("maxpool")},
       quantize=lambda q, node: q.same_scale(node), attrs=_SPATIAL, shape=_pooled,
       blocked=True, export=_export_pool("MaxPool")),
    Op("avgpool", "float", "float only: quantisation makes it a qavgpool", _avgpool,
       onnx={"AveragePool": _onnx_pool("avgpool")}, quantize=_quantize_average("qavgpool")),
    Op("global_avgpool", "float", "float only: quantisation makes it a qglobal_avgpool",
       lambda node, x: [x.mean(axis=(2, 3), keepdims=True, dtype=np.float32)],
       onnx={"GlobalAveragePool": _onnx_global},
       quantize=_quantize_average("qglobal_avgpool")),
    Op("qavgpool", "host", _WHY, _qavgpool, attrs={**_SPATIAL, "count_include_pad": "bool"},
       variants=_FLOAT_MEAN, shape=_pooled, dtype=np.int8, blocked=True,
       export=_export_pool("AveragePool")),
    Op("qglobal_avgpool", "host", _WHY, _qglobal_avgpool, attrs={}, variants=_FLOAT_MEAN,
       shape=_global, dtype=np.int8, blocked=True, export=_export_pool("GlobalAveragePool")),
]
