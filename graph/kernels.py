"""numpy semantics of every graph operator, float and integer.

One function per operator (`KERNELS`), each taking the node and its input
arrays and returning its output arrays. They serve constant folding and
calibration (the float operators), the integer reference of a quantised graph
(`graph.reference`) and the host's share of a network run. The accelerator's
layers (``qconv``, ``qdense``) are written here from their definition (an
int64 sum, then the epilogue of `compiler.ops.Epilogue`), independently of the
compiler that lowers them, so a run checks the accelerator against them.

Spatial operators work on axes 2 and 3 and carry any axes after them along,
so they run unchanged on the blocked layout of `graph.layout`.

Rounding. The accelerator's layers round half up (``floor(x + 1/2)``): the
requantisation shift folds ``2**(shift-1)`` into the bias (`graph.quantize`),
so the hardware's plain arithmetic shift rounds that way, and a fixed-point
multiplier rounds so by itself (`compiler.requant`). The host's operators
(input quantisation, residual add, average pools) round half to even, as
ONNX's QuantizeLinear after a float operator does: onnxruntime running the
same scales then computes the same integers. With a ``scale`` attribute (a
scale that is not a power of two) they compute as onnxruntime does, in
float32 between DequantizeLinear and QuantizeLinear.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from vdla.compiler.ops import Epilogue
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node

__all__ = ["KERNELS", "run_node", "execute", "conv_sum", "round_shift", "round_shift_even",
           "saturate_int8",
           "layer_epilogue", "step"]


def saturate_int8(value: np.ndarray) -> np.ndarray:
    return np.clip(value, -128, 127).astype(np.int8)


def round_shift(value: np.ndarray, shift: int, dtype=np.int64) -> np.ndarray:
    """``floor(value / 2**shift + 1/2)`` in ``dtype`` (a left shift for a negative ``shift``)."""
    value = np.asarray(value, dtype)
    if shift <= 0:
        return value << -shift
    return (value + (1 << (shift - 1))) >> shift


def round_shift_even(value: np.ndarray, shift: int) -> np.ndarray:
    """``value / 2**shift`` rounded half to even (``shift >= 0``), in ``value``'s dtype."""
    if shift == 0:
        return value
    floor = value >> shift
    rest = value - (floor << shift)
    half = 1 << (shift - 1)
    return floor + ((rest > half) | ((rest == half) & ((floor & 1) == 1)))


def _pad(x: np.ndarray, pads, fill) -> np.ndarray:
    """Pad axes 2 and 3 (any axes after them, a blocked layout's, are carried along)."""
    top, left, bottom, right = pads
    if not any(pads):
        return x
    widths = ((0, 0), (0, 0), (top, bottom), (left, right)) + ((0, 0),) * (x.ndim - 4)
    return np.pad(x, widths, constant_values=fill)


def _windows(x: np.ndarray, kernel, stride, pads, fill, dilation=(1, 1)) -> np.ndarray:
    """(N, C, OH, OW, KH, KW) view of the padded input's windows (taps ``dilation`` apart)."""
    padded = _pad(x, pads, fill)
    extent = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
    view = np.lib.stride_tricks.sliding_window_view(padded, extent, axis=(2, 3))
    return view[:, :, ::stride[0], ::stride[1], ::dilation[0], ::dilation[1]]


def conv_sum(x: np.ndarray, w: np.ndarray, stride, pads, dtype, groups: int = 1,
             dilation=(1, 1)) -> np.ndarray:
    """The convolution's sums in ``dtype`` (int64 is exact for int8 operands).

    Per channel group, one contraction of the input's windows with the group's
    weights over (C/G, KH, KW) (a matrix product, BLAS for float32): output
    channel ``k`` reads input channels ``g * C/G ... (g + 1) * C/G - 1`` of its
    group ``g = k // (K/G)``, as ONNX's Conv.
    """
    windows = _windows(np.asarray(x, dtype), w.shape[2:], stride, pads, 0, dilation)
    n, c, oh, ow, kh, kw = windows.shape
    k = w.shape[0]
    grouped = windows.reshape(n, groups, c // groups, oh, ow, kh, kw)
    weights = np.asarray(w, dtype).reshape(groups, k // groups, c // groups, kh, kw)
    if groups == 1:
        out = np.tensordot(windows, weights[0], axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    else:
        out = np.einsum("ngcyxij,gkcij->ngkyx", grouped, weights, optimize=True)
    return np.ascontiguousarray(out.reshape(n, k, oh, ow))


def _conv_sum(node: Node, x, w, dtype) -> np.ndarray:
    """`conv_sum` with a conv or qconv node's attributes."""
    attrs = node.attrs
    return conv_sum(x, w, attrs["stride"], attrs["pads"], dtype, attrs["groups"],
                    attrs["dilation"])


def _channel(vector: np.ndarray, ndim: int) -> np.ndarray:
    return np.asarray(vector).reshape((1, -1) + (1,) * (ndim - 2))


def _conv(node: Node, x, w, b=None):
    out = _conv_sum(node, x, w, np.float32)
    if b is not None:
        out = out + _channel(b, 4)
    return [np.maximum(out, 0) if node.attrs.get("relu") else out]


def _dense(node: Node, x, w, b=None):
    out = np.asarray(x, np.float32) @ np.asarray(w, np.float32).T
    if b is not None:
        out = out + b
    return [np.maximum(out, 0) if node.attrs.get("relu") else out]


def _batchnorm(node: Node, x, scale, bias, mean, var):
    factor = scale / np.sqrt(var + node.attrs["epsilon"])
    return [((x - _channel(mean, x.ndim)) * _channel(factor, x.ndim)
             + _channel(bias, x.ndim)).astype(np.float32)]


def _add(node: Node, a, b):
    out = a + b
    return [np.maximum(out, 0) if node.attrs.get("relu") else out]


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
    padded = _pad(np.asarray(x, dtype), node.attrs["pads"], fill)
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
    counts = _windows(ones, kernel, node.attrs["stride"], node.attrs["pads"], 0).sum(axis=(4, 5))
    return counts.reshape(counts.shape + trailing)


def _avgpool(node: Node, x):
    sums = _reduce_taps(x, node, 0, np.add, np.float64)
    return [(sums / _pool_counts(x, node)).astype(np.float32)]


def _rounded_mean(sums: np.ndarray, counts) -> np.ndarray:
    """``sums / counts`` rounded half to even (a tie is exact in float64: counts < 2**26)."""
    return saturate_int8(np.clip(np.rint(sums / counts), -128, 127))


def _float_mean(node: Node, x, sums) -> np.ndarray:
    """As onnxruntime between DequantizeLinear and QuantizeLinear: the float32 mean of the
    dequantised values, quantised at the output's scale (half to even)."""
    mean = (sums(np.asarray(x, np.float32) * np.float32(node.attrs["scale"]))
            / np.asarray(_pool_counts(x, node) if node.op == "qavgpool"
                         else x.shape[2] * x.shape[3], np.float32))
    return saturate_int8(np.clip(np.rint(mean.astype(np.float32)
                                         / np.float32(node.attrs["out_scale"])), -128, 127))


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


def layer_epilogue(node: Node) -> Epilogue:
    """The epilogue of a ``qconv`` or ``qdense`` node (a fixed-point one with ``multiplier``
    or ``per_channel``; a qconv's with ``residual_shift`` adds its fourth input)."""
    attrs = node.attrs
    return Epilogue(True, attrs["shift"], attrs["relu"], attrs.get("multiplier"),
                    attrs.get("pre_shift", 0), attrs.get("per_channel", False),
                    attrs.get("residual_shift"))


def _qconv(node: Node, x, w, b, residual=None):
    return [layer_epilogue(node).apply(_conv_sum(node, x, w, np.int64), b, 1, residual)]


def _qdense(node: Node, x, w, b):
    acc = np.asarray(x, np.int64) @ np.asarray(w, np.int64).T
    return [layer_epilogue(node).apply(acc, b, 1)]


def _qadd(node: Node, a, b):
    if "scale_a" in node.attrs:
        # onnxruntime's QLinearAdd: each operand times its float32 scale ratio, summed in
        # float32 and rounded half to even.
        total = (np.asarray(a, np.float32) * np.float32(node.attrs["scale_a"])
                 + np.asarray(b, np.float32) * np.float32(node.attrs["scale_b"]))
        out = saturate_int8(np.clip(np.rint(total), -128, 127))
        return [np.maximum(out, 0) if node.attrs["relu"] else out]
    shift_a, shift_b = node.attrs["shift_a"], node.attrs["shift_b"]
    # int8 operands aligned by up to 2**22, summed (< 2**30) and rounded by up to 2**29 stay
    # inside int32, which numpy adds and shifts faster than int64.
    dtype = np.int32 if max(shift_a, shift_b) <= 22 and node.attrs["shift"] <= 30 else np.int64
    total = round_shift(a, -shift_a, dtype) + round_shift(b, -shift_b, dtype)
    out = saturate_int8(round_shift_even(total, node.attrs["shift"]))
    return [np.maximum(out, 0) if node.attrs["relu"] else out]


def _quantize_input(node: Node, x):
    if "scale" in node.attrs:  # as ONNX's QuantizeLinear: float32 division, half to even
        scaled = np.rint(np.asarray(x, np.float32) / np.float32(node.attrs["scale"]))
        return [saturate_int8(np.clip(scaled, -128, 127))]
    scaled = np.rint(np.asarray(x, np.float64) * 2.0 ** node.attrs["exponent"])
    return [saturate_int8(np.clip(scaled, -128, 127))]


def _softmax(node: Node, x):
    shifted = x - x.max(axis=node.attrs["axis"], keepdims=True)
    exp = np.exp(shifted)
    return [(exp / exp.sum(axis=node.attrs["axis"], keepdims=True)).astype(np.float32)]


def _qdq_shape(scale, x, axis) -> np.ndarray:
    scale = np.asarray(scale)
    if scale.ndim == 0:
        return scale
    shape = [1] * np.ndim(x)
    shape[axis] = -1
    return scale.reshape(shape)


def _quantize(node: Node, x, scale, zero_point=None):
    """ONNX QuantizeLinear: round half to even, saturate to the zero point's type."""
    dtype = np.dtype(zero_point.dtype) if zero_point is not None else np.dtype(np.uint8)
    zero = 0 if zero_point is None else _qdq_shape(zero_point, x, node.attrs["axis"])
    value = np.rint(x / _qdq_shape(scale, x, node.attrs["axis"])) + zero
    info = np.iinfo(dtype)
    return [np.clip(value, info.min, info.max).astype(dtype)]


def _dequantize(node: Node, x, scale, zero_point=None):
    zero = 0 if zero_point is None else _qdq_shape(zero_point, x, node.attrs["axis"])
    return [((np.asarray(x, np.int64) - zero) * _qdq_shape(scale, x, node.attrs["axis"])
             ).astype(np.float32)]


KERNELS: dict[str, Callable] = {
    "conv": _conv,
    "dense": _dense,
    "batchnorm": _batchnorm,
    "relu": lambda node, x: [np.maximum(x, 0).astype(x.dtype)],
    "clip": lambda node, x: [np.clip(x, node.attrs["min"], node.attrs["max"]).astype(x.dtype)],
    "add": _add,
    "maxpool": _maxpool,
    "avgpool": _avgpool,
    "global_avgpool": lambda node, x: [x.mean(axis=(2, 3), keepdims=True, dtype=np.float32)],
    "flatten": lambda node, x: [x.reshape(int(np.prod(x.shape[:node.attrs["axis"]])), -1)],
    "reshape": lambda node, x: [x.reshape(node.attrs["shape"])],
    "softmax": _softmax,
    "pad": lambda node, x: [_pad(x, node.attrs["pads"], 0)],
    "quantize": _quantize,
    "dequantize": _dequantize,
    "quantize_input": _quantize_input,
    "qconv": _qconv,
    "qdense": _qdense,
    "qadd": _qadd,
    "qavgpool": _qavgpool,
    "qglobal_avgpool": _qglobal_avgpool,
    "dequantize_output": lambda node, x: [np.asarray(x, np.float32) * step(node.attrs)],
}


def step(attrs: dict) -> np.float32:
    """A quantize_input or dequantize_output node's scale: ``scale``, or ``2**-exponent``."""
    return np.float32(attrs["scale"] if "scale" in attrs else 2.0 ** -attrs["exponent"])


def run_node(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs of ``node`` on input arrays ``args``."""
    kernel = KERNELS.get(node.op)
    if kernel is None:
        raise GraphError(f"{node.describe()}: no numpy kernel for operator {node.op!r}")
    return kernel(node, *args)


def execute(graph: Graph, feeds: dict[str, np.ndarray], *, keep: bool = False,
            hook: Callable[[Node, list[np.ndarray]], None] | None = None) -> dict[str, np.ndarray]:
    """Run ``graph`` in numpy: the outputs (every tensor with ``keep=True``).

    ``hook(node, outputs)`` is called after each node (calibration records ranges with it).
    """
    values = {name: t.value for name, t in graph.tensors.items() if t.constant}
    values.update(feeds)
    readers = {}
    for index, node in enumerate(graph.nodes):
        for name in node.inputs:
            readers[name] = index
    for index, node in enumerate(graph.nodes):
        outputs = run_node(node, [values[name] for name in node.inputs])
        for name, array in zip(node.outputs, outputs):
            values[name] = array
        if hook is not None:
            hook(node, outputs)
        if not keep:  # free what no later node reads, so big networks fit in memory
            for name in node.inputs:
                if readers.get(name) == index and name not in graph.outputs \
                        and not graph.tensors[name].constant:
                    values.pop(name, None)
    if keep:
        return values
    return {name: values[name] for name in graph.outputs}
