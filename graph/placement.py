"""Placement: where each node of an integer graph runs.

The rule, visible and overridable:

- ``qconv`` and ``qdense`` (the network's layers) run on the accelerator
  (``"accel"``), or as the cpu target's generated C (``"cpu"``) when the
  network is compiled for ``target="cpu"`` or the layer is named in ``on_cpu``
  (``--on-cpu NODE,...``);
- every other node (input quantisation, a residual add not fused into its
  conv (`graph.passes.residual`), pooling, flatten, softmax, output
  dequantisation) runs on the host in numpy (``"host"``): the accelerator's
  ISA has no pooling. Each operator's registry entry (`graph.ops`) says where
  it runs and why.

`graph.network.compile_network` then refines the rule layer by layer: a
layer the accelerator refuses (any `compiler.errors.CompileError` its
compile raises: a grouping or padding it cannot run, a layer over the
per-program DRAM limit) runs on the cpu instead, unless the compile was
asked to refuse (``fallback=False``, ``--no-cpu-fallback``); a ``qdense``
over that limit is first split along its output features into layers that
fit (`split_dense`), joined by a host ``concat``. Every node's place comes
with its reason (`placement_reasons` and the ``*_reason`` helpers), which
the network file keeps and ``vdla inspect`` prints.

Layers become the compiler's operators (`layer_op`); both kinds of placement
run exactly the same integer arithmetic, so the choice changes time, never
results.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from vdla.compiler.ops import Conv2d, Dense
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.ops import OPS, layer_ops
from vdla.ints import ceil_div, round_up

__all__ = ["LAYER_OPS", "PLACES", "ACCEL_REASON", "TARGET_CPU_REASON", "ON_CPU_REASON",
           "place", "placement_reasons", "host_reason", "refused_reason", "by_cost_reason",
           "layer_op", "split_bounds", "split_dense"]

# The operators that are layers (`graph.ops`: those whose place is ``layer``).
LAYER_OPS = layer_ops()
PLACES = ("accel", "cpu", "host")

# Why a layer runs where it does (`placement_reasons`; a host node's reason is its operator's
# registry entry, `host_reason`).
ACCEL_REASON = "the accelerator, where layers run by default"
TARGET_CPU_REASON = "--target cpu: every layer as the cpu target's generated C"
ON_CPU_REASON = "--on-cpu: placed on the cpu by name"


def layer_op(graph: Graph, node: Node) -> Conv2d | Dense:
    """The compiler operator of a ``qconv`` or ``qdense`` node (its bias, shift and relu fused).

    Raises
    ------
    GraphError
        When the layer's shape cannot be compiled (naming the node).
    """
    op = OPS.get(node.op)
    if op is None or op.layer is None:
        raise GraphError(f"{node.describe()}: not a layer (layers are {', '.join(LAYER_OPS)})")
    return op.layer(graph, node)


def place(graph: Graph, target: str = "accel", on_cpu=()) -> dict[str, str]:
    """Each node's place: ``"accel"``, ``"cpu"`` or ``"host"``.

    Parameters
    ----------
    graph : Graph
        An integer graph (`graph.quantize`).
    target : str
        ``"accel"`` or ``"cpu"``: where layers go by default.
    on_cpu : iterable of str
        Layer names to run as generated C even with ``target="accel"``.

    Raises
    ------
    GraphError
        For an unknown target, or an ``on_cpu`` name that is not a layer.
    """
    if target not in ("accel", "cpu"):
        raise GraphError(f"target: expected accel or cpu, got {target!r}")
    layers = {node.name for node in graph.nodes if node.op in LAYER_OPS}
    for name in on_cpu:
        if name not in layers:
            known = ", ".join(sorted(layers)) or "none"
            node = next((n for n in graph.nodes if n.name == name), None)
            what = (f"{node.describe()} runs on the host already" if node is not None
                    else f"no node is named {name!r}")
            raise GraphError(f"--on-cpu: {what}; the layers are {known}")
    return {node.name: ("host" if node.name not in layers else
                        "cpu" if target == "cpu" or node.name in on_cpu else "accel")
            for node in graph.nodes}


def host_reason(node: Node) -> str:
    """Why a host node runs on the host: its operator's registry entry (`graph.ops.base.Op.why`)."""
    return OPS[node.op].why


def refused_reason(error: Exception) -> str:
    """Why a layer the accelerator refused runs on the cpu: the compiler's one-line message."""
    return f"the accelerator refuses it: {error}"


def by_cost_reason(accel_ms: float, cpu_ms: float) -> str:
    """Why `--place-by-cost` moved a layer to the cpu."""
    return (f"--place-by-cost: its C, timed here, takes {cpu_ms:.3f} ms against the "
            f"accelerator's estimated {accel_ms:.3f} ms")


def placement_reasons(graph: Graph, placement: dict[str, str], target: str = "accel",
                      on_cpu=()) -> dict[str, str]:
    """Each node's reason for the place `place` gave it (host nodes: `host_reason`)."""
    chosen = set(on_cpu)
    reasons = {}
    for node in graph.nodes:
        where = placement[node.name]
        reasons[node.name] = (host_reason(node) if where == "host" else ACCEL_REASON
                              if where == "accel" else TARGET_CPU_REASON if target == "cpu"
                              else ON_CPU_REASON if node.name in chosen else
                              "placed on the cpu")
    return reasons


def split_bounds(op: Dense, block_out: int, fits: Callable[[Dense], bool]
                 ) -> list[tuple[int, int]] | None:
    """The output-feature ranges of the fewest parts of ``op`` that each ``fits``.

    Every part but the last holds a whole number of ``block_out`` features (the
    accelerator's output block), so no part pads a block the unsplit layer fills;
    None when even a part of one block does not fit (the input alone is too large).
    """
    for count in range(2, ceil_div(op.out_features, block_out) + 1):
        per = round_up(ceil_div(op.out_features, count), block_out)
        if fits(dataclasses.replace(op, out_features=per)):
            return [(first, min(first + per, op.out_features))
                    for first in range(0, op.out_features, per)]
    return None


def _fresh(name: str, taken) -> str:
    """``name``, or ``name`` with the first free ``~N`` suffix when a node or tensor has it."""
    fresh, index = name, 1
    while fresh in taken:
        fresh, index = f"{name}~{index}", index + 1
    return fresh


def _rows(tensor: Tensor, first: int, last: int, features: int, name: str) -> Tensor:
    """Rows ``first:last`` of a layer's weight or bias constant (with their per-channel
    scales); a bias of ``2 * features`` entries holds the multipliers after the biases."""
    value = tensor.value
    rows = (np.concatenate([value[first:last], value[features + first:features + last]])
            if value.shape[0] == 2 * features else value[first:last])
    scale = tensor.scale
    if isinstance(scale, np.ndarray) and scale.shape[0] == features:
        scale = scale[first:last].copy()
    return Tensor(name, rows.shape, tensor.dtype, np.ascontiguousarray(rows), tensor.exponent,
                  scale)


def split_dense(graph: Graph, node: Node, bounds: list[tuple[int, int]]) -> list[Node]:
    """Replace a ``qdense`` node (in place) by one per output-feature range of ``bounds``
    and a host ``concat`` of their outputs along the features, which writes the node's
    own output tensor (its readers are unchanged).

    Each part's weight rows and biases (and per-channel multipliers and scales) are the
    node's own for its features, and its epilogue attributes the node's: a dense
    layer's output feature depends on that feature's weights and bias alone, so the
    concatenated parts equal the node bit for bit. Returns the parts, then the concat.
    """
    if node.op != "qdense" or len(node.inputs) != 3:
        raise GraphError(f"{node.describe()}: only a qdense layer splits along its outputs")
    data, weight, bias = (graph.tensors[name] for name in node.inputs)
    out = graph.tensors[node.outputs[0]]
    features = weight.shape[0]
    taken = set(graph.tensors) | {n.name for n in graph.nodes}
    parts, outputs = [], []
    for index, (first, last) in enumerate(bounds):
        name = _fresh(f"{node.name}/part{index}", taken)
        names = [_fresh(f"{name}/{what}", taken | {name}) for what in ("weight", "bias", "out")]
        taken.update([name, *names])
        graph.tensors[names[0]] = _rows(weight, first, last, features, names[0])
        graph.tensors[names[1]] = _rows(bias, first, last, features, names[1])
        graph.tensors[names[2]] = Tensor(names[2], (data.shape[0], last - first), out.dtype,
                                         None, out.exponent, out.scale)
        parts.append(Node(name, "qdense", [node.inputs[0], names[0], names[1]], [names[2]],
                          dict(node.attrs)))
        outputs.append(names[2])
    concat = Node(_fresh(f"{node.name}/concat", taken), "concat", outputs,
                  list(node.outputs), {"axis": 1})
    at = graph.nodes.index(node)
    graph.nodes[at:at + 1] = [*parts, concat]
    for name in node.inputs[1:]:   # the whole layer's constants, unless another node reads them
        if graph.uses(name) == 0:
            del graph.tensors[name]
    return [*parts, concat]
