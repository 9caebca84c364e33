"""Data movement: ``flatten``, ``reshape`` (ONNX's Reshape, Squeeze, Unsqueeze, Identity and
inference Dropout), ``expand`` (a broadcast onto a constant shape) and ``pad`` (around the
image: zeros, a constant ``value``, or the edge's or the reflected values with ``edge`` or
``reflect``).

They move values without computing: an int8 tensor keeps its scale, and a
pad's constant is quantised at it (half to even, as QuantizeLinear), refused
where it falls outside int8 rather than saturated. They run on the host;
zero padding, and the flatten of a 1x1 image (whose bytes are its input's),
also on blocked arrays.
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.ops.base import Op, emit_or_fold, pad_spatial, rank

__all__ = ["OPS"]

_WHY = "data movement on the host (numpy)"


# -- ONNX import ------------------------------------------------------------------------------


def _onnx_flatten(node) -> None:
    node.arity(1)
    shape = node.importer.shape(node.inputs[0])
    axis = node.attr("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise node.fail(f"axis {node.attrs.get('axis')} is out of range for shape {shape}")
    node.emit("flatten", axis=axis)


def _onnx_reshape(node) -> None:
    if node.importer.opset < 5 or "shape" in node.attrs:
        raise node.fail("the shape attribute (opset < 5) is not supported")
    node.arity(2)
    target = [int(v) for v in node.constant_input(1, "shape").reshape(-1)]
    node.attr("allowzero", 0, (0,))
    shape = node.importer.inferred_shape(node)
    if math.prod(shape) != math.prod(node.importer.shape(node.inputs[0])):
        raise node.fail(f"shape {target} does not hold the input's "
                        f"{node.importer.shape(node.inputs[0])}")
    node.emit("reshape", [node.inputs[0]], shape=shape)


def _onnx_pad(node) -> None:
    """Padding of a 4-D tensor's height and width: a constant, or the edge's or the reflected
    values (wrap is refused)."""
    if node.importer.opset < 11:
        raise node.fail("the pads attribute (opset < 11) is not supported")
    node.arity(2, 4)
    shape = node.rank(0, (4,))
    mode = node.attr("mode", "constant", ("constant", "edge", "reflect"))
    pads = [int(v) for v in node.constant_input(1, "pads").reshape(-1)]
    axes = list(range(4))
    if len(node.inputs) > 3 and node.inputs[3]:
        given = [int(v) for v in node.constant_input(3, "axes").reshape(-1)]
        if any(not -4 <= axis < 4 for axis in given) or len({a % 4 for a in given}) != len(given):
            raise node.fail(f"axes {given} are not distinct axes of rank 4")
        axes = [axis % 4 for axis in given]
    if len(pads) != 2 * len(axes):
        raise node.fail(f"pads {pads} are not two per axis of {axes}")
    full = [0] * 8
    for i, axis in enumerate(axes):
        full[axis], full[axis + 4] = pads[i], pads[i + len(axes)]
    fill = (node.constant_input(2, "constant_value")
            if len(node.inputs) > 2 and node.inputs[2] else np.zeros(1))
    if fill.size != 1:
        raise node.fail(f"its constant_value holds {fill.size} values (expected one)")
    fill = float(fill.reshape(-1)[0])
    if not np.isfinite(fill):
        raise node.fail(f"its constant_value {fill} is not finite")
    if any(full[i] for i in (0, 1, 4, 5)) or min(full) < 0:
        raise node.fail(f"pads {full}: only padding added to height and width is supported "
                        "(none on batch or channels, none negative)")
    if mode == "reflect" and any(full[i] >= shape[2 + i % 2] for i in (2, 3, 6, 7)):
        raise node.fail(f"pads {full} in mode reflect: each must be smaller than its axis "
                        f"{shape[2:]}")
    attrs = {"pads": (full[2], full[3], full[6], full[7])}
    if mode != "constant":
        attrs[mode] = True
    elif fill != 0:
        attrs["value"] = fill
    node.emit("pad", [node.inputs[0]], **attrs)


def _axes(node) -> list[int] | None:
    """A Squeeze's or Unsqueeze's axes as given (an attribute before opset 13, then a
    constant input); None when left out."""
    if node.importer.opset < 13:
        node.arity(1)
        axes = node.attr("axes")
        return None if axes is None else [int(axis) for axis in axes]
    node.arity(1, 2)
    return ([int(v) for v in node.constant_input(1, "axes").reshape(-1)]
            if len(node.inputs) > 1 else None)


def _resolved(node, axes: list[int], rank: int) -> list[int]:
    if any(not -rank <= axis < rank for axis in axes):
        raise node.fail(f"axes {axes} are out of range for rank {rank}")
    resolved = [axis % rank for axis in axes]
    if len(set(resolved)) != len(resolved):
        raise node.fail(f"axes {axes} repeat an axis")
    return resolved


def _reshape_kernel(node: Node, x):
    return [x.reshape(node.attrs["shape"])]


def _onnx_squeeze(node) -> None:
    """A reshape that drops axes of size 1 (every one, where no axes are given)."""
    shape = node.importer.shape(node.inputs[0])
    axes = _axes(node)
    axes = ([axis for axis, size in enumerate(shape) if size == 1] if axes is None
            else _resolved(node, axes, len(shape)))
    for axis in axes:
        if shape[axis] != 1:
            raise node.fail(f"axis {axis} of shape {shape} is not of size 1")
    kept = tuple(size for axis, size in enumerate(shape) if axis not in axes)
    emit_or_fold(node, _reshape_kernel, "reshape", [node.inputs[0]], shape=kept)


def _onnx_unsqueeze(node) -> None:
    """A reshape that inserts axes of size 1."""
    shape = node.importer.shape(node.inputs[0])
    axes = _axes(node)
    if axes is None:
        raise node.fail("its axes are missing")
    axes = _resolved(node, axes, len(shape) + len(axes))
    sizes = iter(shape)
    out = tuple(1 if axis in axes else next(sizes) for axis in range(len(shape) + len(axes)))
    emit_or_fold(node, _reshape_kernel, "reshape", [node.inputs[0]], shape=out)


def _expand(node: Node, x):
    return [np.ascontiguousarray(np.broadcast_to(x, node.attrs["shape"]))]


def _onnx_expand(node) -> None:
    """Broadcast onto a constant shape (ONNX's, both ways: the larger of each axis)."""
    node.arity(2)
    target = node.constant_input(1, "shape")
    if target.dtype != np.int64 or target.ndim != 1:
        raise node.fail(f"its shape ({node.inputs[1]!r}) must be a 1-D int64 tensor, not "
                        f"{target.dtype.name} of shape {target.shape}")
    shape = node.importer.shape(node.inputs[0])
    try:
        out = tuple(int(v) for v in np.broadcast_shapes(shape, tuple(int(v) for v in target)))
    except ValueError:
        raise node.fail(f"shape {target.tolist()} and its input's {shape} do not broadcast "
                        "together") from None
    if 0 in out:
        raise node.fail(f"its output of shape {out} is empty")
    node.importer.spend(math.prod(out), 0, f"{node.where}: output")
    emit_or_fold(node, _expand, "expand", [node.inputs[0]], shape=out)


def _onnx_dropout(node) -> None:
    node.arity(1, 3)
    if len(node.outputs) > 1:
        readers = {name for n in node.importer.model.graph.node for name in n.input}
        readers.update(value.name for value in node.importer.model.graph.output)
        if node.outputs[1] in readers:
            raise node.fail("the mask output is not supported")
        node.outputs = node.outputs[:1]
    node.ignore("ratio", "seed", "is_test")
    if len(node.inputs) == 3 and node.constant_input(2, "training_mode").any():
        raise node.fail("training mode is not supported")
    node.inputs = node.inputs[:1]
    node.alias()


# -- network file -----------------------------------------------------------------------------


def _flattened(node: Node, x: Tensor) -> tuple[int, ...]:
    axis = node.attrs["axis"]
    if not 0 <= axis <= len(x.shape):
        raise GraphError(f"{node.describe()}: axis {axis} is out of range for "
                         f"{x.describe()}")
    return math.prod(x.shape[:axis]), math.prod(x.shape[axis:])


def _reshaped(node: Node, x: Tensor) -> tuple[int, ...]:
    shape = node.attrs["shape"]
    if math.prod(shape) != math.prod(x.shape):
        raise GraphError(f"{node.describe()}: shape {list(shape)} does not hold its input "
                         f"{x.describe()}")
    return shape


def _expanded(node: Node, x: Tensor) -> tuple[int, ...]:
    shape = tuple(node.attrs["shape"])
    if len(x.shape) > len(shape) or any(n not in (1, m) for n, m in zip(x.shape[::-1],
                                                                        shape[::-1])):
        raise GraphError(f"{node.describe()}: {x.describe()} does not broadcast onto shape "
                         f"{list(shape)}")
    return shape


def _pad(node: Node, x):
    """The padded image (axes after the spatial ones, a blocked layout's, carried along)."""
    top, left, bottom, right = node.attrs["pads"]
    widths = ((0, 0), (0, 0), (top, bottom), (left, right)) + ((0, 0),) * (x.ndim - 4)
    for mode in ("edge", "reflect"):
        if node.attrs.get(mode):
            return [np.pad(x, widths, mode=mode)]
    return [pad_spatial(x, node.attrs["pads"], node.attrs.get("value", 0))]


def _padded(node: Node, x: Tensor) -> tuple[int, ...]:
    n, c, h, w = rank(node, x, 4)
    top, left, bottom, right = node.attrs["pads"]
    for mode in ("edge", "reflect"):
        if mode in node.attrs and node.attrs[mode] is not True:
            raise GraphError(f"{node.describe()}: attribute {mode} must be true where given")
    if node.attrs.get("reflect") and (max(top, bottom) >= h or max(left, right) >= w):
        raise GraphError(f"{node.describe()}: reflected pads {list(node.attrs['pads'])} reach "
                         f"past its {h}x{w} image")
    value = node.attrs.get("value", 0.0)
    if x.dtype == np.int8 and (value != int(value) or not -128 <= value <= 127):
        raise GraphError(f"{node.describe()}: its value {value!r} is not an int8 value (its "
                         f"input is {x.describe()})")
    return n, c, h + top + bottom, w + left + right


def _pad_blocked(graph: Graph, node: Node) -> bool:
    """Zero padding: a blocked layout's padding channels stay zero."""
    return set(node.attrs) == {"pads"} or node.attrs.get("value") == 0


def _flatten_blocked(graph: Graph, node: Node) -> bool:
    """A flatten of a 1x1 image: the blocked bytes of (N, C, 1, 1) are those of (N, C)."""
    return graph.tensors[node.inputs[0]].shape[2:] == (1, 1) and node.attrs["axis"] == 1


# -- QDQ export -------------------------------------------------------------------------------


def _export_reshape(writer, node: Node) -> None:
    name = f"{node.name}/shape"
    writer.constant(name, np.array(node.attrs["shape"], np.int64))
    writer.float_op(node, "Reshape", [name])


def _export_pad(writer, node: Node) -> None:
    top, left, bottom, right = node.attrs["pads"]
    name = f"{node.name}/pads"
    writer.constant(name, np.array([0, 0, top, left, 0, 0, bottom, right], np.int64))
    mode = next((m for m in ("edge", "reflect") if node.attrs.get(m)), "constant")
    extra = [name]
    if node.attrs.get("value"):   # the int8 value, dequantised
        extra.append(writer.constant(f"{node.name}/value", np.array(
            node.attrs["value"] * writer.graph.tensors[node.inputs[0]].real_scale, np.float32)))
    writer.float_op(node, "Pad", extra, **({} if mode == "constant" else {"mode": mode}))


def _quantize_pad(q, node: Node) -> None:
    """At its input's scale; a constant quantised there as QuantizeLinear does (half to
    even), refused where int8 cannot hold it."""
    if "value" not in node.attrs:
        q.same_scale(node)
        return
    step = q.real_scale(q.input_scale(node))
    level = float(np.rint(np.float32(node.attrs["value"]) / np.float32(step)))
    if not -128 <= level <= 127:
        raise GraphError(f"{node.describe()}: its constant value {node.attrs['value']:g} is "
                         f"{level:g} steps of its input's scale {step:.6g}, outside int8 "
                         "(-128 to 127); refused rather than saturated")
    q.same_scale(node, value=level)


def _same_scale(q, node: Node) -> None:
    q.same_scale(node)


OPS = [
    Op("flatten", "host", _WHY,
       lambda node, x: [x.reshape(int(np.prod(x.shape[:node.attrs["axis"]])), -1)],
       onnx={"Flatten": _onnx_flatten}, quantize=_same_scale, attrs={"axis": "int"},
       shape=_flattened, blocked=_flatten_blocked,
       export=lambda writer, node: writer.float_op(node, "Flatten", axis=node.attrs["axis"])),
    Op("reshape", "host", _WHY, _reshape_kernel,
       onnx={"Reshape": _onnx_reshape, "Squeeze": _onnx_squeeze, "Unsqueeze": _onnx_unsqueeze,
             "Identity": lambda node: (node.arity(1), node.alias()),
             "Dropout": _onnx_dropout},
       quantize=_same_scale, attrs={"shape": "shape"}, shape=_reshaped,
       export=_export_reshape),
    Op("expand", "host", _WHY, _expand, onnx={"Expand": _onnx_expand}, quantize=_same_scale,
       attrs={"shape": "shape"}, shape=_expanded,
       export=lambda writer, node: writer.float_op(node, "Expand", [writer.constant(
           f"{node.name}/shape", np.array(node.attrs["shape"], np.int64))])),
    Op("pad", "host", "padding around the image (zeros where a conv's LOAD cannot pad as "
       "much, graph.passes.pads)", _pad, onnx={"Pad": _onnx_pad}, quantize=_quantize_pad,
       attrs={"pads": "pads"},
       variants=[{}, {"value": "float"}, {"edge": "bool"}, {"reflect": "bool"}],
       shape=_padded, blocked=_pad_blocked, export=_export_pad),
]
