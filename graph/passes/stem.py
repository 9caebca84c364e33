"""Stem packing: a conv with few input channels becomes a host ``im2col`` and a 1x1 conv.

The accelerator reduces over input channels one GEMM block at a time
(``block_in`` wide), a kernel tap per block: a conv with C < ``block_in``
channels (every ImageNet CNN's RGB stem, a ViT's patch embedding) uses C of
each block's lanes and runs ``KH * KW`` GEMMs where ``ceil(C * KH * KW /
block_in)`` would do. Where its input is computed on the host anyway (the
network input's quantisation, or any host node: no accelerator layer's
blocked output would have to come back), `pack_stems` lays the conv's windows
out as channels on the host (``im2col``, `graph.ops.im2col`: the conv's
padding becomes zeros of the patches, the quantised zero) and replaces the
conv by a 1x1, stride-1 conv over the ``C * KH * KW`` patch channels whose
weight is the original reshaped to ``(K, C * KH * KW, 1, 1)``. The sums are
the same integer products in another order, so the result is bit-exact; the
conv keeps its name, epilogue, bias and residual.

Packing trades GEMMs for DRAM traffic (the patches repeat each input pixel
up to ``KH * KW / (SH * SW)`` times), so it is applied only where the layer
compiler's cost model (`compiler.accel.cost.estimate_cost` of
`compiler.accel.search.default_schedule`'s plan, as `graph.network` records
for each layer) estimates fewer cycles for the packed layer on the config.
Layers the cpu target runs are left as they are, as are grouped convs (a
packed group's channels would not fill whole blocks) and 1x1 kernels (nothing
to fold).
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.ops import OPS
from vdla.hw.config import HwConfig

__all__ = ["pack_stems", "stem_cycles"]


def _produced_on_host(graph: Graph, tensor: str, on_cpu: set[str]) -> bool:
    """Whether ``tensor`` is a graph input or the output of a host node or cpu layer."""
    producer = graph.producer(tensor)
    if producer is None:
        return tensor in graph.inputs
    return OPS[producer.op].place != "layer" or producer.name in on_cpu


def _candidate(graph: Graph, node: Node, config: HwConfig, on_cpu: set[str]) -> bool:
    if node.op != "qconv" or node.name in on_cpu or node.attrs["groups"] != 1:
        return False
    channels = graph.tensors[node.inputs[0]].shape[1]
    return (channels < config.block_in and math.prod(node.attrs["kernel"]) > 1
            and _produced_on_host(graph, node.inputs[0], on_cpu))


def _estimate(op, config: HwConfig) -> float:
    """The layer's estimated cycles as compiled by default (infinite where it cannot be)."""
    from vdla.compiler.accel.cost import estimate_cost
    from vdla.compiler.accel.search import default_schedule
    from vdla.compiler.errors import CompileError
    from vdla.compiler.ops import accelerator_limits
    try:
        geometry = accelerator_limits(op.geometry(), config)
        return estimate_cost(default_schedule(op, config).check(geometry, config))
    except CompileError:
        return math.inf


def _fresh(graph: Graph, name: str) -> str:
    """``name``, or ``name`` with a suffix where a tensor has it already."""
    fresh, count = name, 1
    while fresh in graph.tensors:
        fresh, count = f"{name}.{count}", count + 1
    return fresh


def _packed(graph: Graph, node: Node) -> tuple[Graph, Node] | None:
    """A copy of ``graph`` with ``node`` packed (an ``im2col`` before a 1x1 conv), and the
    packed conv; None where the patches would be larger than a tensor may be."""
    graph = graph.copy()
    conv = graph.node(node.name)
    attrs = conv.attrs
    source, weight = graph.tensors[conv.inputs[0]], graph.tensors[conv.inputs[1]]
    patches = _fresh(graph, f"{conv.name}/im2col")
    im2col = Node(f"{conv.name}/im2col", "im2col", [source.name], [patches],
                  {name: attrs[name] for name in ("kernel", "stride", "pads", "dilation")})
    try:
        shape = OPS["im2col"].shape(im2col, source)
    except GraphError:
        return None
    graph.tensors[patches] = Tensor(patches, shape, source.dtype, exponent=source.exponent,
                                    scale=source.scale)
    packed_weight = _fresh(graph, f"{conv.name}/im2col_weight")
    value = np.ascontiguousarray(weight.value.reshape(weight.shape[0], shape[1], 1, 1))
    graph.tensors[packed_weight] = Tensor(packed_weight, value.shape, weight.dtype, value,
                                          exponent=weight.exponent, scale=weight.scale)
    graph.nodes.insert(graph.nodes.index(conv), im2col)
    conv.inputs = [patches, packed_weight] + conv.inputs[2:]
    conv.attrs = {**attrs, "kernel": (1, 1), "stride": (1, 1), "pads": (0, 0, 0, 0),
                  "dilation": (1, 1)}
    return graph, conv


def stem_cycles(graph: Graph, node: Node, config: HwConfig) -> tuple[float, float]:
    """The estimated cycles of conv ``node`` as it is and packed, on ``config`` (infinite
    where a form cannot be compiled, or the patches would be too large)."""
    from vdla.graph.placement import layer_op
    packed = _packed(graph, node)
    after = math.inf if packed is None else _estimate(layer_op(*packed), config)
    return _estimate(layer_op(graph, node), config), after


def pack_stems(graph: Graph, config: HwConfig, target: str = "accel", on_cpu=()) -> Graph:
    """Pack every accelerator conv of few input channels whose input the host computes,
    where the cost model estimates fewer cycles packed (in place: returns the graph).

    Parameters
    ----------
    graph : Graph
        An integer graph (`graph.quantize`).
    config : HwConfig
        The accelerator whose GEMM block and cost decide.
    target, on_cpu
        As for `graph.placement.place`: layers that run as the cpu target's C
        are left alone.
    """
    if target != "accel":
        return graph
    cpu = set(on_cpu)
    for node in list(graph.nodes):
        if not _candidate(graph, node, config, cpu):
            continue
        before, after = stem_cycles(graph, node, config)
        if after < before:
            packed, _ = _packed(graph, node)
            graph.tensors, graph.nodes = packed.tensors, packed.nodes
    return graph
