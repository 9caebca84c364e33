"""``softmax``: on the float dequantised input, as a network's last node (host)."""

from __future__ import annotations

import numpy as np

from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import Op, axis_of

__all__ = ["OPS"]


def _softmax(node: Node, x):
    shifted = x - x.max(axis=node.attrs["axis"], keepdims=True)
    exp = np.exp(shifted)
    return [(exp / exp.sum(axis=node.attrs["axis"], keepdims=True)).astype(np.float32)]


def _onnx_softmax(node) -> None:
    node.arity(1)
    shape = node.importer.shape(node.inputs[0])
    axis = node.attr("axis", 1 if node.importer.opset < 13 else -1)
    axis = axis + len(shape) if axis < 0 else axis
    # Before opset 13 a softmax flattens the axes from ``axis`` on: the same as one along
    # ``axis`` where those after it are all of size 1 (a classifier's (N, C, 1, 1)).
    if node.importer.opset < 13 and any(size != 1 for size in shape[axis + 1:]):
        raise node.fail(f"axis {axis} of a rank-{len(shape)} input (flattening softmax of "
                        "opset < 13) is not supported")
    node.emit("softmax", axis=axis)


def _quantize_softmax(q, node: Node) -> None:
    """Dequantised first: the softmax computes on float32 (its output is a graph output)."""
    source = q.renamed[node.inputs[0]]
    floating = f"{node.inputs[0]}/float"
    q.tensors[floating] = Tensor(floating, q.tensors[source].shape, np.float32)
    q.nodes.append(Node(f"{node.name}/dequantize", "dequantize_output", [source], [floating],
                        q.step_attrs(q.tensor_scale(q.tensors[source]))))
    q.renamed[node.inputs[0]] = floating
    q.emit(node, "softmax", node.inputs, (None, None), dtype=np.float32)


def _softmaxed(node: Node, x: Tensor) -> tuple[int, ...]:
    axis_of(node, x, node.attrs["axis"])
    return x.shape


def _export_softmax(writer, node: Node) -> None:
    writer.node("Softmax", node.inputs, node.outputs, node.name, axis=node.attrs["axis"])


OPS = [Op("softmax", "host", "exponentials in float32 on the host; the accelerator has none",
          _softmax, onnx={"Softmax": _onnx_softmax}, quantize=_quantize_softmax,
          attrs={"axis": "int"}, shape=_softmaxed, dtype=np.float32, export=_export_softmax)]
