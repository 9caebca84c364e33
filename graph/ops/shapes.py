"""Shape arithmetic, folded at import: ONNX's Shape, Gather and Cast.

Every shape is static after import, so ``Shape`` is a constant, and the
chains exporters write around it (``x.view(x.size(0), -1)``: Shape ->
Gather -> Unsqueeze -> Concat -> Reshape) fold into constants as they are
imported (each converter folds a node whose inputs are all constants,
`graph.ops.base.emit_or_fold`), so that the Reshape reads a constant shape.
A Gather with a computed operand becomes a slice or a ``take``
(`graph.ops.transformer.gather_computed`); a Cast of a computed tensor is
refused in one line.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.ir import Node
from vdla.graph.ops.base import ONNX_DTYPES, Op, onnx_axis
from vdla.graph.ops.transformer import gather_computed

__all__ = ["OPS"]

_WHY = "shape arithmetic: folded into constants at import, never a node"


def _onnx_shape(node) -> None:
    node.arity(1)
    shape = node.importer.shape(node.inputs[0])
    start, end = node.attr("start", 0), node.attr("end", len(shape))
    node.fold(np.array(shape[slice(start, end)], np.int64))


def _gather(node: Node, data, indices):
    return [np.take(data, np.asarray(indices, np.int64), axis=node.attrs["axis"])]


def _onnx_gather(node) -> None:
    node.arity(2)
    data, indices = (node.importer.value(name) for name in node.inputs)
    rank = len(node.importer.shape(node.inputs[0]))
    axis = onnx_axis(node, "axis", 0, rank)
    if data is None or indices is None:   # an embedding, a class token (graph.ops.transformer)
        gather_computed(node, axis, data, indices)
        return
    size = data.shape[axis]
    if np.any((indices < -size) | (indices >= size)):
        raise node.fail(f"indices {indices.reshape(-1)[:8].tolist()} are out of range for "
                        f"an axis of {size}")
    (value,) = _gather(Node(node.name, "gather", [], [], {"axis": axis}), data,
                       np.where(indices < 0, indices + size, indices))
    node.fold(value)


def _onnx_cast(node) -> None:
    """Of a constant, folded; of a computed tensor, only to its own element type."""
    node.arity(1)
    code = node.attr("to")
    node.attr("saturate", 1)
    dtype = ONNX_DTYPES.get(code)
    if dtype is None:
        raise node.fail(f"cast to element type {code} is not supported")
    value = node.importer.value(node.inputs[0])
    if value is not None:
        node.fold(value.astype(dtype))
    elif np.dtype(dtype) == node.importer.tensors[node.inputs[0]].dtype:
        node.alias()
    else:
        raise node.fail(f"a Cast of a computed tensor to {np.dtype(dtype).name} is not "
                        "supported (only of constants, or to its own type)")


OPS = [
    Op("shape", "import", _WHY, onnx={"Shape": _onnx_shape}),
    Op("gather", "import", _WHY, onnx={"Gather": _onnx_gather}, arity=2),
    Op("cast", "import", _WHY, onnx={"Cast": _onnx_cast}),
]
