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

Layers become the compiler's operators (`layer_op`); both kinds of placement
run exactly the same integer arithmetic, so the choice changes time, never
results.
"""

from __future__ import annotations

from vdla.compiler.ops import Conv2d, Dense
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node
from vdla.graph.ops import OPS, layer_ops

__all__ = ["LAYER_OPS", "PLACES", "place", "layer_op"]

# The operators that are layers (`graph.ops`: those whose place is ``layer``).
LAYER_OPS = layer_ops()
PLACES = ("accel", "cpu", "host")


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
