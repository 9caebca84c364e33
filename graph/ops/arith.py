"""Arithmetic with constants: ``mul``, ``sub`` and ``div`` (float), ``qaffine`` and
``requantize`` (int8).

An activation times, plus, minus or divided by a constant (a torch export's
input normalisation ``(x - mean) / std``, a scaling ``x * 0.5``) is affine:
``y = x * a + b`` with constants ``a`` and ``b`` broadcast onto ``x``. Its
integer form ``qaffine`` computes as onnxruntime does between
DequantizeLinear and QuantizeLinear, in float32: ``q_y = rint((q_x * s_x * a
+ b) / s_y)`` (half to even, saturated; then a fused ReLU's ``max(q_y, 0)``),
which is also its QDQ export. An add
of a constant that no layer takes as its bias (`graph.passes.fusion`) is one
too. Two computed operands (``x * gate``), of any shapes that broadcast, become
``qmul``, ``qsub`` or ``qdiv`` (`graph.ops.elementwise`).

``requantize`` moves int8 values to another scale, ``rint(q * s_in / s_out)``
in float32: a Concat's inputs onto their common scale (`graph.ops.slicing`).
"""

from __future__ import annotations

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import Op, emit_or_fold, quantize_float, same_shape
from vdla.graph.ops.elementwise import quantize_two

__all__ = ["OPS", "quantize_affine"]

_WHY = "elementwise float32 arithmetic on the host, between dequantising and requantising"


def _divide(a, b):
    """ONNX's Div: integers truncate toward zero."""
    if np.asarray(a).dtype.kind in "iu" and np.asarray(b).dtype.kind in "iu":
        quotient = np.abs(a) // np.abs(b)
        return (np.sign(a) * np.sign(b) * quotient).astype(np.result_type(a, b))
    return a / b


_FUNCTIONS = {"mul": np.multiply, "sub": np.subtract, "div": _divide}


def _binary(node: Node, a, b):
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return [np.asarray(_FUNCTIONS[node.op](a, b))]


def _qaffine(node: Node, x, a, b):
    with np.errstate(over="ignore"):   # beyond float32: +-inf, which saturates
        value = np.asarray(x, np.float32) * np.float32(node.attrs["scale"]) * a + b
    out = quantize_float(value, node.attrs["out_scale"])
    return [np.maximum(out, 0) if node.attrs["relu"] else out]


def _requantize(node: Node, x):
    value = np.asarray(x, np.float32) * np.float32(node.attrs["scale"])
    return [quantize_float(value, node.attrs["out_scale"])]


# -- ONNX import ------------------------------------------------------------------------------


def _onnx_binary(op: str):
    def convert(node) -> None:
        """Of two constants, folded; of a computed tensor and a constant, the constant
        must broadcast onto the other (a Div's divisor); two computed tensors broadcast
        together."""
        node.arity(2)
        importer = node.importer
        values = [importer.value(name) for name in node.inputs]
        if all(v is not None for v in values):
            emit_or_fold(node, _binary, op)
            return
        constant = 0 if values[0] is not None else 1 if values[1] is not None else None
        if constant is None:
            _two_computed(node)
            node.emit(op)
            return
        if op == "div" and constant == 0:
            raise node.fail("a Div of a constant by a computed tensor is not supported (only "
                            "by a constant divisor)")
        x = importer.shape(node.inputs[1 - constant])
        c = importer.shape(node.inputs[constant])
        if len(c) > len(x) or any(n not in (1, m) for n, m in zip(c[::-1], x[::-1])):
            raise node.fail(f"constant {node.inputs[constant]!r} of shape {c} does not "
                            f"broadcast onto {x}")
        if values[constant].dtype.kind != "f":
            raise node.fail(f"constant {node.inputs[constant]!r} is "
                            f"{values[constant].dtype.name}, not float")
        if op == "div" and np.any(values[constant] == 0):
            raise node.fail(f"its divisor {node.inputs[constant]!r} holds zeros")
        node.emit(op)
    return convert


def _two_computed(node) -> None:
    """Two computed operands: any shapes numpy broadcasts (`graph.ops.elementwise`)."""
    shapes = [node.importer.shape(name) for name in node.inputs]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise node.fail(f"its inputs of shapes {shapes[0]} and {shapes[1]} do not broadcast "
                        "together") from None


# -- quantisation -----------------------------------------------------------------------------


def quantize_affine(q, node: Node, x: str, a, b) -> None:
    """``node`` as a ``qaffine`` of ``x``: ``x * a + b`` (float constants broadcast onto
    ``x``'s shape), requantised to the output's scale."""
    shape = q.graph.tensors[x].shape
    s_x, s_y = q.input_scale(node, node.inputs.index(x)), q.scale(node.outputs[0])
    a_name = q.constant(f"{node.name}/a", np.asarray(a, np.float32).reshape(
        np.broadcast_shapes(np.shape(a), (1,) * len(shape))))
    b_name = q.constant(f"{node.name}/b", np.asarray(b, np.float32).reshape(
        np.broadcast_shapes(np.shape(b), (1,) * len(shape))))
    q.emit(node, "qaffine", [x, a_name, b_name], s_y, scale=q.real_scale(s_x),
           out_scale=q.real_scale(s_y), relu=bool(node.attrs.get("relu")))


def _quantize_binary(q, node: Node) -> None:
    if not any(q.graph.tensors[name].constant for name in node.inputs):
        quantize_two(q, node)
        return
    constant = 0 if q.graph.tensors[node.inputs[0]].constant else 1
    x, c = node.inputs[1 - constant], q.graph.value(node.inputs[constant]).astype(np.float64)
    if node.op == "mul":
        a, b = c, 0.0
    elif node.op == "sub":
        a, b = (-1.0, c) if constant == 0 else (1.0, -c)
    else:
        a, b = 1.0 / c, 0.0
    quantize_affine(q, node, x, a, b)


# -- network file -----------------------------------------------------------------------------


def _affined(node: Node, x: Tensor, a: Tensor, b: Tensor) -> tuple[int, ...]:
    for constant in (a, b):
        if constant.dtype != np.float32 or len(constant.shape) != len(x.shape) or any(
                c not in (1, n) for c, n in zip(constant.shape, x.shape)):
            raise GraphError(f"{node.describe()}: {constant.describe()} does not broadcast "
                             f"onto its input {x.describe()} (float32, of its rank)")
    if x.dtype != np.int8:
        raise GraphError(f"{node.describe()}: its input is {x.describe()}, not int8")
    return x.shape


# -- QDQ export -------------------------------------------------------------------------------


def _export_qaffine(writer, node: Node) -> None:
    x, a, b = node.inputs
    scaled, shifted = f"{node.outputs[0]}/mul", f"{node.outputs[0]}/raw"
    writer.node("Mul", [writer.dequantize(x), a], [scaled], node.name)
    writer.node("Add", [scaled, b], [shifted], f"{node.name}/add")
    writer.quantize(node, writer.relu(shifted, node.attrs["relu"]))


def _export_requantize(writer, node: Node) -> None:
    writer.quantize(node, writer.dequantize(node.inputs[0]))


_RESCALE = {"scale": "scale", "out_scale": "scale"}

OPS = [
    *(Op(op, "float", "float only: quantisation makes it a qaffine (by a constant) or a "
         f"q{op} (graph.ops.elementwise)", _binary,
         onnx={name: _onnx_binary(op)}, quantize=_quantize_binary, arity=2)
      for op, name in (("mul", "Mul"), ("sub", "Sub"), ("div", "Div"))),
    Op("qaffine", "host", _WHY, _qaffine, attrs={**_RESCALE, "relu": "bool"}, arity=3, shape=_affined,
       dtype=np.int8, blocked=False, export=_export_qaffine),
    Op("requantize", "host", "int8 values onto another scale (a Concat's inputs), on the host",
       _requantize, attrs=_RESCALE, shape=same_shape, dtype=np.int8, blocked=True,
       export=_export_requantize),
]
