"""Identity removal: reshapes that keep their input's shape (Identity, inference Dropout)."""

from __future__ import annotations

from vdla.graph.ir import Graph

__all__ = ["remove_identities"]


def remove_identities(graph: Graph) -> Graph:
    """Drop shape-preserving reshapes, their readers reading the input instead (in place)."""
    for node in list(graph.nodes):
        if node.op != "reshape":
            continue
        (source,), (target,) = node.inputs, node.outputs
        if graph.tensors[source].shape != graph.tensors[target].shape:
            continue
        if target in graph.outputs and (source in graph.inputs or source in graph.outputs):
            continue  # an output that is an input: the copy is what the graph computes
        graph.nodes.remove(node)
        if target in graph.outputs:
            # Keep the output's name: the producer of the source writes it instead.
            producer = graph.producer(source)
            producer.outputs = [target if name == source else name for name in producer.outputs]
            graph.rename_uses(source, target)
        else:
            graph.rename_uses(target, source)
    return graph
