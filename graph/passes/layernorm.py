"""Layer-norm fusion: the decomposition exporters write before opset 17 becomes one ``layernorm``.

PyTorch (opset < 17) and Keras write LayerNorm as ``m = ReduceMean(x)``,
``d = Sub(x, m)``, ``v = ReduceMean(Pow(d, 2))`` (or ``Mul(d, d)``),
``Div(d, Sqrt(Add(v, eps)))``, then a Mul by the scale and an Add of the
bias. Quantised as written, each of those nodes rounds to int8 (the variance
and its square root lose most of their bits); fused, it is one
`graph.ops.transformer` ``qlayernorm`` computing in float32 and rounding
once. A decomposition whose intermediate tensors a QDQ model quantises
states those roundings and is left as it is; so is one whose intermediate
tensors are read elsewhere. The replaced nodes go when nothing reads them
(`graph.ir.Graph.prune`).
"""

from __future__ import annotations

import numpy as np

from vdla.graph.ir import Graph, Node, Tensor

__all__ = ["fuse_layernorm"]


def _constant_of(graph: Graph, node: Node, op: str) -> tuple[str, np.ndarray] | None:
    """(the computed input, the constant) of a two-input ``op`` node with one constant."""
    if node is None or node.op != op or len(node.inputs) != 2 or node.attrs.get("relu"):
        return None
    values = [graph.value(name) for name in node.inputs]
    if (values[0] is None) == (values[1] is None):
        return None
    index = 0 if values[1] is not None else 1
    return node.inputs[index], values[1 - index]


def _mean_axis(graph: Graph, node: Node | None, x: str) -> int | None:
    """The first of the trailing axes a keepdims ``reduce_mean`` of ``x`` averages."""
    if node is None or node.op != "reduce_mean" or node.inputs != [x] \
            or not node.attrs["keepdims"]:
        return None
    rank = len(graph.tensors[x].shape)
    axes = tuple(node.attrs["axes"])
    return axes[0] if axes == tuple(range(axes[0], rank)) else None


def _match(graph: Graph, div: Node, producers: dict[str, Node]):
    """(x, axis, epsilon, nodes) where ``div`` ends a layer norm's decomposition, else None."""
    if div.op != "div" or len(div.inputs) != 2:
        return None
    centred, root = div.inputs
    sqrt = producers.get(root)
    if sqrt is None or sqrt.op != "sqrt":
        return None
    add = producers.get(sqrt.inputs[0])
    found = _constant_of(graph, add, "add")
    if found is None or found[1].size != 1:
        return None
    variance, epsilon = found
    mean2 = producers.get(variance)
    if mean2 is None:
        return None
    square = producers.get(mean2.inputs[0])
    if square is None or not (
            square.op == "pow" and square.attrs["exponent"] == 2 and square.inputs == [centred]
            or square.op == "mul" and square.inputs == [centred, centred]):
        return None
    sub = producers.get(centred)
    if sub is None or sub.op != "sub" or len(sub.inputs) != 2:
        return None
    x, mean = sub.inputs
    mean1 = producers.get(mean)
    axis = _mean_axis(graph, mean1, x)
    if axis is None or _mean_axis(graph, mean2, mean2.inputs[0]) != axis:
        return None
    nodes = [mean1, sub, square, mean2, add, sqrt, div]
    return x, axis, float(np.asarray(epsilon).reshape(-1)[0]), nodes


def fuse_layernorm(graph: Graph) -> Graph:
    """Replace each decomposed layer norm (and the scale and bias after it) by a ``layernorm``."""
    producers = {out: node for node in graph.nodes for out in node.outputs}
    for div in list(graph.nodes):
        found = _match(graph, div, producers)
        if found is None:
            continue
        x, axis, epsilon, nodes = found
        normalised = graph.tensors[x].shape[axis:]
        end, gamma, beta = div, np.ones(normalised, np.float32), np.zeros(normalised, np.float32)
        for op in ("mul", "add"):
            readers = graph.consumers(end.outputs[0])
            if len(readers) != 1 or graph.uses(end.outputs[0]) != 1:
                break
            step = _constant_of(graph, readers[0], op)
            if step is None or step[0] != end.outputs[0] or np.ndim(step[1]) > len(normalised) \
                    or graph.tensors[end.outputs[0]].quantized:
                break
            try:
                value = np.broadcast_to(step[1], normalised).astype(np.float32)
            except ValueError:
                break
            if op == "mul":
                gamma = value
            else:
                beta = value
            nodes.append(readers[0])
            end = readers[0]
        inner = [out for node in nodes[:-1] for out in node.outputs]
        readers = {id(node) for node in nodes}
        if any(graph.tensors[name].quantized or name in graph.outputs
               or any(id(r) not in readers for r in graph.consumers(name)) for name in inner):
            continue
        names = []
        for what, value in (("scale", gamma), ("bias", beta)):
            name = f"{end.name}/layernorm_{what}"
            graph.tensors[name] = Tensor(name, value.shape, np.float32,
                                         np.ascontiguousarray(value))
            names.append(name)
        position = graph.nodes.index(end)
        graph.nodes[position] = Node(end.name, "layernorm", [x, *names], list(end.outputs),
                                     {"axis": axis, "epsilon": epsilon})
        producers[end.outputs[0]] = graph.nodes[position]
    return graph
