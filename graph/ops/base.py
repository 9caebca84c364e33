"""What a graph operator declares (`Op`), and the helpers the operators' modules share.

An `Op` is one operator of `graph.ir`, declared once: its ONNX import, its
numpy semantics, its quantisation rule, where it runs and why, how a network
file checks it and how it is exported as QDQ. The fields an operator leaves
out (None) are what it does not have: a float operator that quantisation
replaces has no network-file entry, an integer one no ONNX import.

The callables' arguments are duck-typed, so the graph layer never imports
the layers above it: a converter gets the ONNX importer's node
(`vdla.frontend.onnx`'s ``_OnnxNode``: ``attr``, ``arity``, ``emit``,
``fold``, ``importer`` ...), a quantisation rule the quantiser
(`graph.quantize`'s ``_Quantizer``: ``scale``, ``input_scale``, ``emit``,
``same_scale`` ...), an export rule the QDQ writer (`graph.export`'s
``_Writer``: ``dequantize``, ``quantize``, ``node``, ``constant``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor

__all__ = ["Op", "PLACES", "MAX_TENSOR_ELEMENTS", "ONNX_DTYPES", "rank", "same_shape", "axis_of",
           "saturate_int8", "round_shift", "round_shift_even", "quantize_float", "pad_spatial",
           "windows", "onnx_axis", "onnx_spatial", "emit_or_fold"]

# Where an operator's nodes run: ``layer`` (the accelerator, or the cpu target's generated
# C), ``host`` (numpy on the host, whatever the tier), ``float`` (only in float graphs:
# quantisation replaces it), ``import`` (folded into constants at import, never a node).
PLACES = ("layer", "host", "float", "import")
# What a network file's tensor may hold (`graph.network_file`), and so what any array a
# host kernel makes on the way (a pool's padded input) may hold.
MAX_TENSOR_ELEMENTS = 1 << 28
# The ONNX element types vdla reads, by their TensorProto code (the integer ones that
# numpy computes as ONNX does; quantisation takes float32 inputs only).
ONNX_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
               7: np.int64, 9: np.bool_, 11: np.float64, 12: np.uint32, 13: np.uint64}


@dataclasses.dataclass(frozen=True)
class Op:
    """One graph operator.

    Parameters
    ----------
    name : str
        The operator of `graph.ir.Node.op`.
    place : str
        One of `PLACES`.
    why : str
        Why it runs there (what `graph.placement` and the docs say).
    kernel : callable, optional
        ``kernel(node, *arrays) -> [arrays]``: its numpy semantics
        (`graph.kernels`), float and int8.
    onnx : mapping of str to callable
        The ONNX operators it imports, each with its converter
        ``convert(onnx_node)`` (attribute checks, then ``emit`` or ``fold``).
    quantize : callable, optional
        ``quantize(quantizer, node)``: the integer nodes of a float node.
    attrs : mapping of str to str, optional
        Its attributes in a network file and their kinds
        (`graph.network_file`); None: it never appears in one.
    variants : sequence of mapping
        Groups of attributes of which a node has exactly one beside ``attrs``.
    arity : int, optional
        How many inputs a host node reads (None: one or more).
    shape : callable, optional
        ``shape(node, *tensors) -> tuple``: a host node's output shape from
        its input tensors, by arithmetic (nothing is allocated or run); raises
        `GraphError` for inputs its kernel cannot take.
    dtype : type, optional
        A host node's output dtype (None: its first input's).
    blocked : bool or callable
        Whether a host node computes on the accelerator's blocked layout as
        on logical arrays (`graph.layout`); a callable decides per node,
        ``blocked(graph, node)``.
    export : callable, optional
        ``export(writer, node)``: its QDQ ONNX form (`graph.export`).
    layer : callable, optional
        ``layer(graph, node)``: the compiler operator of a layer.
    """

    name: str
    place: str
    why: str
    kernel: Callable[..., list[np.ndarray]] | None = None
    onnx: Mapping[str, Callable[[Any], None]] = dataclasses.field(default_factory=dict)
    quantize: Callable[[Any, Node], None] | None = None
    attrs: Mapping[str, str] | None = None
    variants: Sequence[Mapping[str, str]] = ({},)
    arity: int | None = 1
    shape: Callable[..., tuple[int, ...]] | None = None
    dtype: type | None = None
    blocked: bool | Callable[[Graph, Node], bool] = False
    export: Callable[[Any, Node], None] | None = None
    layer: Callable[[Graph, Node], Any] | None = None

    def __post_init__(self):
        if self.place not in PLACES:
            raise ValueError(f"operator {self.name!r}: place {self.place!r} is not one of "
                             f"{PLACES}")

    def runs_blocked(self, graph: Graph, node: Node) -> bool:
        return self.blocked(graph, node) if callable(self.blocked) else self.blocked


# -- shape rules ------------------------------------------------------------------------------


def rank(node: Node, tensor: Tensor, expected: int) -> tuple[int, ...]:
    """``tensor``'s shape, which must have ``expected`` axes."""
    if len(tensor.shape) != expected:
        raise GraphError(f"{node.describe()}: input {tensor.name!r} is {tensor.describe()}, "
                         f"not of rank {expected}")
    return tensor.shape


def same_shape(node: Node, x: Tensor) -> tuple[int, ...]:
    return x.shape


def axis_of(node: Node, x: Tensor, axis: int) -> int:
    """``axis`` (negative: from the end) of ``x``, or `GraphError`."""
    if not -len(x.shape) <= axis < len(x.shape):
        raise GraphError(f"{node.describe()}: axis {axis} is out of range for {x.describe()}")
    return axis % len(x.shape)


# -- integer arithmetic -----------------------------------------------------------------------


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


def quantize_float(value: np.ndarray, scale: float) -> np.ndarray:
    """``value / scale`` in float32, rounded half to even and saturated to int8: ONNX's
    QuantizeLinear (zero point 0)."""
    with np.errstate(over="ignore"):   # beyond float32: +-inf, which saturates
        scaled = np.rint(np.asarray(value, np.float32) / np.float32(scale))
    return saturate_int8(np.clip(scaled, -128, 127))


# -- spatial helpers --------------------------------------------------------------------------


def pad_spatial(x: np.ndarray, pads, fill) -> np.ndarray:
    """Pad axes 2 and 3 (any axes after them, a blocked layout's, are carried along)."""
    top, left, bottom, right = pads
    if not any(pads):
        return x
    widths = ((0, 0), (0, 0), (top, bottom), (left, right)) + ((0, 0),) * (x.ndim - 4)
    return np.pad(x, widths, constant_values=fill)


def windows(x: np.ndarray, kernel, stride, pads, fill, dilation=(1, 1)) -> np.ndarray:
    """(N, C, OH, OW, KH, KW) view of the padded input's windows (taps ``dilation`` apart)."""
    padded = pad_spatial(x, pads, fill)
    extent = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
    view = np.lib.stride_tricks.sliding_window_view(padded, extent, axis=(2, 3))
    return view[:, :, ::stride[0], ::stride[1], ::dilation[0], ::dilation[1]]


# -- ONNX import helpers ----------------------------------------------------------------------


def onnx_axis(node, name: str, default: int, rank_: int) -> int:
    """An ONNX axis attribute resolved against a rank, or the node's one-line refusal."""
    axis = node.attr(name, default)
    if not isinstance(axis, int):
        raise node.fail(f"attribute {name}={axis!r} is not an integer")
    if not -rank_ <= axis < rank_:
        raise node.fail(f"axis {axis} is out of range for rank {rank_}")
    return axis % rank_


def emit_or_fold(node, kernel, op: str, inputs: list[str] | None = None, *,
                 output: int | None = None, **attrs) -> None:
    """Emit the IR node (``op`` on ``inputs``, default the ONNX node's), or, where every
    input is a constant, its value: ``kernel`` runs once at import (shape arithmetic, a
    Transpose of a weight), so that later converters read the result as a constant.
    ``output``: which of the ONNX node's outputs the node writes (one of a Split's)."""
    names = list(node.inputs if inputs is None else inputs)
    values = [node.importer.value(name) for name in names]
    if values and all(value is not None for value in values):
        target = node.outputs[output or 0]
        (value,) = kernel(Node(node.name, op, names, [target], attrs), *values)
        node.fold(value, output=output)
        return
    node.emit(op, inputs, output=output, **attrs)


def onnx_spatial(node, kernel: tuple[int, int],
                 dilation: tuple[int, int] = (1, 1)) -> dict[str, Any]:
    """kernel, stride and pads (top, left, bottom, right) of a Conv or pooling node.

    ``auto_pad`` SAME sizes the padding for the dilated kernel's extent.
    """
    stride = node.ints("strides", (1, 1), 2)
    extent = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
    auto = node.attr("auto_pad", "NOTSET", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"))
    pads = node.ints("pads", (0, 0, 0, 0), 4)
    if auto == "VALID":
        pads = (0, 0, 0, 0)
    elif auto.startswith("SAME"):
        height, width = node.importer.shape(node.inputs[0])[2:]
        totals = [max((-(-size // s) - 1) * s + k - size, 0)
                  for size, s, k in zip((height, width), stride, extent)]
        small = [total // 2 for total in totals]
        large = [total - half for total, half in zip(totals, small)]
        begin, end = (small, large) if auto == "SAME_UPPER" else (large, small)
        pads = (begin[0], begin[1], end[0], end[1])
    if any(p < 0 for p in pads) or any(s <= 0 for s in stride):
        raise node.fail(f"negative pads {pads} or non-positive strides {stride}")
    sizes = node.importer.shape(node.inputs[0])[2:]
    for axis, size, k, d, low, high in zip(("height", "width"), sizes, kernel, dilation,
                                           pads[:2], pads[2:]):
        if size + low + high < (k - 1) * d + 1:
            raise node.fail(f"its kernel spans {(k - 1) * d + 1} in {axis} (size {k}, dilation "
                            f"{d}) but the padded input has {size + low + high} ({size} + pads "
                            f"{low}, {high}): the output would be empty")
    return {"kernel": kernel, "stride": stride, "pads": pads}
