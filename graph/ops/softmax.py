"""``softmax`` (host, float32) and ``qsoftmax`` (int8), along any axis of any rank.

A softmax whose output is a graph output computes on its dequantised input
and stays float32 (a classifier's probabilities). Any other (attention's)
is a ``qsoftmax``: as onnxruntime between DequantizeLinear and
QuantizeLinear, the float32 softmax of the dequantised input quantised at
the output's scale (half to even), which is also its QDQ export.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import Op, axis_of, quantize_float

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


def _qsoftmax(node: Node, x):
    value = np.asarray(x, np.float32) * np.float32(node.attrs["scale"])
    (probabilities,) = _softmax(node, value)
    return [quantize_float(probabilities, node.attrs["out_scale"])]


def _quantize_softmax(q, node: Node) -> None:
    """Inside the network a qsoftmax; a graph output dequantised first, then the float32
    softmax."""
    if node.outputs[0] not in q.graph.outputs:
        s_x, s_y = q.input_scale(node), q.scale(node.outputs[0])
        q.emit(node, "qsoftmax", node.inputs, s_y, scale=q.real_scale(s_x),
               out_scale=q.real_scale(s_y))
        return
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


def _qsoftmaxed(node: Node, x: Tensor) -> tuple[int, ...]:
    if x.dtype != np.int8:
        raise GraphError(f"{node.describe()}: its input is {x.describe()}, not int8")
    return _softmaxed(node, x)


def _export_qsoftmax(writer, node: Node) -> None:
    writer.float_op(node, "Softmax", axis=node.attrs["axis"])


OPS = [Op("softmax", "host", "exponentials in float32 on the host; the accelerator has none",
          _softmax, onnx={"Softmax": _onnx_softmax}, quantize=_quantize_softmax,
          attrs={"axis": "int"}, shape=_softmaxed, dtype=np.float32, export=_export_softmax)]
OPS.append(Op("qsoftmax", "host", "exponentials of the dequantised values in float32 on the "
              "host, requantised (the accelerator has none)", _qsoftmax,
              attrs={"axis": "int", "scale": "scale", "out_scale": "scale"}, shape=_qsoftmaxed,
              dtype=np.int8, export=_export_qsoftmax))
