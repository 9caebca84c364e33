"""Projection bias fusion: a transformer's Linear, ``reshape -> dense -> reshape -> add(b)``,
takes its bias into the dense layer.

A MatMul of a rank-3 or rank-4 activation by a constant weight imports as a
``dense`` over the flattened leading axes between two ``reshape`` nodes
(`graph.ops.matmul`), and the exporter's Add of the bias follows the second
reshape, where `graph.passes.fusion.fuse_bias` does not see it. Where that
constant is one value per output feature (constant over every other axis),
it is added inside the layer instead: one rounding (the layer's), and no
host node. The reshape then writes the Add's output.
"""

from __future__ import annotations


from vdla.graph.ir import Graph
from vdla.graph.passes.fusion import fold_into_bias, per_axis

__all__ = ["fuse_projection_bias"]


def _sole_reader(graph: Graph, tensor: str):
    readers = graph.consumers(tensor)
    return readers[0] if len(readers) == 1 and graph.uses(tensor) == 1 else None


def fuse_projection_bias(graph: Graph) -> Graph:
    """Fold ``add(reshape(dense(x)), constant)`` into the dense layer's bias when the constant
    is one value per output feature."""
    for dense in list(graph.nodes):
        if dense.op != "dense" or dense.attrs.get("relu"):
            continue
        reshape = _sole_reader(graph, dense.outputs[0])
        if reshape is None or reshape.op != "reshape":
            continue
        add = _sole_reader(graph, reshape.outputs[0])
        if add is None or add.op != "add" or add.attrs.get("relu") \
                or graph.tensors[reshape.outputs[0]].quantized:
            continue
        other = [name for name in add.inputs if name != reshape.outputs[0]]
        constant = graph.value(other[0]) if len(other) == 1 else None
        shape = graph.tensors[reshape.outputs[0]].shape
        features = graph.tensors[dense.outputs[0]].shape[-1]
        vector = None if constant is None or shape[-1] != features \
            else per_axis(constant, shape, -1)
        if vector is not None:
            fold_into_bias(graph, dense, add, vector, reshape)
    return graph
