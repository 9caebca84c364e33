"""Elementwise activations: ``relu`` and ``clip``, on float and int8 alike.

On int8 they keep their input's scale (a clip's bounds become integers at
that scale), and run on the host, on blocked arrays as on logical ones,
where no layer takes them into its epilogue (`graph.passes.fusion`).
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.ir import Node
from vdla.graph.ops.base import Op, same_shape

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
