"""Elementwise arithmetic of two computed int8 tensors, with numpy's (ONNX's multidirectional)
broadcasting: ``qmul``, ``qdiv``, ``qsub`` and ``qadd_broadcast``.

The float ``mul``, ``div``, ``sub`` (`graph.ops.arith`) and ``add``
(`graph.ops.add`) of two computed tensors become these (a constant operand
makes a ``qaffine``, two equal shapes added a ``qadd`` as before). Each
operand keeps its own scale; the output is requantised once:

- ``qmul`` at power-of-two scales multiplies the int8 operands exactly
  (``|q_a q_b| <= 2**14``) at exponent ``e_a + e_b`` and rounds half to even
  by one right shift ``s = e_a + e_b - e_y``: ``q_y = sat(rne(q_a q_b /
  2**s))``; the shift is clamped to 0 .. 31 (an output finer than the
  product keeps the product's exponent, as a layer's does). This is what
  onnxruntime's float32 DequantizeLinear -> Mul -> QuantizeLinear (and its
  QLinearMul) computes, since every step is exact in float32 but the last
  rounding. At other scales (``scale_a``, ``scale_b``, ``out_scale``) it
  computes those float32 steps themselves: ``rint((q_a s_a) (q_b s_b) / s_y)``.
- ``qdiv`` computes DequantizeLinear -> Div -> QuantizeLinear in float32,
  ``rint((q_a s_a) / (q_b s_b) / s_y)`` at any scales; a zero divisor
  saturates (to 127 or -128, the sign of the dividend), and 0 / 0, NaN in
  float, gives 0.
- ``qsub`` and ``qadd_broadcast`` compute as ``qadd`` (`graph.ops.add`):
  power-of-two operands aligned by left shifts to the finer exponent, added
  (or subtracted) exactly and rounded half to even by one right shift; other
  scales multiply each operand by its float32 ratio to the output's scale,
  sum in float32 and round half to even (onnxruntime's QLinearAdd; a
  float32 DequantizeLinear -> Sub -> QuantizeLinear may differ by 1 LSB).

They run on the host. Blocked (`graph.layout`) where every operand is of the
output's rank (4, or 2 as a flattened 1x1 image) with the output's batch and
channels: then the blocked arrays broadcast over height and width as the
logical ones do (the squeeze-excite ``[N, C, H, W] * [N, C, 1, 1]``); an
operand that broadcasts over batch or channels, or of another rank, needs the
logical arrays.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.ops.base import Op, quantize_float, round_shift, round_shift_even, saturate_int8

__all__ = ["OPS", "qadd_kernel", "quantize_two", "broadcast_shape"]

_WHY = "elementwise numpy of two int8 tensors on the host (the accelerator multiplies only " \
       "inside a GEMM)"
# The attribute kinds of the scale variants (`graph.network_file`).
_SCALES = {"scale_a": "scale", "scale_b": "scale", "out_scale": "scale"}
_SHIFTS = {"shift_a": "shift", "shift_b": "shift", "shift": "shift"}
_RATIOS = {"scale_a": "scale", "scale_b": "scale"}
_MAX_SHIFT = 31


# -- kernels ----------------------------------------------------------------------------------


def qadd_kernel(node: Node, a, b):
    """``qadd``'s numpy semantics (`graph.ops.add`), and ``qadd_broadcast``'s."""
    if "scale_a" in node.attrs:
        # onnxruntime's QLinearAdd: each operand less its zero point times its float32
        # scale ratio, summed in float32, rounded half to even, then the output's zero point.
        zero_a, zero_b, zero_y = (node.attrs.get(k, 0) for k in ("zero_a", "zero_b", "zero_y"))
        total = ((np.asarray(a, np.float32) - np.float32(zero_a))
                 * np.float32(node.attrs["scale_a"])
                 + (np.asarray(b, np.float32) - np.float32(zero_b))
                 * np.float32(node.attrs["scale_b"]))
        out = saturate_int8(np.clip(np.rint(total) + zero_y, -128, 127))
        return [np.maximum(out, zero_y) if node.attrs["relu"] else out]
    shift_a, shift_b = node.attrs["shift_a"], node.attrs["shift_b"]
    # int8 operands aligned by up to 2**22, summed (< 2**30) and rounded by up to 2**29 stay
    # inside int32, which numpy adds and shifts faster than int64.
    dtype = np.int32 if max(shift_a, shift_b) <= 22 and node.attrs["shift"] <= 30 else np.int64
    total = round_shift(a, -shift_a, dtype) + round_shift(b, -shift_b, dtype)
    out = saturate_int8(round_shift_even(total, node.attrs["shift"]))
    return [np.maximum(out, 0) if node.attrs["relu"] else out]


def _dequantized(node: Node, a, b):
    return (np.asarray(a, np.float32) * np.float32(node.attrs["scale_a"]),
            np.asarray(b, np.float32) * np.float32(node.attrs["scale_b"]))


def _qmul(node: Node, a, b):
    if "shift" in node.attrs:
        product = np.asarray(a, np.int64) * np.asarray(b, np.int64)
        return [saturate_int8(round_shift_even(product, node.attrs["shift"]))]
    with np.errstate(over="ignore", under="ignore"):   # +-inf saturates, tiny values are 0
        value = np.multiply(*_dequantized(node, a, b))
    return [quantize_float(value, node.attrs["out_scale"])]


def _qdiv(node: Node, a, b):
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        value = np.divide(*_dequantized(node, a, b))
    # 0 / 0: NaN, which no int8 holds; the quotient of nothing by nothing is taken as 0.
    return [quantize_float(np.where(np.isnan(value), np.float32(0), value),
                           node.attrs["out_scale"])]


def _qsub(node: Node, a, b):
    # -(-128) is 128: negated in int16, then aligned and summed as qadd's operands.
    return qadd_kernel(node, a, -np.asarray(b, np.int16))


# -- quantisation -----------------------------------------------------------------------------


def quantize_two(q, node: Node) -> None:
    """The integer node of a float ``mul``, ``div``, ``sub`` or ``add`` of two computed
    tensors (the module docstring's rules)."""
    a, b, y = q.input_scale(node, 0), q.input_scale(node, 1), q.scale(node.outputs[0])
    names = (f"{q.real_scale(a):.6g} ({node.inputs[0]!r}), {q.real_scale(b):.6g} "
             f"({node.inputs[1]!r}), output {q.real_scale(y):.6g} ({node.outputs[0]!r})")
    powers = None not in (a[0], b[0], y[0])
    if node.op == "mul" and powers:
        shift = int(np.clip(a[0] + b[0] - y[0], 0, _MAX_SHIFT))
        q.emit(node, "qmul", node.inputs, (a[0] + b[0] - shift, None), shift=shift)
        return
    if node.op in ("mul", "div"):
        q.check_float32(node, "a scale", [q.real_scale(s) for s in (a, b, y)], names)
        q.emit(node, "q" + node.op, node.inputs, y, scale_a=q.real_scale(a),
               scale_b=q.real_scale(b), out_scale=q.real_scale(y))
        return
    op = "qsub" if node.op == "sub" else "qadd_broadcast"
    relu = bool(node.attrs.get("relu"))
    if not powers:   # onnxruntime's QLinearAdd: float32 scale ratios
        s_y = np.float32(q.real_scale(y))
        with np.errstate(over="ignore", under="ignore"):    # checked just below
            ratios = [np.float32(q.real_scale(a)) / s_y, np.float32(q.real_scale(b)) / s_y]
        q.check_float32(node, "the ratio of an operand's scale to the output's", ratios, names)
        q.emit(node, op, node.inputs, y, relu=relu, scale_a=float(ratios[0]),
               scale_b=float(ratios[1]))
        return
    common = max(a[0], b[0])
    shifts = {"shift_a": common - a[0], "shift_b": common - b[0],
              "shift": max(common - y[0], 0)}
    if max(shifts.values()) > _MAX_SHIFT:
        raise GraphError(f"{node.describe()}: its scales {names} are more than 2**{_MAX_SHIFT} "
                         "apart; the operands cannot be aligned by a shift")
    q.emit(node, op, node.inputs, (common - shifts["shift"], None), relu=relu, **shifts)


# -- shape rule and layout --------------------------------------------------------------------


def broadcast_shape(node: Node, a: Tensor, b: Tensor) -> tuple[int, ...]:
    """The shape numpy (and ONNX's multidirectional broadcasting) gives ``a`` op ``b``."""
    try:
        return tuple(np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise GraphError(f"{node.describe()}: {a.describe()} and {b.describe()} do not "
                         "broadcast together") from None


def _int8_broadcast(node: Node, a: Tensor, b: Tensor) -> tuple[int, ...]:
    for tensor in (a, b):
        if tensor.dtype != np.int8:
            raise GraphError(f"{node.describe()}: its input {tensor.describe()} is not int8")
    return broadcast_shape(node, a, b)


def _blocked(graph: Graph, node: Node) -> bool:
    out = graph.tensors[node.outputs[0]].shape
    shapes = [graph.tensors[name].shape for name in node.inputs]
    if len(out) == 4:
        return all(len(shape) == 4 and shape[:2] == out[:2] for shape in shapes)
    return len(out) == 2 and all(shape == out for shape in shapes)


# -- QDQ export -------------------------------------------------------------------------------


def _export(onnx_op: str):
    def export(writer, node: Node) -> None:
        raw = f"{node.outputs[0]}/raw"
        writer.node(onnx_op, [writer.dequantize(name) for name in node.inputs], [raw],
                    node.name)
        writer.quantize(node, writer.relu(raw, bool(node.attrs.get("relu"))))
    return export


def _op(name: str, onnx_op: str, kernel, attrs, variants) -> Op:
    return Op(name, "host", _WHY, kernel, attrs=attrs, variants=variants, arity=2,
              shape=_int8_broadcast, dtype=np.int8, blocked=_blocked, export=_export(onnx_op))


OPS = [
    _op("qmul", "Mul", _qmul, {}, [{"shift": "shift"}, _SCALES]),
    _op("qdiv", "Div", _qdiv, _SCALES, [{}]),
    _op("qsub", "Sub", _qsub, {"relu": "bool"}, [_SHIFTS, _RATIOS]),
    _op("qadd_broadcast", "Add", qadd_kernel, {"relu": "bool"}, [_SHIFTS, _RATIOS]),
]
