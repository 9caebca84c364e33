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

from vdla.graph.ir import Graph, Tensor

__all__ = ["fuse_bias", "fuse_activations"]


def _sole_reader(graph: Graph, tensor: str):
    readers = graph.consumers(tensor)
    if len(readers) != 1 or graph.uses(tensor) != 1:
        return None
    return readers[0]


def _per_channel(constant: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """The per-channel vector (axis 1) ``constant`` broadcasts to over ``shape``, if it is one."""
    try:
        full = np.broadcast_to(constant, shape)
    except ValueError:
        return None
    vector = full[(0, slice(None)) + (0,) * (len(shape) - 2)]
    spread = vector.reshape((1, -1) + (1,) * (len(shape) - 2))
    return vector.astype(np.float32) if np.array_equal(np.broadcast_to(spread, shape), full) \
        else None


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
        vector = None if constant is None else _per_channel(constant, shape)
        if vector is None:
            continue
        channels = shape[1]
        if len(node.inputs) == 3:
            if graph.value(node.inputs[2]) is None:
                continue
            vector = vector + graph.value(node.inputs[2])
        name = f"{add.name}/fused_bias"
        graph.tensors[name] = Tensor(name, (channels,), np.float32, vector.astype(np.float32))
        node.inputs = node.inputs[:2] + [name]
        node.outputs = list(add.outputs)
        graph.nodes.remove(add)
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
