"""Padding the accelerator cannot load: a ``pad`` node in front of the conv takes the excess.

A convolution's padding, any value on each side, is added by the accelerator's
LOADs as a tile's input window arrives (`compiler.ops.accelerator_limits`),
asymmetric pads included, windows that see only padding too, as long as each
side's pad is at most `MAX_PAD` (what the LOAD's pad field holds). For a conv
past it the conv keeps what the LOADs can add and an explicit zero ``pad`` adds
the rest: zero is the quantised zero (symmetric scales), so the result is
exact. Convs within the limits are left alone, so no host copy is made.
"""

from __future__ import annotations

from vdla.compiler.ops import MAX_PAD
from vdla.graph.ir import Graph, Node, Tensor

__all__ = ["split_pads"]


def split_pads(graph: Graph) -> Graph:
    """Move ``qconv`` padding past the accelerator's limits into ``pad`` nodes (in place)."""
    for node in list(graph.nodes):
        if node.op != "qconv":
            continue
        pads = node.attrs["pads"]
        keep = tuple(min(pad, MAX_PAD) for pad in pads)
        if keep == tuple(pads):
            continue
        extra = tuple(pad - kept for pad, kept in zip(pads, keep))
        source = graph.tensors[node.inputs[0]]
        n, c, h, w = source.shape
        name = f"{node.name}/padded"
        graph.tensors[name] = Tensor(name, (n, c, h + extra[0] + extra[2],
                                            w + extra[1] + extra[3]), source.dtype,
                                     exponent=source.exponent, scale=source.scale)
        graph.nodes.insert(graph.nodes.index(node),
                           Node(f"{node.name}/pad", "pad", [source.name], [name],
                                {"pads": extra}))
        node.inputs = [name] + node.inputs[1:]
        node.attrs["pads"] = keep
    return graph
