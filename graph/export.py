"""An integer graph as a QDQ ONNX model: vdla's quantisation, runnable by other tools.

Every int8 tensor of the integer graph becomes the output of a
QuantizeLinear at its own scale ``2**-exponent`` (zero point 0), and every
operator computes in float between DequantizeLinear and QuantizeLinear, as
`onnxruntime.quantization` writes QDQ models. Weights are int8 initialisers
and biases int32 ones at the accumulator's scale, each behind a
DequantizeLinear, without the ``2**(shift-1)`` that vdla folds into the bias
for rounding (a QuantizeLinear rounds by itself, half to even).

A conv with a fused residual add (`graph.passes.residual`) is written as it
computes: ``Conv`` and ``Add`` of the residual in float with no QuantizeLinear
between them (its own int8 output does not exist), then the output's
QuantizeLinear: one rounding, as in vdla; and reading such a file back, the
conv's output has no scale, which is what lets vdla fuse it again.

The result runs on onnxruntime with exactly vdla's scales (the comparison in
`benchmarks/network.py`), and imports back into vdla, whose QDQ reading
(`graph.passes.qdq`) finds the same scales. The int8 tensors keep their names
in the model, so each can be compared with vdla's.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node
from vdla.graph.ops import OPS

__all__ = ["to_qdq"]


class _Writer:
    """The QDQ model being written: its nodes and initialisers, one scale initialiser per
    distinct scale and one DequantizeLinear per tensor. Each operator's ``export``
    (`graph.ops`) writes its nodes through it."""

    zero8, zero32 = "zero/int8", "zero/int32"

    def __init__(self, graph: Graph):
        from onnx import helper, numpy_helper
        self.graph, self.helper, self.numpy_helper = graph, helper, numpy_helper
        self.nodes: list = []
        self.inits: list = []
        self._scales: dict[tuple, str] = {}
        self._dequantized: set[str] = set()
        self.constant(self.zero8, np.array(0, np.int8))
        self.constant(self.zero32, np.array(0, np.int32))

    def constant(self, name: str, value: np.ndarray) -> str:
        """An initialiser."""
        self.inits.append(self.numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op_type: str, inputs: list[str], outputs: list[str], name: str,
             **attrs) -> None:
        self.nodes.append(self.helper.make_node(op_type, inputs, outputs, name=name, **attrs))

    def scale(self, name: str) -> str:
        """The initialiser holding tensor ``name``'s scale (one per distinct scale)."""
        tensor = self.graph.tensors[name]
        vector = isinstance(tensor.scale, np.ndarray)  # per output channel
        key = (tensor.exponent, tuple(tensor.scale) if vector else tensor.scale)
        if key not in self._scales:
            self._scales[key] = (f"scale/2^{-tensor.exponent}" if tensor.exponent is not None
                                 else f"scale/{name}" if vector else f"scale/{tensor.scale!r}")
            self.constant(self._scales[key], np.array(tensor.real_scale, np.float32))
        return self._scales[key]

    def axis(self, name: str) -> dict:
        """A per-channel scale's axis (the output channels), as DequantizeLinear takes it."""
        return {"axis": 0} if isinstance(self.graph.tensors[name].scale, np.ndarray) else {}

    def dequantize(self, name: str) -> str:
        """Tensor ``name`` in float: itself if float, else its DequantizeLinear's output."""
        tensor = self.graph.tensors[name]
        if tensor.dtype == np.float32:
            return name
        out = f"{name}/f"
        if out in self._dequantized:  # one DequantizeLinear per tensor, whatever its readers
            return out
        self._dequantized.add(out)
        zero = self.zero32 if tensor.dtype == np.int32 else self.zero8
        self.node("DequantizeLinear", [name, self.scale(name), zero], [out], f"{name}/dq",
                  **self.axis(name))
        return out

    def quantize(self, node: Node, value: str) -> None:
        """``node``'s output: ``value`` (float) through a QuantizeLinear at its scale."""
        (out,) = node.outputs
        self.node("QuantizeLinear", [value, self.scale(out), self.zero8], [out], f"{out}/q")

    def relu(self, raw: str, relu: bool) -> str:
        if not relu:
            return raw
        self.node("Relu", [raw], [f"{raw}/relu"], f"{raw}/relu")
        return f"{raw}/relu"

    def float_op(self, node: Node, op_type: str, extra: list[str] = (), **attrs) -> None:
        """``node`` as the float ``op_type`` between its input's DequantizeLinear and its
        output's QuantizeLinear (``extra``: constant inputs after the first)."""
        raw = f"{node.outputs[0]}/raw"
        self.node(op_type, [self.dequantize(node.inputs[0]), *extra], [raw], node.name,
                  **attrs)
        self.quantize(node, raw)


def to_qdq(graph: Graph, opset: int = 17):
    """The QDQ ONNX model (``onnx.ModelProto``) of an integer graph (`graph.quantize`)."""
    import onnx
    from onnx import TensorProto, helper
    writer = _Writer(graph)
    for name, tensor in graph.tensors.items():
        if tensor.constant:
            if tensor.quantized and tensor.dtype == np.int32:
                continue  # biases are written per layer, without the rounding term
            writer.constant(name, tensor.value)
    for node in graph.nodes:
        op = OPS.get(node.op)
        if op is None or op.export is None:
            raise GraphError(f"{node.describe()}: no QDQ form for operator {node.op!r}")
        if any(key.startswith("zero") or key.endswith("zero_point") for key in node.attrs) \
                or any(graph.tensors[name].zero_point for name in node.outputs):
            raise GraphError(f"{node.describe()}: its zero points have no QDQ export (vdla "
                             "writes symmetric int8)")
        op.export(writer, node)
    values = [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(graph.tensors[name]
                                                                           .shape))
              for name in graph.inputs]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                             list(graph.tensors[name].shape))
               for name in graph.outputs]
    model = helper.make_model(helper.make_graph(writer.nodes, "vdla_qdq", values, outputs,
                                                writer.inits),
                              opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model)
    return model
