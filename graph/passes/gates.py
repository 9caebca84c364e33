"""Self-gating fusion: ``x * sigmoid(x)`` becomes one ``silu``, ``x * hardsigmoid(x)`` (ONNX's
HardSigmoid at alpha 1/6, beta 1/2) one ``hardswish``.

Exporters write SiLU (Swish) and, before opset 14, HardSwish as the Mul of
a tensor by a gate computed from that same tensor. Quantised as written,
that is a table for the gate, rounded to int8, then a ``qmul`` rounding
again; fused, it is one table of the whole function (`graph.ops.activations`),
one rounding, and the product's float32 arithmetic is the same (the fused
operator's float kernel multiplies ``x`` by the same gate).

A gate whose output a QDQ model quantises (``Sigmoid -> Q -> DQ -> Mul``)
states that rounding: that pair is left as it is, so vdla rounds where
onnxruntime does. The gate node goes when nothing else reads it
(`graph.ir.Graph.prune`, after every pass).
"""

from __future__ import annotations

import numpy as np

from vdla.graph.ir import Graph, Node

__all__ = ["fuse_gates"]


def _fused(graph: Graph, gate: Node | None, x: str) -> str | None:
    """The operator of ``x * gate(x)``, or None where ``gate`` is not a gate of ``x``."""
    if gate is None or gate.inputs[:1] != [x] or graph.tensors[gate.outputs[0]].quantized:
        return None
    if gate.op == "sigmoid":
        return "silu"
    if gate.op == "hardsigmoid" and gate.attrs["alpha"] == float(np.float32(1 / 6)) \
            and gate.attrs["beta"] == 0.5:
        return "hardswish"
    return None


def fuse_gates(graph: Graph) -> Graph:
    """Replace each ``mul(x, gate(x))`` (either order) by the fused operator on ``x``."""
    for index, node in enumerate(graph.nodes):
        if node.op != "mul" or len(node.inputs) != 2:
            continue
        for gated, x in (node.inputs, node.inputs[::-1]):
            op = _fused(graph, graph.producer(gated), x)
            if op is not None:
                graph.nodes[index] = Node(node.name, op, [x], list(node.outputs), {})
                break
    return graph
