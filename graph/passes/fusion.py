"""Fusion into accelerator layers: a constant bias Add, then a ReLU, into a Conv or Dense.

``conv -> add(constant per-channel) -> relu`` becomes one ``conv`` with a
bias and ``relu=True``: after quantisation, one accelerator layer whose
epilogue adds the bias, requantises with one shift and clamps (the
``REQUANT`` of `compiler.accel.passes.epilogue`). A residual ``add`` of two
activations takes a following ReLU too; quantisation then fuses it into the
conv producing one operand where it can (`graph.passes.residual`), else it
runs on the host.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.ir import Graph, Node, Tensor

__all__ = ["fuse_bias", "fuse_activations"]


def _sole_reader(graph: Graph, tensor: str):
    readers = graph.consumers(tensor)
    if len(readers) != 1 or graph.uses(tensor) != 1:
        return None
    return readers[0]


def per_axis(constant: np.ndarray, shape: tuple[int, ...], axis: int) -> np.ndarray | None:
    """The vector along ``axis`` that ``constant`` broadcasts to over ``shape``, if it is one
    (the same value everywhere else)."""
    try:
        full = np.broadcast_to(constant, shape)
    except ValueError:
        return None
    axis %= len(shape)
    vector = full[(0,) * axis + (slice(None),) + (0,) * (len(shape) - axis - 1)]
    spread = vector.reshape((1,) * axis + (-1,) + (1,) * (len(shape) - axis - 1))
    return vector.astype(np.float32) if np.array_equal(np.broadcast_to(spread, shape), full) \
        else None


def fold_into_bias(graph: Graph, layer: Node, add: Node, vector: np.ndarray,
                   last: Node) -> bool:
    """Fold ``vector`` (one value per output channel of ``layer``) into its bias and remove
    ``add``, whose outputs ``last`` (the layer, or the node after it that ``add`` read) then
    writes. False, changing nothing, when the layer's bias is not a constant."""
    if len(layer.inputs) == 3:
        bias = graph.value(layer.inputs[2])
        if bias is None:
            return False
        vector = vector + bias
    name = f"{add.name}/fused_bias"
    graph.tensors[name] = Tensor(name, (len(vector),), np.float32, vector.astype(np.float32))
    layer.inputs = layer.inputs[:2] + [name]
    last.outputs = list(add.outputs)
    graph.nodes.remove(add)
    return True


def fuse_bias(graph: Graph) -> Graph:
    """Fold ``add(layer(x), constant)`` into the layer's bias when the constant is per channel."""
    for node in list(graph.nodes):
        if node.op not in ("conv", "dense") or node.attrs.get("relu"):
            continue
        add = _sole_reader(graph, node.outputs[0])
        if add is None or add.op != "add" or add.attrs.get("relu"):
            continue
        other = [name for name in add.inputs if name != node.outputs[0]]
        constant = graph.value(other[0]) if len(other) == 1 else None
        shape = graph.tensors[node.outputs[0]].shape
        vector = None if constant is None else per_axis(constant, shape, 1)
        if vector is not None:
            fold_into_bias(graph, node, add, vector, node)
    return graph


def fuse_activations(graph: Graph) -> Graph:
    """Mark ``relu=True`` on a conv, dense or add whose only reader is a ReLU (or Clip(0, inf))."""
    for node in list(graph.nodes):
        if node.op not in ("conv", "dense", "add") or node.attrs.get("relu"):
            continue
        reader = _sole_reader(graph, node.outputs[0])
        if reader is None:
            continue
        is_relu = reader.op == "relu" or (reader.op == "clip" and reader.attrs["min"] == 0
                                          and reader.attrs["max"] == np.inf)
        if not is_relu:
            continue
        node.attrs["relu"] = True
        node.outputs = list(reader.outputs)
        graph.nodes.remove(reader)
    return graph
