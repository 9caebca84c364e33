"""numpy semantics of every graph operator, float and integer, and a graph run in numpy.

One function per operator (`KERNELS`, each operator's ``kernel`` in the
registry `graph.ops`), each taking the node and its input arrays and
returning its output arrays. They serve constant folding and
calibration (the float operators), the integer reference of a quantised graph
(`graph.reference`) and the host's share of a network run. The accelerator's
layers (``qconv``, ``qdense``) are written from their definition (an
int64 sum, then the epilogue of `compiler.ops.Epilogue`; `graph.ops.layers`),
independently of the compiler that lowers them, so a run checks the accelerator against them.

Spatial operators work on axes 2 and 3 and carry any axes after them along,
so they run unchanged on the blocked layout of `graph.layout`.

Rounding. The accelerator's layers round half up (``floor(x + 1/2)``): the
requantisation shift folds ``2**(shift-1)`` into the bias (`graph.quantize`),
so the hardware's plain arithmetic shift rounds that way, and a fixed-point
multiplier rounds so by itself (`compiler.requant`). The host's operators
(input quantisation, residual add, average pools) round half to even, as
ONNX's QuantizeLinear after a float operator does: onnxruntime running the
same scales then computes the same integers. With a ``scale`` attribute (a
scale that is not a power of two) they compute as onnxruntime does, in
float32 between DequantizeLinear and QuantizeLinear.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node
from vdla.graph.ops import OPS
from vdla.graph.ops.base import round_shift, round_shift_even, saturate_int8
from vdla.graph.ops.layers import conv_sum, layer_epilogue
from vdla.graph.ops.qdq import step

__all__ = ["KERNELS", "run_node", "execute", "conv_sum", "round_shift", "round_shift_even",
           "saturate_int8", "layer_epilogue", "step"]

# Each operator's kernel, from the registry (`graph.ops`).
KERNELS: dict[str, Callable] = {name: op.kernel for name, op in OPS.items()
                                if op.kernel is not None}


def run_node(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs of ``node`` on input arrays ``args``."""
    kernel = KERNELS.get(node.op)
    if kernel is None:
        raise GraphError(f"{node.describe()}: no numpy kernel for operator {node.op!r}")
    return kernel(node, *args)


def execute(graph: Graph, feeds: dict[str, np.ndarray], *, keep: bool = False,
            hook: Callable[[Node, list[np.ndarray]], None] | None = None) -> dict[str, np.ndarray]:
    """Run ``graph`` in numpy: the outputs (every tensor with ``keep=True``).

    ``hook(node, outputs)`` is called after each node (calibration records ranges with it).
    """
    values = {name: t.value for name, t in graph.tensors.items() if t.constant}
    values.update(feeds)
    readers = {}
    for index, node in enumerate(graph.nodes):
        for name in node.inputs:
            readers[name] = index
    for index, node in enumerate(graph.nodes):
        outputs = run_node(node, [values[name] for name in node.inputs])
        for name, array in zip(node.outputs, outputs):
            values[name] = array
        if hook is not None:
            hook(node, outputs)
        if not keep:  # free what no later node reads, so big networks fit in memory
            for name in node.inputs:
                if readers.get(name) == index and name not in graph.outputs \
                        and not graph.tensors[name].constant:
                    values.pop(name, None)
    if keep:
        return values
    return {name: values[name] for name in graph.outputs}
