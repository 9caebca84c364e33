"""``add`` (float) and ``qadd`` (int8): the residual add of two activations.

A constant operand is a bias, which `graph.passes.fusion` folds into the
layer before it (one no layer takes becomes a ``qaffine``, `graph.ops.arith`).
``qadd`` aligns its operands with left shifts and requantises with one
rounding right shift (half to even), or, with scales that are not powers of
two, rescales each in float32 as onnxruntime's QLinearAdd does; unless a conv
takes it into its epilogue (`graph.passes.residual`), it runs on the host, on
blocked arrays as well (it does not mix channels). Two computed operands of
different shapes (``[N, C, H, W] + [1, C, 1, 1]``) broadcast: they become a
``qadd_broadcast`` (`graph.ops.elementwise`), never part of a conv.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.arith import quantize_affine
from vdla.graph.ops.base import Op
from vdla.graph.ops.elementwise import qadd_kernel, quantize_two

__all__ = ["OPS"]


def _add(node: Node, a, b):
    out = a + b
    return [np.maximum(out, 0) if node.attrs.get("relu") else out]


def _onnx_add(node) -> None:
    node.arity(2)
    shapes = [node.importer.shape(name) for name in node.inputs]
    try:
        out = np.broadcast_shapes(*shapes)
    except ValueError:
        raise node.fail(f"its inputs of shapes {shapes[0]} and {shapes[1]} do not broadcast "
                        "together") from None
    constants = [node.importer.value(name) is not None for name in node.inputs]
    if all(constants):
        node.fold(node.importer.value(node.inputs[0]) + node.importer.value(node.inputs[1]))
        return
    for name, shape, constant in zip(node.inputs, shapes, constants):
        if any(constants) and not constant and tuple(shape) != tuple(out):
            raise node.fail(f"constant {node.inputs[constants.index(True)]!r} of shape "
                            f"{shapes[constants.index(True)]} does not broadcast onto "
                            f"{name!r} of shape {shape} (a bias must not enlarge it)")
    node.emit("add", relu=False)


def _onnx_sum(node) -> None:
    if len(node.inputs) == 1:
        node.alias()
    elif len(node.inputs) == 2:
        _onnx_add(node)
    else:
        raise node.fail(f"Sum of {len(node.inputs)} inputs is not supported (only 1 or 2)")


def _quantize_add(q, node: Node) -> None:
    """Fused into the conv producing an operand where it may be (the cheapest such conv),
    else a host ``qadd``: shifts at powers of two, float32 ratios otherwise."""
    from vdla.graph.passes.residual import cheapest_to_fuse, fusable
    convs = [q.pending.pop(name) for name in node.inputs if name in q.pending]
    shapes = {q.graph.tensors[name].shape for name in node.inputs}
    if len(shapes) > 1 and not any(q.graph.tensors[name].constant for name in node.inputs):
        # Operands that broadcast: no conv's epilogue adds a residual of another shape.
        for conv in convs:
            q.layer(conv, "qconv")
        q.check_zero_points(node)
        quantize_two(q, node)
        return
    if convs:
        # Two convs meeting: the one whose fusing costs least may take the add in, the
        # other is quantised apart first (the residual must exist).
        last = cheapest_to_fuse(q.graph, convs)
        for conv in convs:
            if conv is not last:
                q.layer(conv, "qconv")
        if q.layer(last, "qconv", fusable(q.graph, last)):
            return
        q.layer(last, "qconv")
    constant = [name for name in node.inputs if q.graph.tensors[name].constant]
    zeros = {"zero_a": q.input_zero(node, 0) if not constant else 0,
             "zero_b": q.input_zero(node, 1) if not constant else 0,
             "zero_y": q.graph.tensors[node.outputs[0]].zero_point}
    if constant:   # a bias no layer took (`graph.passes.fusion`): x * 1 + c
        q.check_zero_points(node)
        (other,) = [name for name in node.inputs if name != constant[0]]
        quantize_affine(q, node, other, 1.0, q.graph.value(constant[0]).astype(np.float64))
        return
    a, b, y = q.input_scale(node, 0), q.input_scale(node, 1), q.scale(node.outputs[0])
    relu = bool(node.attrs.get("relu"))
    if None in (a[0], b[0], y[0]) or any(zeros.values()):
        # onnxruntime's QLinearAdd: float32 scale ratios (and the operands' zero points)
        s_y = np.float32(q.real_scale(y))
        with np.errstate(over="ignore", under="ignore"):    # checked just below
            ratios = [np.float32(q.real_scale(a)) / s_y, np.float32(q.real_scale(b)) / s_y]
        q.check_float32(node, "the ratio of an operand's scale to the output's", ratios,
                        f"{q.real_scale(a):.6g} ({node.inputs[0]!r}), {q.real_scale(b):.6g} "
                        f"({node.inputs[1]!r}), output {float(s_y):.6g} ({node.outputs[0]!r})")
        q.emit(node, "qadd", node.inputs, y, relu=relu, scale_a=float(ratios[0]),
               scale_b=float(ratios[1]), zero_point=zeros["zero_y"],
               **(zeros if any(zeros.values()) else {}))
        return
    e_a, e_b = a[0], b[0]
    common = max(e_a, e_b)
    shift = max(common - y[0], 0)
    q.emit(node, "qadd", node.inputs, (common - shift, None), shift_a=common - e_a,
           shift_b=common - e_b, shift=shift, relu=relu)


def _added(node: Node, a: Tensor, b: Tensor) -> tuple[int, ...]:
    if a.shape != b.shape:  # the importer adds equal shapes only; blocked runs need them
        raise GraphError(f"{node.describe()}: adds {a.describe()} and {b.describe()}, not "
                         "two tensors of one shape")
    return a.shape


def _export_qadd(writer, node: Node) -> None:
    raw = f"{node.outputs[0]}/raw"
    writer.node("Add", [writer.dequantize(i) for i in node.inputs], [raw], node.name)
    writer.quantize(node, writer.relu(raw, node.attrs["relu"]))


OPS = [
    Op("add", "float", "float only: a bias folds into its layer, a residual add becomes a "
       "qadd or part of its conv", _add, onnx={"Add": _onnx_add, "Sum": _onnx_sum},
       quantize=_quantize_add),
    Op("qadd", "host", "the accelerator adds a residual only inside a conv's epilogue "
       "(graph.passes.residual); an add left over is elementwise numpy", qadd_kernel,
       attrs={"relu": "bool"},
       variants=[{"shift_a": "shift", "shift_b": "shift", "shift": "shift"},
                 {"scale_a": "scale", "scale_b": "scale"},
                 {"scale_a": "scale", "scale_b": "scale", "zero_a": "int", "zero_b": "int",
                  "zero_y": "int"}],
       arity=2, shape=_added, dtype=np.int8, blocked=True, export=_export_qadd),
]
