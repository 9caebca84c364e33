"""Elementwise activations: ``relu`` and ``clip``, on float and int8 alike; ``hardsigmoid``,
``hardswish``, ``sigmoid``, ``tanh`` and ``leakyrelu``, as tables on int8.

``relu`` and ``clip`` keep their input's scale on int8 (a clip's bounds
become integers at that scale). The others quantise to a lookup table over
the 256 int8 inputs (a ``table`` attribute): each entry is the float
function of the dequantised input, quantised at the output's scale (half to
even), so the table is exactly what a float32 DequantizeLinear -> function
-> QuantizeLinear computes, for one gather per element. All run on the host,
on blocked arrays as on logical ones (they do not mix elements), where no
layer takes them into its epilogue (`graph.passes.fusion`).
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import Op, quantize_float, same_shape

__all__ = ["OPS"]

_WHY = "elementwise numpy where no layer's epilogue takes it in (graph.passes.fusion)"


def _onnx_clip(node) -> None:
    """Bounds left out are infinite; bounds given must be finite numbers."""
    if node.importer.opset < 11:
        node.arity(1)
        bounds = [node.attr(name) for name in ("min", "max")]
        for name, bound in zip(("min", "max"), bounds):
            if bound is not None:
                node.finite(f"{name} attribute", float(bound))
    else:
        node.arity(1, 3)
        bounds = []
        for index, name in ((1, "min"), (2, "max")):
            if index < len(node.inputs) and node.inputs[index]:
                bound = node.constant_input(index, name)
                if bound.size != 1:
                    raise node.fail(f"its {name} ({node.inputs[index]!r}) must hold one "
                                    f"value, not {bound.size}")
                node.finite(f"{name} ({node.inputs[index]!r})", bound)
                bounds.append(bound.item())
            else:
                bounds.append(None)
    low, high = (-np.inf if bounds[0] is None else bounds[0],
                 np.inf if bounds[1] is None else bounds[1])
    node.emit("clip", [node.inputs[0]], min=float(low), max=float(high))


def _quantize_clip(q, node: Node) -> None:
    step = q.real_scale(q.input_scale(node))
    low = max(-128, math.ceil(node.attrs["min"] / step)) if np.isfinite(
        node.attrs["min"]) else -128
    high = min(127, math.floor(node.attrs["max"] / step)) if np.isfinite(
        node.attrs["max"]) else 127
    q.same_scale(node, min=int(low), max=int(high))


def _export_clip(writer, node: Node) -> None:
    step = writer.graph.tensors[node.inputs[0]].real_scale
    names = [f"{node.name}/min", f"{node.name}/max"]
    for name, bound in zip(names, (node.attrs["min"], node.attrs["max"])):
        writer.constant(name, np.array(bound * step, np.float32))
    writer.float_op(node, "Clip", names)


OPS = [
    Op("relu", "host", _WHY, lambda node, x: [np.maximum(x, 0).astype(x.dtype)],
       onnx={"Relu": lambda node: (node.arity(1), node.emit("relu"))},
       quantize=lambda q, node: q.same_scale(node), attrs={}, shape=same_shape, blocked=True,
       export=lambda writer, node: writer.float_op(node, "Relu")),
    Op("clip", "host", _WHY,
       lambda node, x: [np.clip(x, node.attrs["min"], node.attrs["max"]).astype(x.dtype)],
       onnx={"Clip": _onnx_clip}, quantize=_quantize_clip, attrs={"min": "int", "max": "int"},
       shape=same_shape, blocked=True, export=_export_clip),
]


# -- functions as tables ----------------------------------------------------------------------


def _hardsigmoid(node: Node, x):
    alpha, beta = np.float32(node.attrs["alpha"]), np.float32(node.attrs["beta"])
    return np.clip(alpha * x + beta, 0, 1)


def _hardswish(node: Node, x):
    return x * np.clip(x * np.float32(1 / 6) + np.float32(0.5), 0, 1)


def _sigmoid(node: Node, x):
    with np.errstate(over="ignore"):   # exp(-x) of a large negative x: inf, 1/inf = 0
        return 1 / (1 + np.exp(-x))


def _leakyrelu(node: Node, x):
    return np.where(x >= 0, x, np.float32(node.attrs["alpha"]) * x)


def _table_kernel(function):
    def kernel(node: Node, x):
        if "table" in node.attrs:   # int8: one entry per input value
            table = np.asarray(node.attrs["table"], np.int8)
            return [table[np.asarray(x, np.int16) + 128]]
        return [np.asarray(function(node, np.asarray(x, np.float32)), np.float32)]
    return kernel


def _quantize_table(function):
    def quantize(q, node: Node) -> None:
        """The table: the function of each dequantised int8 input, at the output's scale."""
        s_x, s_y = q.input_scale(node), q.scale(node.outputs[0])
        inputs = np.arange(-128, 128, dtype=np.float32) * np.float32(q.real_scale(s_x))
        table = quantize_float(function(node, inputs), q.real_scale(s_y))
        q.emit(node, node.op, node.inputs, s_y, table=tuple(int(v) for v in table))
    return quantize


def _tabled(node: Node, x: Tensor) -> tuple[int, ...]:
    if x.dtype != np.int8:
        raise GraphError(f"{node.describe()}: its input is {x.describe()}; a table maps int8")
    return x.shape


def _onnx_unary(op: str, **defaults):
    def convert(node) -> None:
        node.arity(1)
        attrs = {}
        for name, default in defaults.items():
            attrs[name] = float(node.attr(name, default))
            node.finite(f"{name} attribute", attrs[name])
        node.emit(op, **attrs)
    return convert


def _export_table(onnx_op: str):
    def export(writer, node: Node) -> None:
        writer.float_op(node, onnx_op, **{key: value for key, value in node.attrs.items()
                                          if key != "table"})
    return export


_TABLE_WHY = "a 256-entry table lookup per element on the host (the accelerator has no tables)"
_TABLES = [
    ("hardsigmoid", "HardSigmoid", _hardsigmoid, {"alpha": 0.2, "beta": 0.5}),
    ("hardswish", "HardSwish", _hardswish, {}),
    ("sigmoid", "Sigmoid", _sigmoid, {}),
    ("tanh", "Tanh", lambda node, x: np.tanh(x), {}),
    ("leakyrelu", "LeakyRelu", _leakyrelu, {"alpha": 0.01}),
]
OPS += [Op(op, "host", _TABLE_WHY, _table_kernel(function),
           onnx={onnx_op: _onnx_unary(op, **defaults)}, quantize=_quantize_table(function),
           attrs={"table": "table", **{name: "float" for name in defaults}}, shape=_tabled,
           dtype=np.int8, blocked=True, export=_export_table(onnx_op))
        for op, onnx_op, function, defaults in _TABLES]
