"""Constant folding: a node whose inputs are all constants becomes a constant.

Runs the node's numpy kernel (`graph.kernels`) once, at compile time. The
importer already folds ONNX's Constant and ConstantOfShape; this catches what
is left (a Reshape or Transpose of a weight, a DequantizeLinear of one).
"""

from __future__ import annotations

from vdla.graph.ir import Graph
from vdla.graph.kernels import run_node

__all__ = ["fold_constants"]


def fold_constants(graph: Graph) -> Graph:
    """Replace every all-constant node by its outputs' values (in place)."""
    kept = []
    for node in graph.nodes:
        if node.inputs and all(graph.tensors[name].constant for name in node.inputs):
            values = run_node(node, [graph.value(name) for name in node.inputs])
            for name, value in zip(node.outputs, values):
                tensor = graph.tensors[name]
                tensor.value = value.astype(tensor.dtype)
            continue
        kept.append(node)
    graph.nodes = kept
    return graph
