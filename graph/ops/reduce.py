"""Reductions: ``reduce_max`` (ONNX's ReduceMax and GlobalMaxPool) and ``reduce_mean``
(ReduceMean), float and int8.

A max selects one of its int8 inputs, so it keeps its input's scale and is
exact. A mean of int8 values at one power-of-two scale is the exact integer
mean (an int64 sum divided by the count) rounded half to even, as a
QuantizeLinear rounds the float mean at that scale; where the model records
another output scale (a QDQ model's), it computes as onnxruntime does
between DequantizeLinear and QuantizeLinear: the float32 mean of the
dequantised values, quantised at the output's scale (``scale`` and
``out_scale``). Both run on the host, on the accelerator's blocked layout
where they reduce only height and width of an image and keep its rank
(GlobalMaxPool's), since then they mix neither channels nor batch.
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.ops.base import Op, saturate_int8

__all__ = ["OPS", "quantize_convex"]

_WHY = "a reduction on the host; the accelerator's ISA has none"


# -- numpy semantics --------------------------------------------------------------------------


def _reduce_max(node: Node, x):
    return [np.asarray(x.max(axis=node.attrs["axes"], keepdims=node.attrs["keepdims"]))]


def _count(node: Node, x) -> int:
    return math.prod(x.shape[axis] for axis in node.attrs["axes"])


def _reduce_mean(node: Node, x):
    axes, keepdims = node.attrs["axes"], node.attrs["keepdims"]
    if x.dtype != np.int8:
        # As onnx's reference: numpy's mean accumulated in the input's dtype.
        return [np.asarray(np.mean(x, axis=axes, keepdims=keepdims, dtype=x.dtype))]
    if "scale" in node.attrs:
        values = np.asarray(x, np.float32) * np.float32(node.attrs["scale"])
        mean = np.asarray(np.mean(values, axis=axes, keepdims=keepdims, dtype=np.float32))
        with np.errstate(over="ignore"):   # beyond float32: +-inf, which saturates
            scaled = np.rint(mean / np.float32(node.attrs["out_scale"]))
        return [saturate_int8(np.clip(scaled, -128, 127))]
    # The sum is exact in int64 and the count below 2**28, so a tie is exact in float64.
    sums = np.asarray(x.sum(axis=axes, keepdims=keepdims, dtype=np.int64))
    return [saturate_int8(np.rint(sums / _count(node, x)))]


# -- ONNX import ------------------------------------------------------------------------------


def _onnx_axes(node) -> list[int] | None:
    """The axes as given (an attribute before opset 18, then an optional constant input);
    None when left out or empty."""
    if node.importer.opset < 18:
        node.arity(1)
        axes = node.attr("axes")
        if axes is not None and not (isinstance(axes, list)
                                     and all(isinstance(a, int) for a in axes)):
            raise node.fail(f"attribute axes={axes!r}: expected integers")
        return [int(a) for a in axes] if axes else None
    node.arity(1, 2)
    if len(node.inputs) < 2:
        return None
    axes = node.constant_input(1, "axes")
    if axes.dtype != np.int64 or axes.ndim != 1:
        raise node.fail(f"its axes ({node.inputs[1]!r}) must be a 1-D int64 tensor, not "
                        f"{axes.dtype.name} of shape {axes.shape}")
    return [int(a) for a in axes] or None


def _onnx_reduce(op: str):
    def convert(node) -> None:
        """Axes resolved and sorted; none given: every axis, or with
        ``noop_with_empty_axes`` the input itself."""
        axes = _onnx_axes(node)
        keepdims = node.attr("keepdims", 1, (0, 1))
        noop = node.attr("noop_with_empty_axes", 0, (0, 1)) if node.importer.opset >= 18 else 0
        shape = node.importer.shape(node.inputs[0])
        if 0 in shape:
            raise node.fail(f"input {node.inputs[0]!r} of shape {shape} is empty")
        if axes is None and noop:
            node.alias()
            return
        if axes is None:
            axes = list(range(len(shape)))
        if any(not -len(shape) <= axis < len(shape) for axis in axes):
            raise node.fail(f"axes {axes} are out of range for rank {len(shape)}")
        resolved = sorted(axis % len(shape) for axis in axes)
        if len(set(resolved)) != len(resolved):
            raise node.fail(f"axes {axes} repeat an axis")
        if not keepdims and len(resolved) == len(shape):
            raise node.fail("a reduction of every axis to a scalar (keepdims=0) is not "
                            "supported")
        node.emit(op, [node.inputs[0]], axes=tuple(resolved), keepdims=bool(keepdims))
    return convert


def _onnx_global_max(node) -> None:
    node.arity(1)
    shape = node.importer.shape(node.inputs[0])
    if len(shape) < 3:
        raise node.fail(f"input {node.inputs[0]!r} has shape {shape}; expected rank 3 or more "
                        "(batch, channels, spatial axes)")
    node.emit("reduce_max", axes=tuple(range(2, len(shape))), keepdims=True)


# -- quantisation -----------------------------------------------------------------------------


def quantize_convex(q, node: Node) -> None:
    """An operator whose values are weighted means of its input's (a mean, a bilinear
    resize): at the input's power-of-two scale, which holds them all, rounded by its
    kernel; else (a QDQ model's scales, or another scale recorded for the output)
    onnxruntime's float32 arithmetic between the two scales (``scale``, ``out_scale``)."""
    scale = q.input_scale(node)
    recorded = q.graph.tensors[node.outputs[0]]
    out = q.tensor_scale(recorded) if recorded.quantized else scale
    if scale == out and scale[0] is not None:
        q.emit(node, node.op, node.inputs[:1], scale)
    else:
        q.emit(node, node.op, node.inputs[:1], out, scale=q.real_scale(scale),
               out_scale=q.real_scale(out))


# -- network file -----------------------------------------------------------------------------


def _reduced(node: Node, x: Tensor) -> tuple[int, ...]:
    axes, keepdims = node.attrs["axes"], node.attrs["keepdims"]
    if any(not 0 <= axis < len(x.shape) for axis in axes) or len(set(axes)) != len(axes):
        raise GraphError(f"{node.describe()}: axes {list(axes)} are not distinct axes of "
                         f"{x.describe()}")
    if not keepdims and len(axes) == len(x.shape):
        raise GraphError(f"{node.describe()}: reduces every axis of {x.describe()} to a "
                         "scalar (keepdims false)")
    if "scale" in node.attrs and x.dtype != np.int8:
        raise GraphError(f"{node.describe()}: its input is {x.describe()}; scales apply to "
                         "int8")
    return tuple(1 if axis in axes else size for axis, size in enumerate(x.shape)
                 if keepdims or axis not in axes)


def _spatial_only(graph: Graph, node: Node) -> bool:
    """Height and width of an image, its rank kept: the blocked array's axes 2 and 3."""
    return (len(graph.tensors[node.inputs[0]].shape) == 4 and node.attrs["keepdims"]
            and set(node.attrs["axes"]) <= {2, 3})


# -- QDQ export -------------------------------------------------------------------------------


def _export(onnx_op: str):
    def export(writer, node: Node) -> None:
        writer.float_op(node, onnx_op, axes=list(node.attrs["axes"]),
                        keepdims=int(node.attrs["keepdims"]))
    return export


_AXES = {"axes": "ints", "keepdims": "bool"}

OPS = [
    Op("reduce_max", "host", _WHY, _reduce_max,
       onnx={"ReduceMax": _onnx_reduce("reduce_max"), "GlobalMaxPool": _onnx_global_max},
       quantize=lambda q, node: q.same_scale(node), attrs=_AXES, shape=_reduced,
       blocked=_spatial_only, export=_export("ReduceMax")),
    Op("reduce_mean", "host", _WHY, _reduce_mean, onnx={"ReduceMean": _onnx_reduce("reduce_mean")},
       quantize=quantize_convex, attrs=_AXES, variants=[{}, {"scale": "scale", "out_scale": "scale"}],
       shape=_reduced, blocked=_spatial_only, export=_export("ReduceMean")),
]
