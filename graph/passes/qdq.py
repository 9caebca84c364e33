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
output channel (``scale`` an array); every zero point is 0 (symmetric
int8); anything else is refused with one line.
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


def _check_zero(graph: Graph, node: Node) -> None:
    if len(node.inputs) < 3:
        if node.op == "quantize":  # ONNX's default zero point is uint8
            raise GraphError(f"{node.describe()}: no zero point, so uint8: vdla's accelerator "
                             "is symmetric int8 (quantise with int8 activations and weights)")
        return
    zero = graph.value(node.inputs[2])
    if zero.dtype not in (np.int8, np.int32) or np.any(zero != 0):
        raise GraphError(f"{node.describe()}: zero point {zero.dtype.name} "
                         f"{zero.reshape(-1)[:4].tolist()} is not supported: vdla's "
                         "accelerator is symmetric int8 (quantise with symmetric int8 "
                         "activations and weights)")


def read_qdq(graph: Graph) -> Graph:
    """Record QDQ scales as tensor exponents and drop the QDQ nodes (in place)."""
    for node in list(graph.nodes):
        if node.op != "dequantize" or graph.value(node.inputs[0]) is None:
            continue
        _check_zero(graph, node)
        exponent, scale = read_scale(graph.value(node.inputs[1]), node.describe(),
                                     per_channel=True, name=node.inputs[1])
        constant = graph.value(node.inputs[0]).astype(np.float64)
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
        _check_zero(graph, node)
        scale = read_scale(graph.value(node.inputs[1]), node.describe(), name=node.inputs[1])
        source = graph.tensors[node.inputs[0]]
        readers = graph.consumers(node.outputs[0])
        if node.outputs[0] in graph.outputs or not readers or any(
                r.op != "dequantize" for r in readers):
            raise GraphError(f"{node.describe()}: its output must be read by DequantizeLinear "
                             "nodes only (the QDQ form)")
        for reader in readers:
            _check_zero(graph, reader)
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
        if source.quantized and (source.exponent, source.scale) != scale:
            raise GraphError(f"{node.describe()}: tensor {source.name!r} is quantised with two "
                             "scales")
        source.exponent, source.scale = scale
        graph.nodes.remove(node)
    for node in graph.nodes:
        if node.op in ("quantize", "dequantize"):
            raise GraphError(f"{node.describe()}: a DequantizeLinear of a computed tensor "
                             "without its QuantizeLinear is not supported")
    return graph
