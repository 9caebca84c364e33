"""BatchNorm folding: a BatchNormalization after a Conv or a dense layer becomes the
layer's weights and bias.

``y = (conv(x, w) + b - mean) * scale / sqrt(var + eps) + beta`` is a
convolution with ``w' = w * f[k]`` and ``b' = (b - mean) * f + beta`` where
``f = scale / sqrt(var + eps)``: exact in real numbers, so the float model's
outputs change only by float rounding; likewise a dense layer's (a Keras
Dense then BatchNormalization: its output's features are the channels). A
BatchNorm that follows no layer (or whose layer's output has other readers)
stays, and quantisation refuses it.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.ir import Graph, Tensor

__all__ = ["fold_batchnorm"]


def fold_batchnorm(graph: Graph) -> Graph:
    """Fold every foldable BatchNorm into the Conv or dense layer producing its input (in
    place)."""
    for node in list(graph.nodes):
        if node.op != "batchnorm":
            continue
        x, scale, beta, mean, var = node.inputs
        conv = graph.producer(x)
        params = [graph.value(name) for name in (scale, beta, mean, var)]
        if conv is None or conv.op not in ("conv", "dense") or graph.uses(x) != 1 \
                or conv.attrs.get("relu") \
                or any(p is None for p in params) or graph.value(conv.inputs[1]) is None:
            continue
        scale_v, beta_v, mean_v, var_v = (np.asarray(p, np.float64) for p in params)
        factor = scale_v / np.sqrt(var_v + node.attrs["epsilon"])
        weight = graph.value(conv.inputs[1]).astype(np.float64)
        bias = (graph.value(conv.inputs[2]).astype(np.float64) if len(conv.inputs) == 3
                else np.zeros(weight.shape[0]))
        if len(conv.inputs) == 3 and graph.value(conv.inputs[2]) is None:
            continue
        new_weight = f"{node.name}/folded_weight"
        new_bias = f"{node.name}/folded_bias"
        graph.tensors[new_weight] = Tensor(new_weight, weight.shape, np.float32,
                                           (weight * factor.reshape((-1,) + (1,) * (
                                               weight.ndim - 1)))
                                           .astype(np.float32))
        graph.tensors[new_bias] = Tensor(new_bias, (weight.shape[0],), np.float32,
                                         ((bias - mean_v) * factor + beta_v).astype(np.float32))
        conv.inputs = [conv.inputs[0], new_weight, new_bias]
        conv.outputs = list(node.outputs)
        graph.nodes.remove(node)
    return graph
