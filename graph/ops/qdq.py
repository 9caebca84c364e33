"""Quantisation at the edges: ONNX's ``quantize``/``dequantize`` (QDQ models, float graph
only: `graph.passes.qdq` reads their scales and removes them) and the integer graph's
``quantize_input``/``dequantize_output`` (host: float32 in and out of the network)."""

from __future__ import annotations

import numpy as np

from vdla.graph.ir import Node
from vdla.graph.ops.base import Op, same_shape, saturate_int8

__all__ = ["OPS", "step"]

_EDGE = "float32 in and out of the network, on the host"


def step(attrs: dict) -> np.float32:
    """A quantize_input or dequantize_output node's scale: ``scale``, or ``2**-exponent``."""
    return np.float32(attrs["scale"] if "scale" in attrs else 2.0 ** -attrs["exponent"])


def _quantize_input(node: Node, x):
    # The zero point is added after rounding and saturation follows, as QuantizeLinear does.
    zero = node.attrs.get("zero_point", 0)
    if "scale" in node.attrs:  # as ONNX's QuantizeLinear: float32 division, half to even
        scaled = np.rint(np.asarray(x, np.float32) / np.float32(node.attrs["scale"]))
        return [saturate_int8(np.clip(scaled + zero, -128, 127))]
    scaled = np.rint(np.asarray(x, np.float64) * 2.0 ** node.attrs["exponent"])
    return [saturate_int8(np.clip(scaled + zero, -128, 127))]


def _dequantize_output(node: Node, x):
    levels = np.asarray(x, np.float32)
    if node.attrs.get("zero_point"):
        levels = levels - np.float32(node.attrs["zero_point"])
    return [levels * step(node.attrs)]


def _qdq_shape(scale, x, axis) -> np.ndarray:
    scale = np.asarray(scale)
    if scale.ndim == 0:
        return scale
    shape = [1] * np.ndim(x)
    shape[axis] = -1
    return scale.reshape(shape)


def _quantize(node: Node, x, scale, zero_point=None):
    """ONNX QuantizeLinear: round half to even, saturate to the zero point's type."""
    dtype = np.dtype(zero_point.dtype) if zero_point is not None else np.dtype(np.uint8)
    zero = 0 if zero_point is None else _qdq_shape(zero_point, x, node.attrs["axis"])
    value = np.rint(x / _qdq_shape(scale, x, node.attrs["axis"])) + zero
    info = np.iinfo(dtype)
    return [np.clip(value, info.min, info.max).astype(dtype)]


def _dequantize(node: Node, x, scale, zero_point=None):
    zero = 0 if zero_point is None else _qdq_shape(zero_point, x, node.attrs["axis"])
    return [((np.asarray(x, np.int64) - zero) * _qdq_shape(scale, x, node.attrs["axis"])
             ).astype(np.float32)]


def _onnx_qdq(op: str):
    def convert(node) -> None:
        node.arity(2, 3)
        shape = node.importer.shape(node.inputs[0])
        axis = node.attr("axis", 1)
        axis = axis + len(shape) if axis < 0 else axis
        node.attr("saturate", 1, (1,))
        node.attr("block_size", 0, (0,))
        scale = node.constant_input(1, "scale")
        if len(node.inputs) == 3:
            node.constant_input(2, "zero point")
        if scale.size > 1 and (scale.ndim != 1 or scale.size != shape[axis]):
            raise node.fail(f"scale of shape {scale.shape} does not match axis {axis} of "
                            f"{shape}")
        if np.any(~np.isfinite(scale)) or np.any(scale <= 0):
            raise node.fail("its scale must be positive and finite")
        node.emit(op, axis=axis)
    return convert


def _export_quantize_input(writer, node: Node) -> None:
    writer.quantize(node, node.inputs[0])


def _export_dequantize_output(writer, node: Node) -> None:
    (out,) = node.outputs
    writer.node("DequantizeLinear", [node.inputs[0], writer.scale(node.inputs[0]),
                                     writer.zero8], [out], node.name)


# A power-of-two scale or another (`graph.ir`), with or without a zero point.
_STEP = [{"exponent": "exponent"}, {"scale": "scale"},
         {"exponent": "exponent", "zero_point": "int"}, {"scale": "scale", "zero_point": "int"}]
_READ = "float only: graph.passes.qdq reads its scale and removes it"

OPS = [
    Op("quantize", "float", _READ, _quantize, onnx={"QuantizeLinear": _onnx_qdq("quantize")}),
    Op("dequantize", "float", _READ, _dequantize,
       onnx={"DequantizeLinear": _onnx_qdq("dequantize")}),
    Op("quantize_input", "host", _EDGE, _quantize_input, attrs={}, variants=_STEP,
       shape=same_shape, dtype=np.int8, export=_export_quantize_input),
    Op("dequantize_output", "host", _EDGE,
       _dequantize_output, attrs={},
       variants=_STEP, shape=same_shape, dtype=np.float32, export=_export_dequantize_output),
]
