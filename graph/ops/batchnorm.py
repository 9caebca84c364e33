"""``batchnorm``: ONNX's BatchNormalization in inference mode (float only).

`graph.passes.batchnorm` folds it into the conv or dense layer before it;
one that follows no layer is refused by quantisation.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.ir import Node
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


OPS = [Op("batchnorm", "float", "float only: it must follow a conv, into which it folds "
          "(graph.passes.batchnorm)", _batchnorm,
          onnx={"BatchNormalization": _onnx_batchnorm})]
