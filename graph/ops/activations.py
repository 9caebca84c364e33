"""Elementwise activations: ``relu`` and ``clip``, on float and int8 alike; ``hardsigmoid``,
``hardswish``, ``sigmoid``, ``tanh``, ``leakyrelu`` and ``silu``, as tables on int8;
``prelu`` (float), ``qprelu`` (int8).

``relu`` and ``clip`` keep their input's scale on int8 (a clip's bounds
become integers at that scale). The others quantise to a lookup table over
the 256 int8 inputs (a ``table`` attribute): each entry is the float
function of the dequantised input, quantised at the output's scale (half to
even), so the table is exactly what a float32 DequantizeLinear -> function
-> QuantizeLinear computes, for one gather per element. All run on the host,
on blocked arrays as on logical ones (they do not mix elements), where no
layer takes them into its epilogue (`graph.passes.fusion`).

``silu`` (``x * sigmoid(x)``, computed in float32 as the Mul of the two) has
no ONNX operator of the opsets vdla reads: exporters write the Mul of a
tensor by its Sigmoid, which `graph.passes.gates` fuses into one ``silu``.
A PRelu whose slope is one number is a ``leakyrelu``; a slope per channel
(any constant that broadcasts onto the input) is a ``prelu``, and on int8 a
``qprelu``: DequantizeLinear -> PRelu -> QuantizeLinear in float32,
``rint(where(x < 0, x s_x slope, x s_x) / s_y)``, its QDQ export as well.
It needs the slope's logical layout (no blocked arrays).
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


def _silu(node: Node, x):
    return x * _sigmoid(node, x)


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


def _export_silu(writer, node: Node) -> None:
    x = writer.dequantize(node.inputs[0])
    gate, raw = f"{node.outputs[0]}/sigmoid", f"{node.outputs[0]}/raw"
    writer.node("Sigmoid", [x], [gate], f"{node.name}/sigmoid")
    writer.node("Mul", [x, gate], [raw], node.name)
    writer.quantize(node, raw)


OPS.append(Op("silu", "host", _TABLE_WHY, _table_kernel(_silu), quantize=_quantize_table(_silu),
              attrs={"table": "table"}, shape=_tabled, dtype=np.int8, blocked=True,
              export=_export_silu))


# -- PRelu ------------------------------------------------------------------------------------


def _prelu(node: Node, x, slope):
    return [np.where(x < 0, x * slope, x).astype(np.asarray(x).dtype)]


def _qprelu(node: Node, x, slope):
    value = np.asarray(x, np.float32) * np.float32(node.attrs["scale"])
    with np.errstate(over="ignore", under="ignore"):   # +-inf saturates, tiny values are 0
        value = np.where(value < 0, value * slope, value)
    return [quantize_float(value, node.attrs["out_scale"])]


def _onnx_prelu(node) -> None:
    """The slope: a float constant that broadcasts onto the input (ONNX's unidirectional
    broadcasting); one number makes a ``leakyrelu``."""
    node.arity(2)
    slope = node.constant_input(1, "slope")
    x = node.importer.shape(node.inputs[0])
    if slope.dtype.kind != "f" or node.importer.tensors[node.inputs[0]].dtype.kind != "f":
        raise node.fail(f"its input and slope ({node.inputs[1]!r}, {slope.dtype.name}) must be "
                        "float")
    if slope.ndim > len(x) or any(n not in (1, m) for n, m in zip(slope.shape[::-1], x[::-1])):
        raise node.fail(f"its slope {node.inputs[1]!r} of shape {slope.shape} does not "
                        f"broadcast onto its input's {x}")
    node.finite(f"slope ({node.inputs[1]!r})", slope)
    if slope.size and np.all(slope == slope.flat[0]):
        node.emit("leakyrelu", [node.inputs[0]], alpha=float(slope.flat[0]))
        return
    node.emit("prelu")


def _quantize_prelu(q, node: Node) -> None:
    x = node.inputs[0]
    s_x, s_y = q.input_scale(node), q.scale(node.outputs[0])
    rank = len(q.graph.tensors[x].shape)
    slope = q.graph.value(node.inputs[1]).astype(np.float32)
    name = q.constant(f"{node.name}/slope", slope.reshape((1,) * (rank - slope.ndim)
                                                           + slope.shape))
    q.emit(node, "qprelu", [x, name], s_y, scale=q.real_scale(s_x),
           out_scale=q.real_scale(s_y))


def _qpreluded(node: Node, x: Tensor, slope: Tensor) -> tuple[int, ...]:
    if x.dtype != np.int8:
        raise GraphError(f"{node.describe()}: its input is {x.describe()}, not int8")
    if slope.dtype != np.float32 or len(slope.shape) != len(x.shape) or any(
            s not in (1, n) for s, n in zip(slope.shape, x.shape)):
        raise GraphError(f"{node.describe()}: its slope {slope.describe()} does not broadcast "
                         f"onto its input {x.describe()} (float32, of its rank)")
    return x.shape


OPS += [
    Op("prelu", "float", "float only: quantisation makes it a qprelu", _prelu,
       onnx={"PRelu": _onnx_prelu}, quantize=_quantize_prelu, arity=2),
    Op("qprelu", "host", "elementwise float32 on the host, between dequantising and "
       "requantising (a slope per channel)", _qprelu,
       attrs={"scale": "scale", "out_scale": "scale"}, arity=2, shape=_qpreluded,
       dtype=np.int8, blocked=False,
       export=lambda writer, node: writer.float_op(node, "PRelu", [node.inputs[1]])),
]
