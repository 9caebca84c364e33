"""QDQ reading: the scales of a model quantised elsewhere, taken as they are.

`onnxruntime.quantization.quantize_static` writes a float graph with
QuantizeLinear/DequantizeLinear around each tensor: ``DQ(int8 constant)`` for
weights and biases, ``Q -> DQ`` pairs on activations. This pass keeps the
graph's float operators and records each quantised tensor's scale as its
``exponent`` (scale ``2**-exponent``), which `graph.quantize` then uses
instead of calibrating: scales are read, never recomputed. Weights become the
exact float values ``q * scale``, which quantise back to ``q``.

A power-of-two scale becomes the tensor's ``exponent`` (requantisation by one
shift); any other positive scale its ``scale``, which `graph.quantize`
requantises with a fixed-point multiplier (`compiler.requant`). Activations
have one scale per tensor, weights and biases one per tensor or one per
output channel (``scale`` an array).

Zero points. vdla computes on int8: an activation that onnxruntime quantises
to uint8 ``q`` with zero point ``z`` (its default, QUInt8) is the int8 ``q -
128`` with zero point ``z - 128``, the same real values; an int8 one keeps
its zero point. The tensor's ``zero_point`` records it, and `graph.quantize`
honours it (folded into the layers' biases, padding with it) or refuses the
node. A constant's zero point is applied here: the weight becomes the exact
float ``(q - z) * scale``, refused where ``q - z`` leaves int8 (vdla's
weights are symmetric).
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node

__all__ = ["read_qdq", "scale_exponent", "read_scale"]


# Scales are float32 and requantisation multiplies them in float32 (as onnxruntime does): a
# subnormal one has lost its precision, and its products underflow to zero.
_FLOAT32 = np.finfo(np.float32)


def read_scale(scale: np.ndarray, where: str, per_channel: bool = False, name: str | None = None
               ) -> tuple[int | None, float | np.ndarray | None]:
    """``(exponent, None)`` for a power-of-two scale ``2**-exponent``, else ``(None, scale)``.

    With ``per_channel`` (a weight's or bias's, along its output channels), a
    scale that differs between channels is ``(None, array)``. Raises
    `GraphError` for non-finite or non-positive scales, for scales outside
    float32's normal range (subnormal ones: a float32 ``1e-45``), and, without
    ``per_channel``, for per-channel ones. ``name``, the scale's tensor, is
    named in messages.
    """
    values = np.asarray(scale, np.float64).reshape(-1)
    for value in values:
        if not (math.isfinite(value) and value > 0):
            raise GraphError(f"{where}: scale {value:.6g} is not a finite positive number")
        if not _FLOAT32.tiny <= value <= _FLOAT32.max:
            raise GraphError(f"{where}: scale {value:.6g}{f' ({name!r})' if name else ''} is "
                             f"outside float32's normal range ({_FLOAT32.tiny:.6g} to "
                             f"{_FLOAT32.max:.6g}); refused")
    if np.unique(values).size != 1:
        if not per_channel:
            raise GraphError(f"{where}: per-channel scales are supported for weights and "
                             "biases only (an activation needs one scale per tensor)")
        return None, values
    value = float(values[0])
    mantissa, exponent = math.frexp(value)
    return (1 - exponent, None) if mantissa == 0.5 else (None, value)


def scale_exponent(scale: np.ndarray, where: str) -> int:
    """``e`` with ``scale == 2**-e`` for a per-tensor power-of-two scale; else `GraphError`."""
    exponent, other = read_scale(scale, where)
    if exponent is None:
        raise GraphError(f"{where}: scale {other:.6g} is not a power of two (vdla's "
                         "requantisation by one shift needs one)")
    return exponent


# How an activation's integer type's values map onto vdla's int8: ``q - offset``.
_OFFSETS = {np.dtype(np.uint8): 128, np.dtype(np.int8): 0}


def _zero_point(graph: Graph, node: Node) -> int:
    """The int8 zero point of an activation's QuantizeLinear or DequantizeLinear."""
    if len(node.inputs) < 3:  # ONNX's default: uint8, zero point 0
        return -128
    zero = graph.value(node.inputs[2])
    if zero.dtype == np.int32 and not np.any(zero):  # a symmetric int32 pair, as before
        return 0
    if zero.dtype not in _OFFSETS or zero.size != 1:
        raise GraphError(f"{node.describe()}: zero point {zero.dtype.name} "
                         f"{zero.reshape(-1)[:4].tolist()} is not supported: vdla quantises "
                         "activations to int8 or uint8 with one zero point per tensor")
    return int(zero.reshape(-1)[0]) - _OFFSETS[zero.dtype]


def _constant_levels(graph: Graph, node: Node) -> np.ndarray:
    """A DequantizeLinear'd constant's levels less its zero point, refused where a weight's
    leave int8 (vdla's weights are symmetric)."""
    constant = graph.value(node.inputs[0])
    levels = constant.astype(np.int64)
    zero = graph.value(node.inputs[2]) if len(node.inputs) == 3 else np.zeros((), np.uint8)
    if levels.ndim and zero.size > 1:
        shape = [1] * levels.ndim
        shape[node.attrs["axis"] % levels.ndim] = -1
        zero = zero.reshape(shape)
    levels = levels - zero.astype(np.int64)
    if constant.dtype.itemsize == 1 and levels.size and (levels.min() < -128
                                                          or levels.max() > 127):
        raise GraphError(f"{node.describe()}: zero point {zero.dtype.name} "
                         f"{zero.reshape(-1)[:4].tolist()} is not supported: its "
                         f"{constant.dtype.name} constant less the zero point spans "
                         f"{levels.min()} to {levels.max()}, beyond int8 (vdla's weights "
                         "are symmetric int8)")
    return levels
    if levels.ndim and zero.size > 1:
        shape = [1] * levels.ndim
        shape[node.attrs["axis"] % levels.ndim] = -1
        zero = zero.reshape(shape)
    levels = levels - zero.astype(np.int64)
    if zero.dtype.itemsize == 1 and (levels.min() < -128 or levels.max() > 127):
        raise GraphError(f"{node.describe()}: zero point {zero.dtype.name} "
                         f"{zero.reshape(-1)[:4].tolist()} is not supported: its constant "
                         f"less the zero point spans {levels.min()} to {levels.max()}, beyond "
                         "int8 (vdla's weights are symmetric int8)")
    return levels


def read_qdq(graph: Graph) -> Graph:
    """Record QDQ scales as tensor exponents and drop the QDQ nodes (in place)."""
    for node in list(graph.nodes):
        if node.op != "dequantize" or graph.value(node.inputs[0]) is None:
            continue
        exponent, scale = read_scale(graph.value(node.inputs[1]), node.describe(),
                                     per_channel=True, name=node.inputs[1])
        constant = _constant_levels(graph, node).astype(np.float64)
        if isinstance(scale, np.ndarray):  # per output channel: the constant's first axis
            if node.attrs["axis"] % max(constant.ndim, 1) != 0 or len(scale) != len(constant):
                raise GraphError(f"{node.describe()}: per-channel scales must run along the "
                                 f"first axis ({len(constant)} output channels), got axis "
                                 f"{node.attrs['axis']} with {len(scale)} scales")
            step = scale.reshape((-1,) + (1,) * (constant.ndim - 1))
        else:
            step = scale if exponent is None else 2.0 ** -exponent
        out = graph.tensors[node.outputs[0]]
        out.value = (constant * step).astype(np.float32)
        out.exponent, out.scale = exponent, scale
        graph.nodes.remove(node)
    for node in list(graph.nodes):
        if node.op != "quantize":
            continue
        zero = _zero_point(graph, node)
        scale = read_scale(graph.value(node.inputs[1]), node.describe(), name=node.inputs[1])
        source = graph.tensors[node.inputs[0]]
        readers = graph.consumers(node.outputs[0])
        if node.outputs[0] in graph.outputs or not readers or any(
                r.op != "dequantize" for r in readers):
            raise GraphError(f"{node.describe()}: its output must be read by DequantizeLinear "
                             "nodes only (the QDQ form)")
        for reader in readers:
            if _zero_point(graph, reader) != zero:
                raise GraphError(f"{reader.describe()}: its zero point differs from its "
                                 f"QuantizeLinear's ({node.name!r})")
            if read_scale(graph.value(reader.inputs[1]), reader.describe(),
                          name=reader.inputs[1]) != scale:
                raise GraphError(f"{reader.describe()}: its scale differs from its "
                                 f"QuantizeLinear's ({node.name!r})")
            graph.nodes.remove(reader)
            if reader.outputs[0] in graph.outputs and source.name not in graph.inputs:
                # A graph output keeps its name: the quantised tensor takes it.
                del graph.tensors[reader.outputs[0]]
                graph.rename_tensor(source.name, reader.outputs[0])
                source = graph.tensors[reader.outputs[0]]
            else:
                graph.rename_uses(reader.outputs[0], source.name)
        if source.quantized and ((source.exponent, source.scale), source.zero_point) != (
                scale, zero):
            raise GraphError(f"{node.describe()}: tensor {source.name!r} is quantised with two "
                             "scales")
        source.exponent, source.scale = scale
        source.zero_point = zero
        graph.nodes.remove(node)
    for node in graph.nodes:
        if node.op in ("quantize", "dequantize"):
            raise GraphError(f"{node.describe()}: a DequantizeLinear of a computed tensor "
                             "without its QuantizeLinear is not supported")
    return graph
