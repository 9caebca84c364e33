"""Graph passes, run as one declared pipeline (`PIPELINE`, `run_passes`).

Each pass is a module with one function ``Graph -> Graph`` that changes the
graph in place and returns it; `run_passes` runs them in order, checks the
graph after each, and can hand each result to a ``dump`` callback by name.
The float pipeline runs before quantisation (`graph.quantize`), the integer
one after it. Residual fusion (`graph.passes.residual`) is decided during
quantisation, where both the float graph and the exponents are known.
"""

from __future__ import annotations

from typing import Callable

from vdla.graph.ir import Graph
from vdla.graph.ops.conv_transpose import split_phases
from vdla.graph.passes.batchnorm import fold_batchnorm
from vdla.graph.passes.constants import fold_constants
from vdla.graph.passes.fusion import fuse_activations, fuse_bias
from vdla.graph.passes.gates import fuse_gates
from vdla.graph.passes.gelu import fuse_gelu
from vdla.graph.passes.identities import remove_identities
from vdla.graph.passes.layernorm import fuse_layernorm
from vdla.graph.passes.pads import split_pads
from vdla.graph.passes.projection import fuse_projection_bias
from vdla.graph.passes.qdq import read_qdq
from vdla.graph.passes.stem import pack_stems

__all__ = ["PIPELINE", "INTEGER_PIPELINE", "TARGET_PIPELINE", "run_passes"]

# Before quantisation, on the float graph: in this order, each enabling the next
# (folded constants expose biases and BatchNorms to fold, a bias Add folded into its
# layer exposes the BatchNorm after it (a Keras Dense: MatMul, Add, BatchNormalization),
# folded BatchNorms expose the activations to fuse).
PIPELINE: list[tuple[str, Callable[[Graph], Graph]]] = [
    ("read_qdq", read_qdq),
    ("fold_constants", fold_constants),
    ("remove_identities", remove_identities),
    ("fuse_layernorm", fuse_layernorm),
    ("fuse_gelu", fuse_gelu),
    ("fuse_bias", fuse_bias),
    ("fuse_projection_bias", fuse_projection_bias),
    ("fold_batchnorm", fold_batchnorm),
    ("fuse_gates", fuse_gates),
    ("fuse_activations", fuse_activations),
]
# After quantisation, on the integer graph.
INTEGER_PIPELINE: list[tuple[str, Callable[[Graph], Graph]]] = [
    ("split_phases", split_phases),
    ("split_pads", split_pads),
]
# On the integer graph, for one accelerator: ``pass(graph, config=, target=, on_cpu=)``.
TARGET_PIPELINE: list[tuple[str, Callable[..., Graph]]] = [
    ("pack_stems", pack_stems),
]


def run_passes(graph: Graph, pipeline=PIPELINE,
               dump: Callable[[str, Graph], None] | None = None, **context) -> Graph:
    """Run ``pipeline`` on a copy of ``graph``; ``dump(name, graph)`` after each pass.
    ``context``: keywords every pass of the pipeline takes (`TARGET_PIPELINE`'s)."""
    graph = graph.copy()
    for name, run in pipeline:
        graph = run(graph, **context).prune().check()
        if dump is not None:
            dump(name, graph)
    return graph
