"""vdla's graph IR: tensors with static shapes and dtypes, constants, and nodes in order.

A `Graph` is a list of `Node` s in topological order over named `Tensor` s.
A tensor with a ``value`` is a constant (a weight, a folded result); the
graph's ``inputs`` are the tensors a caller feeds, its ``outputs`` those it
gets back. Every shape is static (the importer fixes the batch).

Operators and their attributes (the importer normalises every source format
to these; each is declared once in `graph.ops`, with its import, numpy
semantics, quantisation, placement, network-file checks and QDQ export)::

    conv            x, w[, b]   kernel, stride, pads (top, left, bottom, right), groups,
                                dilation, relu (ONNX's Conv: w is (K, C/groups, KH, KW))
    dense           x, w[, b]   relu                      (w is (out, in): y = x @ w.T + b)
    batchnorm       x, scale, bias, mean, var   epsilon
    relu            x
    clip            x           min, max
    add             a, b        relu
    maxpool         x           kernel, stride, pads
    avgpool         x           kernel, stride, pads, count_include_pad
    global_avgpool  x
    flatten         x           axis
    reshape         x           shape (the output's, resolved)
    softmax         x           axis
    pad             x           pads (top, left, bottom, right)      (zeros)
    concat          x, ...      axis
    slice           x           starts, ends, steps (one each per axis, resolved: an end
                                < 0 means through index 0)
    transpose       x           perm
    mul, sub, div   a, b        (either may be a constant; shapes broadcast as numpy's)
    hardsigmoid     x           alpha, beta
    hardswish, sigmoid, tanh, silu   x
    prelu           x, slope    (slope a constant that broadcasts onto x)
    leakyrelu       x           alpha
    quantize        x, scale, zero_point      axis  (QDQ, as ONNX's QuantizeLinear)
    dequantize      x, scale, zero_point      axis  (as ONNX's DequantizeLinear)

and the integer operators `graph.quantize` writes (``exponent`` e means a
real value ``q * 2**-e``)::

    quantize_input  x (float)  -> int8        exponent or scale
    qconv           x, w, b[, r] (int8, int8, int32, int8) -> int8
                                              kernel, stride, pads, groups, dilation,
                                              shift, relu [multiplier or per_channel,
                                              pre_shift] [residual_shift, with r]
    qdense          x, w, b    -> int8        shift, relu [multiplier or per_channel, pre_shift]
    qadd            a, b       -> int8        shift_a, shift_b, shift, relu
                                              or scale_a, scale_b, relu
    qavgpool        x          -> int8        kernel, stride, pads, count_include_pad
                                              [scale, out_scale]
    qglobal_avgpool x          -> int8        [scale, out_scale]
    dequantize_output x (int8) -> float32     exponent or scale
    qaffine         x, a, b (int8, float32, float32) -> int8
                                              scale, out_scale, relu
    requantize      x          -> int8        scale, out_scale
    qmul            a, b       -> int8        shift, or scale_a, scale_b, out_scale
    qdiv            a, b       -> int8        scale_a, scale_b, out_scale
    qsub, qadd_broadcast  a, b -> int8        as qadd (operands that broadcast)
    qprelu          x, slope (int8, float32) -> int8   scale, out_scale

A layer with ``multiplier`` requantises by ``multiplier * 2**-(pre_shift +
shift)`` (`compiler.requant`), for scales that are not powers of two; with
``per_channel`` its bias input ``b`` holds the biases, then one multiplier
per output channel (a model's per-channel weight scales); a qconv with
``residual_shift`` d adds its int8 input ``r`` (the output's shape) as
``r << d`` to the accumulator before the shift (a fused residual add,
`graph.passes.residual`); a
``qadd`` with ``scale_a``/``scale_b`` rescales each operand by that float32
factor and rounds half to even, as onnxruntime's QLinearAdd does; pools with
``scale``/``out_scale`` average in float32 as onnxruntime between its
DequantizeLinear and QuantizeLinear.

``qaffine`` computes ``rint((x * scale * a + b) / out_scale)`` in float32
(an activation times or plus a constant), ``requantize`` ``rint(x * scale /
out_scale)``; the arithmetic of two int8 tensors is `graph.ops.elementwise`'s;
the elementwise functions (``hardsigmoid`` ... ``leakyrelu``, ``silu``)
take a ``table`` attribute on int8, the 256 outputs of the int8 inputs -128
to 127.

(``maxpool``, ``flatten``, ``reshape``, ``pad``, ``concat``, ``slice`` and
``transpose`` work on int8 unchanged.)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from vdla.graph.errors import GraphError

__all__ = ["Tensor", "Node", "Graph"]


@dataclasses.dataclass
class Tensor:
    """One named tensor.

    Parameters
    ----------
    name : str
    shape : tuple of int
        Static shape.
    dtype : numpy.dtype
    value : numpy.ndarray, optional
        The data of a constant (of ``shape`` and ``dtype``).
    exponent : int, optional
        For a quantised tensor: its real value is ``q * 2**-exponent``.
    scale : float or numpy.ndarray, optional
        For a quantised tensor whose scale is not a power of two (a model
        another tool quantised): its real value is ``q * scale``; a weight's
        or bias's may be one per output channel (first axis).
    zero_point : int
        For a quantised activation: the int8 level that stands for 0 (its real
        value is ``(q - zero_point) * step``); a uint8 zero point less 128.
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    value: np.ndarray | None = None
    exponent: int | None = None
    scale: float | None = None
    zero_point: int = 0

    def __post_init__(self):
        self.shape = tuple(int(n) for n in self.shape)
        self.dtype = np.dtype(self.dtype)

    @property
    def constant(self) -> bool:
        return self.value is not None

    @property
    def quantized(self) -> bool:
        """Whether the tensor has a scale (``exponent`` or ``scale``)."""
        return self.exponent is not None or self.scale is not None

    @property
    def real_scale(self) -> float:
        """The value of one integer step: ``scale``, or ``2**-exponent``."""
        if self.scale is not None:
            return self.scale
        if self.exponent is None:
            raise GraphError(f"tensor {self.name!r} has no scale")
        return 2.0 ** -self.exponent

    def describe(self) -> str:
        """``"int8 (1, 16, 8, 8)"``."""
        return f"{self.dtype.name} {self.shape}"


@dataclasses.dataclass
class Node:
    """One operator application.

    Parameters
    ----------
    name : str
        Unique in its graph (the importer names unnamed nodes after their output).
    op : str
        An operator of this module's list.
    inputs, outputs : list of str
        Tensor names.
    attrs : dict
        The operator's attributes (plain ints, floats, bools and tuples).
    """

    name: str
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        return f"node {self.name!r} ({self.op})"


@dataclasses.dataclass
class Graph:
    """A network: tensors, nodes in topological order, its inputs and outputs."""

    tensors: dict[str, Tensor]
    nodes: list[Node]
    inputs: list[str]
    outputs: list[str]

    def copy(self) -> "Graph":
        """A copy whose nodes and tensors can be changed (constant arrays are shared)."""
        return Graph({name: dataclasses.replace(t) for name, t in self.tensors.items()},
                     [dataclasses.replace(n, inputs=list(n.inputs), outputs=list(n.outputs),
                                          attrs=dict(n.attrs)) for n in self.nodes],
                     list(self.inputs), list(self.outputs))

    def producer(self, tensor: str) -> Node | None:
        """The node that writes ``tensor`` (None for inputs and constants)."""
        for node in self.nodes:
            if tensor in node.outputs:
                return node
        return None

    def consumers(self, tensor: str) -> list[Node]:
        """The nodes that read ``tensor``."""
        return [node for node in self.nodes if tensor in node.inputs]

    def uses(self, tensor: str) -> int:
        """How often ``tensor`` is read (by nodes, and once more if it is a graph output)."""
        return (sum(node.inputs.count(tensor) for node in self.nodes)
                + (tensor in self.outputs))

    def value(self, tensor: str) -> np.ndarray | None:
        """The constant value of ``tensor``, or None when it is computed or fed."""
        return self.tensors[tensor].value

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise GraphError(f"no node named {name!r} (nodes: "
                         f"{', '.join(n.name for n in self.nodes[:8])}"
                         f"{', ...' if len(self.nodes) > 8 else ''})")

    def rename_uses(self, old: str, new: str) -> None:
        """Make every reader of ``old`` (and the outputs list) read ``new`` instead."""
        for node in self.nodes:
            node.inputs = [new if name == old else name for name in node.inputs]
        self.outputs = [new if name == old else name for name in self.outputs]

    def rename_tensor(self, old: str, new: str) -> None:
        """Call tensor ``old`` ``new`` everywhere: its producer, readers, inputs and outputs."""
        self.tensors[new] = dataclasses.replace(self.tensors.pop(old), name=new)
        for node in self.nodes:
            node.inputs = [new if name == old else name for name in node.inputs]
            node.outputs = [new if name == old else name for name in node.outputs]
        self.inputs = [new if name == old else name for name in self.inputs]
        self.outputs = [new if name == old else name for name in self.outputs]

    def prune(self) -> "Graph":
        """Drop nodes whose outputs nobody reads and tensors nothing refers to (in place)."""
        live = set(self.outputs)
        kept = []
        for node in reversed(self.nodes):
            if any(name in live for name in node.outputs):
                kept.append(node)
                live.update(node.inputs)
        self.nodes = kept[::-1]
        live.update(self.inputs)
        self.tensors = {name: t for name, t in self.tensors.items() if name in live}
        return self

    def check(self) -> "Graph":
        """Raise `GraphError` unless every node reads defined tensors, in order, once written.

        Returns the graph, so ``Graph(...).check()`` reads as construction.
        """
        defined = {name for name, t in self.tensors.items() if t.constant} | set(self.inputs)
        names = set()
        for name in self.inputs + self.outputs:
            if name not in self.tensors:
                raise GraphError(f"graph input or output {name!r} has no tensor")
        for node in self.nodes:
            if node.name in names:
                raise GraphError(f"two nodes are named {node.name!r}")
            names.add(node.name)
            for name in node.inputs:
                if name not in defined:
                    raise GraphError(f"{node.describe()}: input {name!r} is not defined before "
                                     "it is read")
            for name in node.outputs:
                if name in defined:
                    raise GraphError(f"{node.describe()}: output {name!r} is written twice")
                if name not in self.tensors:
                    raise GraphError(f"{node.describe()}: output {name!r} has no tensor")
                defined.add(name)
        for name in self.outputs:
            if name not in defined:
                raise GraphError(f"graph output {name!r} is never computed")
        return self

    def summary(self) -> list[dict[str, Any]]:
        """One row per node: name, op, input and output shapes (for inspect and tests)."""
        return [{"name": n.name, "op": n.op,
                 "inputs": [list(self.tensors[i].shape) for i in n.inputs
                            if not self.tensors[i].constant],
                 "outputs": [list(self.tensors[o].shape) for o in n.outputs]}
                for n in self.nodes]
