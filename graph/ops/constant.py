"""ONNX's Constant and ConstantOfShape: values known at import, never graph nodes."""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.ops.base import Op

__all__ = ["OPS"]


def _onnx_constant(node) -> None:
    import onnx
    node.arity(0)
    if set(node.attrs) != {"value"}:
        raise node.fail(f"attribute {sorted(node.attrs)[0]} is not supported (only value)")
    node.ignore("value")
    proto = node.attrs["value"]
    if not isinstance(proto, onnx.TensorProto):
        raise node.fail("its value is not a tensor")
    node.fold(node.importer.initializer(proto))


def _onnx_constant_of_shape(node) -> None:
    node.arity(1)
    shape = [int(v) for v in node.constant_input(0, "shape").reshape(-1)]
    if any(v < 0 for v in shape):
        raise node.fail(f"negative size in shape {shape}")
    proto = node.attr("value")
    fill = node.importer.initializer(proto).reshape(-1) if proto is not None \
        else np.zeros(1, np.float32)
    if fill.size != 1:
        raise node.fail("its value must hold one element")
    node.importer.spend(math.prod(shape), fill.itemsize, node.where)
    node.importer.constant(node.outputs[0], np.full(shape, fill[0], dtype=fill.dtype))


OPS = [Op("constant", "import", "a value known at import: a constant tensor, no node",
          onnx={"Constant": _onnx_constant, "ConstantOfShape": _onnx_constant_of_shape},
          arity=0)]
