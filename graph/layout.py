"""The layout plan of a run: activations stay in the accelerator's blocked layout.

An accelerator layer reads and writes int8 activations in the blocked layout
of `runtime.layout` (``activation`` in, ``output`` out; the same bytes when
the config's ``block_in`` equals its ``block_out``). Host nodes whose work
is elementwise or spatial (the residual add, pooling, zero padding, relu,
clip, and flatten of a 1x1 image) compute on the blocked array as well: the
blocked axes are channels and batch, which they do not mix. So a network run
packs once where the first layer needs its input, and unpacks once where a
node needs the logical tensor (the output's dequantisation, softmax, a cpu
layer, a flatten of a larger image); `Network.run` converts a value only
when its reader needs the other form and counts each conversion.

The padded channels and batch rows of a blocked array may hold any values
(a clip can raise their zeros): the next layer's weights for them are zero
and the final unpack drops them, so they never reach a real output.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vdla.graph.ir import Graph, Node
from vdla.graph.kernels import run_node
from vdla.graph.ops import OPS
from vdla.hw.config import HwConfig
from vdla.runtime.layout import pack, unpack

__all__ = ["Blocked", "block", "unblock", "runs_blocked", "run_blocked"]



@dataclasses.dataclass
class Blocked:
    """An int8 activation in the blocked layout.

    Parameters
    ----------
    packed : numpy.ndarray
        ``(N/B, C/BI, H, W, B, BI)`` int8.
    shape : tuple of int
        The logical shape: ``(N, C, H, W)``, or ``(N, C)`` for a flattened
        1x1 image (whose blocked form is that of ``(N, C, 1, 1)``).
    """

    packed: np.ndarray
    shape: tuple[int, ...]


def _four(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape) if len(shape) == 4 else (*shape, 1, 1)


def block(array: np.ndarray, config: HwConfig) -> Blocked:
    """Pack a logical int8 activation (rank 4, or rank 2 as ``(N, C, 1, 1)``)."""
    return Blocked(pack("activation", array.reshape(_four(array.shape)), config),
                   tuple(array.shape))


def unblock(value: Blocked, config: HwConfig) -> np.ndarray:
    """The logical array of a blocked activation, in memory of its own: a blocked value
    may lie in an arena slot that a later layer overwrites, and where the blocks hold the
    logical order already (an (N, C, 1, 1) one block of batch wide) the unpacked array
    would otherwise be a view of it."""
    logical = unpack("activation", value.packed, _four(value.shape), config)
    if np.may_share_memory(logical, value.packed):
        logical = logical.copy()
    return logical.reshape(value.shape)


def runs_blocked(graph: Graph, node: Node) -> bool:
    """Whether a host node computes on blocked arrays (its operator's ``blocked``,
    `graph.ops`: flatten only of a 1x1 image)."""
    op = OPS.get(node.op)
    return op is not None and op.place == "host" and op.runs_blocked(graph, node)


def run_blocked(graph: Graph, node: Node, args: list[Blocked]) -> list[Blocked]:
    """A host node of `runs_blocked` on blocked inputs (the spatial axes are 2 and 3)."""
    (out,) = node.outputs
    shape = graph.tensors[out].shape
    if node.op == "flatten":
        return [Blocked(args[0].packed, shape)]
    (packed,) = run_node(node, [arg.packed for arg in args])
    return [Blocked(packed, shape)]
