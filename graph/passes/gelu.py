"""GELU fusion: the Erf and tanh forms exporters write become one ``gelu`` table.

Exporters write GELU as elementwise arithmetic on one tensor ``x``:
``x * 0.5 * (1 + Erf(x / sqrt 2))`` (PyTorch's exact GELU, in any order of
the factors) or ``0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``.
Quantised as written, each node rounds to int8; fused, it is one
`graph.ops.transformer` ``gelu`` table (one rounding). A region is
recognised by what it computes, not by its node order: the nodes between
``x`` and a candidate output that read only ``x``, each other and scalar
constants, whose intermediate tensors nothing else reads (nor a QDQ model
quantises), are evaluated on sample values and compared with both forms.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.ir import Graph, Node
from vdla.graph.ops.transformer import gelu

__all__ = ["fuse_gelu"]

# The elementwise operators a GELU's decomposition is written with.
_ELEMENTWISE = {"mul", "div", "add", "sub", "erf", "tanh", "pow"}
# The most nodes one decomposition has (the tanh form's, with x**3 as two Muls).
_MAX_NODES = 10
# Where the forms are told apart: values where erf and tanh GELU differ by > 1e-4.
_SAMPLES = np.linspace(-6, 6, 241, dtype=np.float32)


def _region(graph: Graph, end: Node, x: str, producers: dict[str, Node]) -> list[Node] | None:
    """The nodes that compute ``end``'s output from ``x`` and scalar constants, in graph
    order, or None."""
    found: dict[int, Node] = {}
    stack = [end]
    while stack:
        node = stack.pop()
        if id(node) in found:
            continue
        if node.op not in _ELEMENTWISE or node.attrs.get("relu") or len(found) >= _MAX_NODES:
            return None
        found[id(node)] = node
        for name in node.inputs:
            if name == x:
                continue
            value = graph.value(name)
            if value is not None:
                if value.size != 1:
                    return None
                continue
            producer = producers.get(name)
            if producer is None:
                return None
            stack.append(producer)
    if not any(x in node.inputs for node in found.values()):
        return None
    return [node for node in graph.nodes if id(node) in found]


def _evaluate(graph: Graph, nodes: list[Node], x: str) -> np.ndarray | None:
    from vdla.graph.kernels import KERNELS
    values = {x: _SAMPLES}
    with np.errstate(all="ignore"):
        for node in nodes:
            arrays = [values[name] if name in values else
                      np.asarray(graph.value(name), np.float32).reshape(()) for name in node.inputs]
            (values[node.outputs[0]],) = KERNELS[node.op](node, *arrays)
    return np.asarray(values[nodes[-1].outputs[0]], np.float32)


def _form(result: np.ndarray) -> dict | None:
    for attrs in ({}, {"tanh": True}):
        want = gelu(_SAMPLES, bool(attrs))
        if result.shape == want.shape and np.allclose(result, want, rtol=1e-5, atol=1e-6):
            return attrs
    return None


def fuse_gelu(graph: Graph) -> Graph:
    """Replace each GELU decomposition by one ``gelu`` node on its input."""
    producers = {out: node for node in graph.nodes for out in node.outputs}
    for end in list(graph.nodes):
        if end.op != "mul" or len(end.outputs) != 1:
            continue
        # Candidates for x: the computed tensors the mul reaches back to, nearest first.
        candidates, seen, frontier = [], set(), [end]
        while frontier and len(seen) < _MAX_NODES:
            node = frontier.pop(0)
            for name in node.inputs:
                if name in seen or graph.value(name) is not None:
                    continue
                seen.add(name)
                candidates.append(name)
                producer = producers.get(name)
                if producer is not None and producer.op in _ELEMENTWISE:
                    frontier.append(producer)
        for x in candidates:
            nodes = _region(graph, end, x, producers)
            if nodes is None or len(nodes) < 3:
                continue
            inner = [out for node in nodes if node is not end for out in node.outputs]
            members = {id(node) for node in nodes}
            if any(graph.tensors[name].quantized or name in graph.outputs
                   or any(id(r) not in members for r in graph.consumers(name))
                   for name in inner):
                continue
            attrs = _form(_evaluate(graph, nodes, x))
            if attrs is None:
                continue
            position = graph.nodes.index(end)
            graph.nodes[position] = Node(end.name, "gelu", [x], list(end.outputs), attrs)
            producers[end.outputs[0]] = graph.nodes[position]
            break
    return graph
