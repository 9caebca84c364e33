"""A transformer's host operators: ``layernorm`` (float) and ``qlayernorm`` (int8); ``gelu``,
``erf``, ``sqrt``, ``reciprocal`` and ``pow`` (by a constant exponent) as int8 tables; ``take``
(a Gather of a constant table at computed indices: an embedding).

LayerNormalization (opset 17, and the ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/
Div decomposition older exporters write, which `graph.passes.layernorm`
fuses into one) normalises over the axes from ``axis`` on. Its integer form
computes as onnxruntime does between DequantizeLinear and QuantizeLinear:
the float32 layer norm of the dequantised input, with its float32 scale and
bias, quantised at the output's scale (half to even); that is also its QDQ
export. The elementwise functions become 256-entry tables, as
`graph.ops.activations`' do: each entry the float32 function of the
dequantised int8 input, quantised at the output's scale; where the function
has no value (the square root of a negative number: NaN) the entry is 0.
GELU (ONNX's Gelu of opset 20, and the Erf and tanh forms exporters write,
which `graph.passes.gelu` fuses) is one table, ``tanh`` true for the tanh
approximation.

A Gather of a computed tensor at constant indices (a CLS token, the query
of a packed QKV) is a ``slice`` (and a ``reshape`` dropping a scalar index's
axis), evenly spaced indices only; of a constant table at computed integer
indices, a ``take``, whose int8 form gathers the table quantised at its own
scale.
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import Op, axis_of, onnx_axis, quantize_float

__all__ = ["OPS", "gather_computed", "gelu", "layer_norm"]

_WHY_TABLE = "a 256-entry table lookup per element on the host (the accelerator has no tables)"
_WHY_NORM = ("a float32 layer norm of the dequantised values on the host, requantised (the "
             "accelerator has no division or square root)")


# -- float functions --------------------------------------------------------------------------


_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    """erf in float64 (Python's, correctly rounded to float32 for all but a few values),
    as float32."""
    return np.asarray(_ERF(np.asarray(x, np.float64)), np.float64).astype(np.float32)


def gelu(x, tanh: bool = False) -> np.ndarray:
    """GELU in float32: ``x/2 (1 + erf(x/sqrt 2))``, or its tanh approximation."""
    x = np.asarray(x, np.float32)
    if tanh:
        inner = np.float32(np.sqrt(2 / np.pi)) * (x + np.float32(0.044715) * x * x * x)
        return np.float32(0.5) * x * (np.float32(1) + np.tanh(inner))
    return np.float32(0.5) * x * (np.float32(1) + _erf(x / np.float32(np.sqrt(2))))


def layer_norm(x, gamma, beta, axis: int, epsilon: float) -> np.ndarray:
    """ONNX's LayerNormalization in float32 over the axes from ``axis`` on."""
    x = np.asarray(x, np.float32)
    axes = tuple(range(axis, x.ndim))
    centred = x - x.mean(axis=axes, keepdims=True)
    variance = (centred * centred).mean(axis=axes, keepdims=True)
    normed = centred / np.sqrt(variance + np.float32(epsilon))
    return (normed * gamma + beta).astype(np.float32)


def _power(node: Node, x):
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.power(x, np.float32(node.attrs["exponent"]))


def _sqrt(node: Node, x):
    with np.errstate(invalid="ignore"):   # a negative input: NaN, as ONNX's Sqrt
        return np.sqrt(x)


def _reciprocal(node: Node, x):
    with np.errstate(divide="ignore"):
        return np.float32(1) / x


_FUNCTIONS = {
    "gelu": lambda node, x: gelu(x, bool(node.attrs.get("tanh"))),
    "erf": lambda node, x: _erf(x),
    "sqrt": _sqrt,
    "reciprocal": _reciprocal,
    "pow": _power,
}


# -- tables -----------------------------------------------------------------------------------


def _table_kernel(node: Node, x):
    if "table" in node.attrs:
        table = np.asarray(node.attrs["table"], np.int8)
        return [table[np.asarray(x, np.int16) + 128]]
    return [np.asarray(_FUNCTIONS[node.op](node, np.asarray(x, np.float32)), np.float32)]


def _quantize_table(q, node: Node) -> None:
    """The function of each dequantised int8 input at the output's scale (NaN: 0)."""
    s_x, s_y = q.input_scale(node), q.scale(node.outputs[0])
    inputs = np.arange(-128, 128, dtype=np.float32) * np.float32(q.real_scale(s_x))
    values = _FUNCTIONS[node.op](node, inputs)
    table = quantize_float(np.where(np.isnan(values), np.float32(0), values), q.real_scale(s_y))
    q.emit(node, node.op, node.inputs, s_y, table=tuple(int(v) for v in table))


def _tabled(node: Node, x: Tensor) -> tuple[int, ...]:
    if x.dtype != np.int8:
        raise GraphError(f"{node.describe()}: its input is {x.describe()}; a table maps int8")
    return x.shape


def _onnx_unary(op: str):
    def convert(node) -> None:
        node.arity(1)
        if node.importer.tensors[node.inputs[0]].dtype.kind != "f":
            raise node.fail(f"its input {node.inputs[0]!r} is not float")
        node.emit(op)
    return convert


def _onnx_gelu(node) -> None:
    node.arity(1)
    approximate = node.attr("approximate", "none", ("none", "tanh"))
    node.emit("gelu", **({"tanh": True} if approximate == "tanh" else {}))


def _onnx_pow(node) -> None:
    """A power by one constant number (a layer norm's square)."""
    node.arity(2)
    exponent = node.constant_input(1, "exponent")
    if exponent.size != 1:
        raise node.fail(f"its exponent {node.inputs[1]!r} holds {exponent.size} values "
                        "(only one number is supported)")
    node.finite(f"exponent ({node.inputs[1]!r})", exponent)
    base = node.importer.value(node.inputs[0])
    if base is not None:
        node.fold(np.power(base, exponent.reshape(()).astype(base.dtype)))
        return
    if node.importer.tensors[node.inputs[0]].dtype.kind != "f":
        raise node.fail(f"its base {node.inputs[0]!r} is not float")
    node.emit("pow", [node.inputs[0]], exponent=float(exponent.reshape(-1)[0]))


def _export_table(writer, node: Node) -> None:
    x = writer.dequantize(node.inputs[0])
    raw = f"{node.outputs[0]}/raw"
    if node.op == "pow":
        exponent = writer.constant(f"{node.name}/exponent",
                                   np.array(node.attrs["exponent"], np.float32))
        writer.node("Pow", [x, exponent], [raw], node.name)
    elif node.op == "gelu":   # opset 17 has no Gelu: its definition, in the same float32 steps
        _export_gelu(writer, node, x, raw)
    else:
        writer.node({"erf": "Erf", "sqrt": "Sqrt", "reciprocal": "Reciprocal"}[node.op], [x],
                    [raw], node.name)
    writer.quantize(node, raw)


def _export_gelu(writer, node: Node, x: str, raw: str) -> None:
    out = node.outputs[0]
    half, one = (writer.constant(f"{node.name}/{name}", np.array(value, np.float32))
                 for name, value in (("half", 0.5), ("one", 1.0)))
    if node.attrs.get("tanh"):
        cube, inner, scaled = f"{out}/cube", f"{out}/inner", f"{out}/scaled"
        k, c = (writer.constant(f"{node.name}/{name}", np.array(value, np.float32))
                for name, value in (("k", 0.044715), ("c", np.sqrt(2 / np.pi))))
        writer.node("Mul", [x, x], [f"{out}/square"], f"{node.name}/square")
        writer.node("Mul", [f"{out}/square", x], [cube], f"{node.name}/cube")
        writer.node("Mul", [cube, k], [f"{out}/kcube"], f"{node.name}/kcube")
        writer.node("Add", [x, f"{out}/kcube"], [inner], f"{node.name}/inner")
        writer.node("Mul", [inner, c], [scaled], f"{node.name}/scaled")
        writer.node("Tanh", [scaled], [f"{out}/gate"], f"{node.name}/tanh")
    else:
        root = writer.constant(f"{node.name}/root2", np.array(np.sqrt(2), np.float32))
        writer.node("Div", [x, root], [f"{out}/scaled"], f"{node.name}/scaled")
        writer.node("Erf", [f"{out}/scaled"], [f"{out}/gate"], f"{node.name}/erf")
    writer.node("Add", [f"{out}/gate", one], [f"{out}/plus"], f"{node.name}/plus")
    writer.node("Mul", [x, half], [f"{out}/half"], f"{node.name}/half")
    writer.node("Mul", [f"{out}/half", f"{out}/plus"], [raw], node.name)


_TABLES = [("gelu", {"Gelu": _onnx_gelu}, [{}, {"tanh": "bool"}]),
           ("erf", {"Erf": _onnx_unary("erf")}, [{}]),
           ("sqrt", {"Sqrt": _onnx_unary("sqrt")}, [{}]),
           ("reciprocal", {"Reciprocal": _onnx_unary("reciprocal")}, [{}]),
           ("pow", {"Pow": _onnx_pow}, [{"exponent": "float"}])]

OPS = [Op(op, "host", _WHY_TABLE, _table_kernel, onnx=onnx, quantize=_quantize_table,
          attrs={"table": "table"}, variants=variants, shape=_tabled, dtype=np.int8,
          blocked=True, export=_export_table)
       for op, onnx, variants in _TABLES]


# -- layer norm -------------------------------------------------------------------------------


def _layernorm(node: Node, x, gamma, beta):
    return [layer_norm(x, gamma, beta, node.attrs["axis"], node.attrs["epsilon"])]


def _qlayernorm(node: Node, x, gamma, beta):
    value = np.asarray(x, np.float32) * np.float32(node.attrs["scale"])
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        normed = layer_norm(value, gamma, beta, node.attrs["axis"], node.attrs["epsilon"])
    # A constant row (variance 0, epsilon 0) is NaN in float; taken as 0.
    return [quantize_float(np.where(np.isnan(normed), np.float32(0), normed),
                           node.attrs["out_scale"])]


def _onnx_layernorm(node) -> None:
    """Scale and bias: constants that broadcast onto the normalised axes."""
    node.arity(2, 3)
    shape = node.importer.shape(node.inputs[0])
    axis = onnx_axis(node, "axis", -1, len(shape))
    epsilon = node.attr("epsilon", 1e-5)
    if not isinstance(epsilon, (int, float)) or not np.isfinite(epsilon) or epsilon < 0:
        raise node.fail(f"attribute epsilon={epsilon!r} is not a finite number >= 0")
    node.attr("stash_type", 1, (1,))
    readers = {name for n in node.importer.model.graph.node for name in n.input}
    readers.update(value.name for value in node.importer.model.graph.output)
    if any(name in readers for name in node.outputs[1:]):
        raise node.fail("its Mean and InvStdDev outputs are not supported (training)")
    node.outputs = node.outputs[:1]
    emit_layernorm(node, node.inputs[0], shape, axis, float(epsilon),
                   node.constant_input(1, "scale"),
                   node.constant_input(2, "bias") if len(node.inputs) > 2 else None)


def emit_layernorm(node, x: str, shape: tuple[int, ...], axis: int, epsilon: float,
                   gamma: np.ndarray, beta: np.ndarray | None) -> None:
    """Emit a ``layernorm`` of ``x`` (an ONNX node's, `emit`): scale and bias broadcast onto
    the normalised axes as float32 constants."""
    normalised = tuple(shape[axis:])
    arrays = []
    for what, value in (("scale", gamma), ("bias", beta)):
        value = np.zeros(normalised, np.float32) if value is None else value
        try:
            value = np.broadcast_to(value, normalised)
        except ValueError:
            raise node.fail(f"its {what} of shape {value.shape} does not broadcast onto the "
                            f"normalised axes {normalised}") from None
        if value.dtype.kind != "f":
            raise node.fail(f"its {what} is {value.dtype.name}, not float")
        node.finite(what, value)
        arrays.append(np.ascontiguousarray(value, np.float32))
    names = [f"{node.name}/{what}" for what in ("scale", "bias")]
    for name, value in zip(names, arrays):
        node.importer.constant(name, value)
    node.emit("layernorm", [x, *names], axis=axis, epsilon=epsilon)


def _quantize_layernorm(q, node: Node) -> None:
    s_x, s_y = q.input_scale(node), q.scale(node.outputs[0])
    names = [q.constant(f"{node.name}/{what}_f", q.graph.value(name).astype(np.float32))
             for what, name in zip(("scale", "bias"), node.inputs[1:])]
    q.emit(node, "qlayernorm", [node.inputs[0], *names], s_y, scale=q.real_scale(s_x),
           out_scale=q.real_scale(s_y))


def _qlayernormed(node: Node, x: Tensor, gamma: Tensor, beta: Tensor) -> tuple[int, ...]:
    axis = axis_of(node, x, node.attrs["axis"])
    if x.dtype != np.int8:
        raise GraphError(f"{node.describe()}: its input is {x.describe()}, not int8")
    for tensor in (gamma, beta):
        if tensor.dtype != np.float32 or tensor.shape != x.shape[axis:]:
            raise GraphError(f"{node.describe()}: {tensor.describe()} is not float32 of the "
                             f"normalised axes {x.shape[axis:]} of {x.describe()}")
    return x.shape


def _export_qlayernorm(writer, node: Node) -> None:
    writer.float_op(node, "LayerNormalization", list(node.inputs[1:]), axis=node.attrs["axis"],
                    epsilon=node.attrs["epsilon"])


OPS += [
    Op("layernorm", "float", "float only: quantisation makes it a qlayernorm", _layernorm,
       onnx={"LayerNormalization": _onnx_layernorm}, quantize=_quantize_layernorm, arity=3),
    Op("qlayernorm", "host", _WHY_NORM, _qlayernorm,
       attrs={"axis": "int", "epsilon": "float", "scale": "scale", "out_scale": "scale"},
       arity=3, shape=_qlayernormed, dtype=np.int8, export=_export_qlayernorm),
]


# -- gathers of computed tensors --------------------------------------------------------------


def gather_computed(node, axis: int, data: np.ndarray | None,
                    indices: np.ndarray | None) -> None:
    """A Gather (`graph.ops.shapes`) of which one operand is computed: constant indices
    into a computed tensor, evenly spaced, become a slice (and a reshape for a scalar
    index); computed indices into a constant table, a ``take``."""
    from vdla.graph.ops.slicing import emit_slice
    importer = node.importer
    shape = importer.shape(node.inputs[0])
    if data is None and indices is None:
        raise node.fail("a Gather of a computed tensor at computed indices is not supported")
    if indices is not None:
        size = shape[axis]
        if indices.dtype.kind not in "iu":
            raise node.fail(f"its indices {node.inputs[1]!r} are {indices.dtype.name}, not "
                            "integers")
        if np.any((indices < -size) | (indices >= size)):
            raise node.fail(f"indices {indices.reshape(-1)[:8].tolist()} are out of range for "
                            f"an axis of {size}")
        flat = [int(i) % size for i in indices.reshape(-1)]
        step = flat[1] - flat[0] if len(flat) > 1 else 1
        if indices.ndim > 1 or step == 0 or any(b - a != step for a, b in zip(flat, flat[1:])):
            raise node.fail(f"a Gather of a computed tensor at indices "
                            f"{indices.reshape(-1)[:8].tolist()} (shape {indices.shape}) is "
                            "not supported (only a scalar or evenly spaced 1-D indices: a "
                            "slice)")
        end = flat[-1] + (1 if step > 0 else -1)
        emit_slice(node, [flat[0]], [end if end >= 0 else -size - 1], [axis], [step],
                   drop=axis if indices.ndim == 0 else None)
        return
    if importer.tensors[node.inputs[1]].dtype.kind not in "iu":
        raise node.fail(f"its indices {node.inputs[1]!r} are not integers")
    if data.dtype.kind != "f":
        raise node.fail(f"its table {node.inputs[0]!r} is {data.dtype.name}, not float")
    node.emit("take", axis=axis)


def _take(node: Node, data, indices):
    indices = np.asarray(indices, np.int64)
    size = data.shape[node.attrs["axis"]]
    if np.any((indices < -size) | (indices >= size)):
        raise GraphError(f"{node.describe()}: indices out of range for an axis of {size}")
    return [np.take(data, np.where(indices < 0, indices + size, indices),
                    axis=node.attrs["axis"])]


def _quantize_take(q, node: Node) -> None:
    """The table quantised at its own power-of-two scale (a QDQ model's, where it gives one);
    the gathered values keep it."""
    name = node.inputs[0]
    tensor = q.graph.tensors[name]
    value = q.graph.value(name).astype(np.float32)
    scale = ((tensor.exponent, tensor.scale) if tensor.quantized
             else (q.best_exponent(value, what=f"tensor {name!r}"), None))
    table = q.constant(f"{node.name}/table_q", quantize_float(value, q.real_scale(scale)),
                       scale)
    q.emit(node, "take", [table, node.inputs[1]], scale)


def _taken(node: Node, data: Tensor, indices: Tensor) -> tuple[int, ...]:
    axis = axis_of(node, data, node.attrs["axis"])
    if indices.dtype.kind not in "iu":
        raise GraphError(f"{node.describe()}: its indices {indices.describe()} are not integers")
    return data.shape[:axis] + indices.shape + data.shape[axis + 1:]


OPS.append(Op("take", "host", "an embedding lookup (a Gather of a table at computed indices) "
              "on the host", _take, quantize=_quantize_take, attrs={"axis": "int"}, arity=2,
              shape=_taken,
              # The int8 table gathered as it is: exact, and the output keeps its scale.
              export=lambda writer, node: writer.node("Gather", node.inputs, node.outputs,
                                                      node.name, axis=node.attrs["axis"])))


# -- Equal, Not and Where ---------------------------------------------------------------------


def _where(node: Node, x, mask, fill):
    return [np.where(mask, x, fill).astype(np.asarray(x).dtype)]


def _onnx_compare(function, arity: int):
    def convert(node) -> None:
        """Of constants only (shape and mask arithmetic), folded at import."""
        node.arity(arity)
        values = [node.importer.value(name) for name in node.inputs]
        if any(value is None for value in values):
            raise node.fail("of a computed tensor: not supported (only of constants, such as "
                            "shapes and masks, which fold at import)")
        node.fold(np.asarray(function(*values)))
    return convert


def _onnx_where(node) -> None:
    """All constants fold; a constant condition choosing between a computed tensor and a
    constant (a mask's fill) is a ``where``."""
    node.arity(3)
    importer = node.importer
    condition, x, y = (importer.value(name) for name in node.inputs)
    if condition is not None and x is not None and y is not None:
        node.fold(np.where(condition, x, y))
        return
    if condition is None or condition.dtype != np.bool_:
        raise node.fail(f"its condition {node.inputs[0]!r} must be a constant bool tensor (a "
                        "mask)")
    if (x is None) == (y is None):
        raise node.fail("exactly one of its two branches must be a constant (a mask's fill)")
    computed = node.inputs[1] if x is None else node.inputs[2]
    shape = importer.shape(computed)
    for name in node.inputs:
        if len(importer.shape(name)) > len(shape) or any(
                n not in (1, m) for n, m in zip(importer.shape(name)[::-1], shape[::-1])):
            raise node.fail(f"its input {name!r} of shape {importer.shape(name)} does not "
                            f"broadcast onto the computed branch {computed!r} of shape {shape}")
    if importer.tensors[computed].dtype.kind != "f":
        raise node.fail(f"its branch {computed!r} is not float")
    # One form: where(mask, x, fill); a computed second branch swaps them under a negated mask.
    mask, fill = (condition, y) if x is None else (~condition, x)
    names = [f"{node.name}/mask", f"{node.name}/fill"]
    importer.constant(names[0], np.ascontiguousarray(mask))
    importer.constant(names[1], np.asarray(fill, np.float32))
    node.emit("where", [computed, *names])


def _quantize_where(q, node: Node) -> None:
    """The fill quantised at the computed branch's scale (saturated: a mask's -inf or
    -10000 becomes -128); the output keeps that scale."""
    x, mask, fill = node.inputs
    scale = q.input_scale(node)
    with np.errstate(over="ignore", invalid="ignore"):
        level = quantize_float(np.nan_to_num(q.graph.value(fill).astype(np.float32)),
                               q.real_scale(scale))
    names = [q.constant(f"{node.name}/mask_b", q.graph.value(mask).astype(np.bool_)),
             q.constant(f"{node.name}/fill_q", level, scale)]
    q.emit(node, "where", [x, *names], scale)


def _whered(node: Node, x: Tensor, mask: Tensor, fill: Tensor) -> tuple[int, ...]:
    if mask.dtype != np.bool_ or fill.dtype != x.dtype:
        raise GraphError(f"{node.describe()}: its mask {mask.describe()} must be bool and its "
                         f"fill {fill.describe()} of its input's type ({x.describe()})")
    for tensor in (mask, fill):
        if len(tensor.shape) > len(x.shape) or any(
                n not in (1, m) for n, m in zip(tensor.shape[::-1], x.shape[::-1])):
            raise GraphError(f"{node.describe()}: {tensor.describe()} does not broadcast onto "
                             f"its input {x.describe()}")
    return x.shape


def _export_where(writer, node: Node) -> None:
    raw = f"{node.outputs[0]}/raw"
    writer.node("Where", [node.inputs[1], writer.dequantize(node.inputs[0]),
                          writer.dequantize(node.inputs[2])], [raw], node.name)
    writer.quantize(node, raw)


OPS += [
    Op("equal", "import", "mask and shape arithmetic: folded into constants at import",
       onnx={"Equal": _onnx_compare(np.equal, 2), "Not": _onnx_compare(np.logical_not, 1)}),
    Op("where", "host", "a constant mask's fill on the host (numpy)", _where,
       onnx={"Where": _onnx_where}, quantize=_quantize_where, attrs={}, arity=3,
       shape=_whered, export=_export_where),
]
