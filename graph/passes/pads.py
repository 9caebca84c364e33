"""Asymmetric padding: a ``pad`` node in front of a conv whose pads differ per side.

The accelerator's convolution pads each axis equally on both sides (its LOAD
pads, `compiler.ops.Conv2d`); ONNX's pads may differ (``SAME_UPPER`` with an
even kernel, exported TensorFlow models). The conv keeps the smaller pad of
each axis and an explicit zero ``pad`` adds the rest: zero is the quantised
zero (symmetric scales), so the result is exact.
"""

from __future__ import annotations

from vdla.graph.ir import Graph, Node, Tensor

__all__ = ["split_pads"]


def split_pads(graph: Graph) -> Graph:
    """Give every ``qconv`` symmetric pads, inserting ``pad`` nodes (in place)."""
    for node in list(graph.nodes):
        if node.op != "qconv":
            continue
        top, left, bottom, right = node.attrs["pads"]
        if top == bottom and left == right:
            continue
        keep_h, keep_w = min(top, bottom), min(left, right)
        extra = (top - keep_h, left - keep_w, bottom - keep_h, right - keep_w)
        source = graph.tensors[node.inputs[0]]
        n, c, h, w = source.shape
        name = f"{node.name}/padded"
        graph.tensors[name] = Tensor(name, (n, c, h + extra[0] + extra[2],
                                            w + extra[1] + extra[3]), source.dtype,
                                     exponent=source.exponent)
        graph.nodes.insert(graph.nodes.index(node),
                           Node(f"{node.name}/pad", "pad", [source.name], [name],
                                {"pads": extra}))
        node.inputs = [name] + node.inputs[1:]
        node.attrs["pads"] = (keep_h, keep_w, keep_h, keep_w)
    return graph
