"""Tensors cut, joined and permuted: ``concat``, ``slice`` (ONNX's Slice, and Split as one
slice per output) and ``transpose``.

They move int8 values without computing, so each output keeps its input's
scale. A Concat of inputs at different scales first brings each onto one
common scale, the coarsest of them (the one whose int8 range holds every
input's: nothing saturates), or the model's own for a QDQ model: an input at
another scale is requantised (``requantize``, `graph.ops.arith`) and the
concat itself then moves int8 values. A constant input (a vision
transformer's class token) weighs in with the power-of-two scale that holds
its range and is quantised at the common one (half to even). They run on
the host on logical arrays (a channel concat or slice of the blocked layout
would move blocks partly filled).
"""

from __future__ import annotations

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import Op, axis_of, emit_or_fold, onnx_axis, quantize_float

__all__ = ["OPS"]

_WHY = "data movement on the host (numpy)"


# -- numpy semantics --------------------------------------------------------------------------


def _concat(node: Node, *arrays):
    return [np.concatenate(arrays, axis=node.attrs["axis"])]


def _slices(node: Node) -> tuple[slice, ...]:
    """The node's slice of each axis (a negative end: through index 0, going down)."""
    return tuple(slice(start, None if end < 0 else end, step) for start, end, step
                 in zip(node.attrs["starts"], node.attrs["ends"], node.attrs["steps"]))


def _slice(node: Node, x):
    return [np.ascontiguousarray(x[_slices(node)])]


def _transpose(node: Node, x):
    return [np.ascontiguousarray(np.transpose(x, node.attrs["perm"]))]


# -- ONNX import ------------------------------------------------------------------------------


def _onnx_concat(node) -> None:
    if not node.inputs:
        raise node.fail("expected 1 or more inputs, got 0")
    node.arity(1, len(node.inputs))
    if "axis" not in node.attrs:
        raise node.fail("attribute axis is missing")
    axis = onnx_axis(node, "axis", 0, len(node.importer.shape(node.inputs[0])))
    emit_or_fold(node, _concat, "concat", axis=axis)


def _normalised(shape, starts, ends, axes, steps) -> tuple[list[int], list[int], list[int]]:
    """Full-rank starts, ends and steps with Python's slice semantics resolved: each start
    an index, each end one past the last index (-1: through index 0, with a negative step)."""
    full = [[0, size, 1] for size in shape]
    for start, end, axis, step in zip(starts, ends, axes, steps):
        # slice.indices clamps as ONNX's Slice does (ends past the end, INT64 extremes).
        full[axis] = list(slice(start, end, step).indices(shape[axis]))
    return [s for s, _, _ in full], [e for _, e, _ in full], [st for _, _, st in full]


def _onnx_slice(node) -> None:
    shape = node.importer.shape(node.inputs[0]) if node.inputs else ()
    if node.importer.opset < 10:
        node.arity(1)
        starts, ends = (list(node.attr(name, [])) for name in ("starts", "ends"))
        axes = list(node.attr("axes", list(range(len(starts)))))
        steps = [1] * len(starts)
    else:
        node.arity(3, 5)
        starts, ends = ([int(v) for v in node.constant_input(i, what).reshape(-1)]
                        for i, what in ((1, "starts"), (2, "ends")))
        axes = ([int(v) for v in node.constant_input(3, "axes").reshape(-1)]
                if len(node.inputs) > 3 and node.inputs[3] else list(range(len(starts))))
        steps = ([int(v) for v in node.constant_input(4, "steps").reshape(-1)]
                 if len(node.inputs) > 4 and node.inputs[4] else [1] * len(starts))
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise node.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ "
                        "in length")
    if any(not -len(shape) <= axis < len(shape) for axis in axes):
        raise node.fail(f"axes {axes} are out of range for rank {len(shape)}")
    axes = [axis % len(shape) for axis in axes]
    if len(set(axes)) != len(axes):
        raise node.fail(f"axes {axes} repeat an axis")
    if 0 in steps:
        raise node.fail(f"steps {steps} hold a zero")
    starts, ends, steps = _normalised(shape, starts, ends, axes, steps)
    emit_or_fold(node, _slice, "slice", [node.inputs[0]], starts=tuple(starts),
                 ends=tuple(ends), steps=tuple(steps))


def emit_slice(node, starts, ends, axes, steps, *, drop: int | None = None) -> None:
    """Emit (or fold) the slice of the ONNX node's first input (ONNX Slice's starts, ends,
    axes and steps); with ``drop``, that axis (sliced to size 1) is then removed by a
    ``reshape`` (a Gather at a scalar index)."""
    shape = node.importer.shape(node.inputs[0])
    starts, ends, steps = _normalised(shape, starts, ends, axes, steps)
    if drop is None:
        emit_or_fold(node, _slice, "slice", [node.inputs[0]], starts=tuple(starts),
                     ends=tuple(ends), steps=tuple(steps))
        return
    cut = tuple(1 if axis == drop else size for axis, size in enumerate(shape))
    from vdla.graph.ops.layers import _intermediate
    name = _intermediate(node, "slice", cut, node.importer.tensors[node.inputs[0]].dtype)
    node.importer.nodes.append(Node(name, "slice", [node.inputs[0]], [name], {
        "starts": tuple(starts), "ends": tuple(ends), "steps": tuple(steps)}))
    node.emit("reshape", [name], shape=tuple(size for axis, size in enumerate(shape)
                                             if axis != drop))


def _onnx_split(node) -> None:
    """One slice per output, along the axis."""
    node.arity(1, 2)
    shape = node.importer.shape(node.inputs[0])
    axis = onnx_axis(node, "axis", 0, len(shape))
    count = len(node.outputs)
    if len(node.inputs) > 1 and node.inputs[1]:
        sizes = [int(v) for v in node.constant_input(1, "split").reshape(-1)]
    elif node.attr("split") is not None:
        sizes = [int(v) for v in node.attr("split")]
    else:
        parts = node.attr("num_outputs", count)
        if parts != count:
            raise node.fail(f"num_outputs {parts} but {count} outputs")
        size = -(-shape[axis] // count)   # the last part smaller where it does not divide
        sizes = [min(size, shape[axis] - i * size) for i in range(count)]
    if len(sizes) != count or sum(sizes) != shape[axis] or min(sizes) <= 0:
        raise node.fail(f"split {sizes} does not cut axis {axis} ({shape[axis]}) into "
                        f"{count} parts of at least 1")
    start = 0
    for index, size in enumerate(sizes):
        starts, ends, steps = _normalised(shape, [start], [start + size], [axis], [1])
        emit_or_fold(node, _slice, "slice", [node.inputs[0]], output=index,
                     starts=tuple(starts), ends=tuple(ends), steps=tuple(steps))
        start += size


def _onnx_transpose(node) -> None:
    node.arity(1)
    rank = len(node.importer.shape(node.inputs[0]))
    perm = node.attr("perm", list(range(rank))[::-1])
    if sorted(perm) != list(range(rank)):
        raise node.fail(f"perm {list(perm)} is not a permutation of the {rank} axes")
    emit_or_fold(node, _transpose, "transpose", perm=tuple(int(p) for p in perm))


# -- quantisation -----------------------------------------------------------------------------


def _quantize_concat(q, node: Node) -> None:
    """Every input at one common scale: the model's own (QDQ), else the coarsest input's;
    an input at another scale is requantised first."""
    scales = []
    for index, name in enumerate(node.inputs):
        tensor = q.graph.tensors[name]
        if not tensor.constant:
            scales.append(q.input_scale(node, index))
        elif tensor.quantized:
            scales.append((tensor.exponent, tensor.scale))
        else:   # the power-of-two scale that holds its range (a class token)
            magnitude = float(np.max(np.abs(tensor.value))) if tensor.value.size else 0.0
            scales.append((q.exponent_for(magnitude, f"tensor {name!r}"), None))
    recorded = q.graph.tensors[node.outputs[0]]
    common = ((recorded.exponent, recorded.scale) if recorded.quantized
              else max(scales, key=q.real_scale))
    inputs = []
    for index, (name, scale) in enumerate(zip(node.inputs, scales)):
        if q.graph.tensors[name].constant:
            value = np.asarray(q.graph.value(name), np.float32)
            inputs.append(q.constant(f"{node.name}/constant{index}_q",
                                     quantize_float(value, q.real_scale(common)), common))
            continue
        inputs.append(name if scale == common else
                      q.requantize(node, name, scale, common, f"{node.name}/requantize{index}"))
    q.emit(node, "concat", inputs, common)


# -- network file -----------------------------------------------------------------------------


def _concatenated(node: Node, *inputs: Tensor) -> tuple[int, ...]:
    first = inputs[0]
    axis = axis_of(node, first, node.attrs["axis"])
    for tensor in inputs[1:]:
        if len(tensor.shape) != len(first.shape) or tensor.dtype != first.dtype or any(
                a != b for i, (a, b) in enumerate(zip(tensor.shape, first.shape)) if i != axis):
            raise GraphError(f"{node.describe()}: joins {first.describe()} and "
                             f"{tensor.describe()} along axis {axis}: the other axes and the "
                             "dtypes must agree")
    return tuple(sum(t.shape[axis] for t in inputs) if i == axis else size
                 for i, size in enumerate(first.shape))


def _sliced(node: Node, x: Tensor) -> tuple[int, ...]:
    starts, ends, steps = (node.attrs[key] for key in ("starts", "ends", "steps"))
    if not len(starts) == len(ends) == len(steps) == len(x.shape):
        raise GraphError(f"{node.describe()}: starts, ends and steps must each hold one "
                         f"value per axis of {x.describe()}")
    shape = []
    for size, start, end, step in zip(x.shape, starts, ends, steps):
        # In range as `slice.indices` leaves them: start a valid index, end -1 .. size.
        count = (len(range(start, end, step)) if step and 0 <= start < size
                 and -1 <= end <= size else 0)
        if count == 0:
            raise GraphError(f"{node.describe()}: slice {start}:{end}:{step} is not a "
                             f"non-empty slice of an axis of {size}")
        shape.append(count)
    return tuple(shape)


def _transposed(node: Node, x: Tensor) -> tuple[int, ...]:
    perm = node.attrs["perm"]
    if sorted(perm) != list(range(len(x.shape))):
        raise GraphError(f"{node.describe()}: perm {list(perm)} is not a permutation of the "
                         f"axes of {x.describe()}")
    return tuple(x.shape[axis] for axis in perm)


# -- QDQ export -------------------------------------------------------------------------------


def _export_concat(writer, node: Node) -> None:
    raw = f"{node.outputs[0]}/raw"
    writer.node("Concat", [writer.dequantize(name) for name in node.inputs], [raw], node.name,
                axis=node.attrs["axis"])
    writer.quantize(node, raw)


def _export_slice(writer, node: Node) -> None:
    # A negative end (through index 0) is written as INT64's least, which ONNX clamps to it.
    ends = [end if end >= 0 else -(1 << 63) for end in node.attrs["ends"]]
    names = []
    for key, values in (("starts", node.attrs["starts"]), ("ends", ends),
                        ("steps", node.attrs["steps"])):
        names.append(writer.constant(f"{node.name}/{key}", np.array(values, np.int64)))
    axes = writer.constant(f"{node.name}/axes", np.arange(len(ends), dtype=np.int64))
    writer.float_op(node, "Slice", [names[0], names[1], axes, names[2]])


def _same_scale(q, node: Node) -> None:
    q.same_scale(node)


OPS = [
    Op("concat", "host", _WHY, _concat, onnx={"Concat": _onnx_concat},
       quantize=_quantize_concat, attrs={"axis": "int"}, arity=None, shape=_concatenated,
       export=_export_concat),
    Op("slice", "host", _WHY, _slice, onnx={"Slice": _onnx_slice, "Split": _onnx_split},
       quantize=_same_scale, attrs={"starts": "ints", "ends": "ints", "steps": "ints"},
       shape=_sliced, export=_export_slice),
    Op("transpose", "host", _WHY, _transpose, onnx={"Transpose": _onnx_transpose},
       quantize=_same_scale, attrs={"perm": "ints"}, shape=_transposed,
       export=lambda writer, node: writer.float_op(node, "Transpose",
                                                   perm=list(node.attrs["perm"]))),
]
