"""``batchnorm``: ONNX's BatchNormalization in inference mode (float only).

`graph.passes.batchnorm` folds it into the conv or dense layer before it.
One that follows no layer (DenseNet's after a Concat) is a per-channel affine
function ``x * f + (beta - mean * f)`` with ``f = scale / sqrt(var + eps)``:
quantisation makes it the host's ``qaffine`` (`graph.ops.arith`), float32 as
onnxruntime computes between DequantizeLinear and QuantizeLinear.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node
from vdla.graph.ops.arith import quantize_affine
from vdla.graph.ops.base import Op

__all__ = ["OPS"]


def _channel(vector: np.ndarray, ndim: int) -> np.ndarray:
    return np.asarray(vector).reshape((1, -1) + (1,) * (ndim - 2))


def _batchnorm(node: Node, x, scale, bias, mean, var):
    factor = scale / np.sqrt(var + node.attrs["epsilon"])
    return [((x - _channel(mean, x.ndim)) * _channel(factor, x.ndim)
             + _channel(bias, x.ndim)).astype(np.float32)]


def _onnx_batchnorm(node) -> None:
    node.arity(5)
    node.rank(0, (2, 3, 4))
    if node.attr("training_mode", 0, (0,)) or len(node.outputs) != 1:
        raise node.fail("training mode (running statistics outputs) is not supported")
    node.ignore("momentum", "spatial", "is_test", "consumed_inputs")
    epsilon = float(node.attr("epsilon", 1e-5))
    node.finite("epsilon", epsilon)
    variance = node.importer.value(node.inputs[4])
    if variance is not None and np.any(variance.astype(np.float64) + epsilon <= 0):
        raise node.fail(f"its variance ({node.inputs[4]!r}) plus epsilon is not positive "
                        "everywhere (its square root would be NaN)")
    node.emit("batchnorm", epsilon=epsilon)


# -- quantisation -----------------------------------------------------------------------------


def _quantize_batchnorm(q, node: Node) -> None:
    """A BatchNorm no layer took (`graph.passes.batchnorm`): a ``qaffine`` whose factor and
    offset, per channel, are computed in float64 from its constant parameters."""
    x = node.inputs[0]
    params = [q.graph.value(name) for name in node.inputs[1:]]
    missing = [name for name, value in zip(node.inputs[1:], params) if value is None]
    if missing:
        raise GraphError(f"{node.describe()}: its parameter {missing[0]!r} must be a constant "
                         "(vdla quantises an inference-mode BatchNorm as a per-channel affine "
                         "function)")
    scale, beta, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in params)
    factor = scale / np.sqrt(var + node.attrs["epsilon"])
    ndim = len(q.graph.tensors[x].shape)
    # Without its epsilon, which is in the factor: a qaffine carries only its own attributes.
    affine = Node(node.name, node.op, list(node.inputs), list(node.outputs), {})
    quantize_affine(q, affine, x, _channel(factor, ndim), _channel(beta - mean * factor, ndim))


OPS = [Op("batchnorm", "float", "float only: it folds into the conv or dense layer before it "
          "(graph.passes.batchnorm), else quantisation makes it a qaffine", _batchnorm,
          onnx={"BatchNormalization": _onnx_batchnorm}, quantize=_quantize_batchnorm)]
