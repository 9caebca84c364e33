"""Residual fusion: ``add(conv(x), r)`` becomes one ``qconv`` that adds ``r`` in its accumulator.

A ResNet block ends in ``relu(add(conv(x), r))``. Unfused, the conv rounds its
sums to its own int8 output, the host's ``qadd`` aligns both operands and
rounds again. Fused, the conv's epilogue takes the int8 residual ``r`` into
its accumulator (`compiler.ops.Epilogue.residual_shift`)::

    y = clip((acc + bias + (r << d)) >> s)        relu: the add's

with ``d = e_acc - e_r`` (the accumulator's exponent minus the residual's) and
``s = e_acc - e_y`` (``e_y`` the add's output exponent): one rounding, half up
as every layer's (``2**(s-1)`` folded into the bias), and the conv's own
int8 output no longer exists. The accelerator brings ``r`` in through its
GEMM unit, the cpu target's C adds it to the sum.

Where it is decided: in `graph.quantize` (`fusable` on the float graph, then
`fused_shifts` on the exponents), because whether the conv's output is a
quantised tensor is a fact of the float graph, and because a model whose
conv output has no scale of its own (vdla's QDQ export of a fused network,
`graph.export`) is only quantisable fused. Calibration is unchanged: it
observes the float graph, whose conv output is still there (its exponent is
simply not used when the layer fuses); the fused layer's output takes the
add's exponent. A conv fuses when:

- it is the residual add's operand and the add is its output's only reader
  (not a graph output), and the conv applies no ReLU of its own (a ReLU
  before the add cannot move past it);
- the other operand is an activation (not a constant, not the conv's own
  output);
- the conv's output is not quantised in the model: a QDQ model written by
  another tool (``conv -> Q -> DQ -> Add``) states that the conv's output is
  rounded to int8, so it keeps its two roundings;
- every scale is a power of two and per tensor (no multiplier, no
  per-channel weights; a ``qadd`` with ``scale_a`` stays on the host);
- ``0 <= d <= MAX_RESIDUAL_SHIFT``, ``s`` within REQUANT's shift (the
  output no finer than the accumulator, as for any layer) and the folded
  bias within int32;
- the caller allows it for that layer (`graph.quantize.quantize`'s
  ``fuse_residuals``: the network compiler allows it where the layer runs on
  the cpu target or on an accelerator whose GEMM block is square).

Otherwise the conv and the add quantise as before.

When both operands are such convs (a ResNet block with a downsample: its 3x3
``conv2`` and the 1x1 stride-2 downsample), `cheapest_to_fuse` picks the one
with the most MACs per output: the residual costs each output the same (its
LOAD and one GEMM block), so it weighs least beside the most work. The other
is quantised apart, just before it (both are emitted at the add, so the order
is free).
"""

from __future__ import annotations

import numpy as np

from vdla.compiler.ops import MAX_RESIDUAL_SHIFT
from vdla.graph.ir import Graph, Node
from vdla.hw.isa import SHIFT_BITS

__all__ = ["fusable", "fused_shifts", "cheapest_to_fuse"]

# REQUANT's shift field.
_MAX_SHIFT = (1 << SHIFT_BITS) - 1


def fusable(graph: Graph, conv: Node) -> tuple[Node, str] | None:
    """``(add, residual tensor)`` when ``conv`` of the float graph may take its add in
    (every condition of the module docstring but the scales'), else None."""
    if conv.op != "conv" or conv.attrs.get("relu") or len(conv.outputs) != 1:
        return None
    out = conv.outputs[0]
    readers = graph.consumers(out)
    if len(readers) != 1 or graph.uses(out) != 1 or out in graph.outputs:
        return None
    add = readers[0]
    if add.op != "add" or len(add.inputs) != 2:
        return None
    (residual,) = [name for name in add.inputs if name != out] or [None]
    if residual is None or graph.tensors[residual].constant or graph.tensors[out].quantized:
        return None
    return add, residual


def fused_shifts(e_acc: int, e_residual: int, e_out: int) -> tuple[int, int] | None:
    """``(d, s)``, the residual's alignment and the requantising shift, of a fused layer
    whose accumulator is at ``e_acc`` (exponents), residual at ``e_residual`` and output
    wanted at ``e_out`` (clamped as any layer's: no finer than the accumulator, at most
    REQUANT's shift); None when the residual cannot be aligned (``d`` outside
    ``0 .. MAX_RESIDUAL_SHIFT``)."""
    d = e_acc - e_residual
    if not 0 <= d <= MAX_RESIDUAL_SHIFT:
        return None
    return d, min(max(e_acc - e_out, 0), _MAX_SHIFT)


def cheapest_to_fuse(graph: Graph, convs: list[Node]) -> Node:
    """The conv of ``convs`` (operands of one add) whose fusing costs least: the most MACs
    per output (weights per output channel); the last of the equals."""
    def macs(conv: Node) -> int:
        shape = graph.tensors[conv.inputs[1]].shape
        return int(np.prod(shape[1:]))
    return max(reversed(convs), key=macs)
