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

__all__ = ["to_qdq"]

_FLOAT_OPS = {"maxpool": "MaxPool", "qavgpool": "AveragePool",
              "qglobal_avgpool": "GlobalAveragePool", "flatten": "Flatten", "reshape": "Reshape",
              "relu": "Relu", "clip": "Clip", "pad": "Pad"}


def to_qdq(graph: Graph, opset: int = 17):
    """The QDQ ONNX model (``onnx.ModelProto``) of an integer graph (`graph.quantize`)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes, inits = [], []
    scales: dict[tuple, str] = {}
    dequantized: set[str] = set()

    def scale(name: str) -> str:
        """The initialiser holding tensor ``name``'s scale (one per distinct scale)."""
        tensor = graph.tensors[name]
        vector = isinstance(tensor.scale, np.ndarray)  # per output channel
        key = (tensor.exponent, tuple(tensor.scale) if vector else tensor.scale)
        if key not in scales:
            scales[key] = (f"scale/2^{-tensor.exponent}" if tensor.exponent is not None
                           else f"scale/{name}" if vector else f"scale/{tensor.scale!r}")
            inits.append(numpy_helper.from_array(np.array(tensor.real_scale, np.float32),
                                                 scales[key]))
        return scales[key]

    def axis(name: str) -> dict:
        """A per-channel scale's axis (the output channels), as DequantizeLinear takes it."""
        return {"axis": 0} if isinstance(graph.tensors[name].scale, np.ndarray) else {}

    zero8, zero32 = "zero/int8", "zero/int32"
    inits += [numpy_helper.from_array(np.array(0, np.int8), zero8),
              numpy_helper.from_array(np.array(0, np.int32), zero32)]

    def dequantize(name: str) -> str:
        tensor = graph.tensors[name]
        if tensor.dtype == np.float32:
            return name
        out = f"{name}/f"
        if out in dequantized:  # one DequantizeLinear per tensor, whatever its readers
            return out
        dequantized.add(out)
        zero = zero32 if tensor.dtype == np.int32 else zero8
        nodes.append(helper.make_node("DequantizeLinear", [name, scale(name), zero],
                                      [out], name=f"{name}/dq", **axis(name)))
        return out

    def quantize(node: Node, value: str) -> None:
        (out,) = node.outputs
        nodes.append(helper.make_node("QuantizeLinear",
                                      [value, scale(out), zero8], [out],
                                      name=f"{out}/q"))

    for name, tensor in graph.tensors.items():
        if tensor.constant:
            value = tensor.value
            if tensor.quantized and tensor.dtype == np.int32:
                continue  # biases are written per layer, without the rounding term
            inits.append(numpy_helper.from_array(np.asarray(value), name))
    for node in graph.nodes:
        attrs, op = dict(node.attrs), node.op
        if op == "quantize_input":
            quantize(node, node.inputs[0])
        elif op in ("qconv", "qdense"):
            x, w, b = node.inputs[:3]
            # A fixed-point layer rounds by itself; a shift's rounding is in its bias.
            fixed_point = attrs.get("multiplier") or attrs.get("per_channel")
            rounding = 0 if fixed_point else 1 << attrs["shift"] >> 1
            bias = graph.value(b).astype(np.int64) - rounding
            if attrs.get("per_channel"):  # the biases, without the multipliers after them
                bias = bias[:len(bias) // 2]
            b_name = f"{node.name}/bias"
            inits.append(numpy_helper.from_array(bias.astype(np.int32), b_name))
            b_deq = f"{b_name}/f"
            nodes.append(helper.make_node("DequantizeLinear", [b_name, scale(b), zero32],
                                          [b_deq], name=f"{b_name}/dq", **axis(b)))
            inputs = [dequantize(x), dequantize(w), b_deq]
            raw = f"{node.outputs[0]}/raw"
            if op == "qconv":
                top, left, bottom, right = attrs["pads"]
                nodes.append(helper.make_node("Conv", inputs, [raw], name=node.name,
                                              kernel_shape=list(attrs["kernel"]),
                                              strides=list(attrs["stride"]),
                                              pads=[top, left, bottom, right],
                                              group=attrs["groups"],
                                              dilations=list(attrs["dilation"])))
            else:
                nodes.append(helper.make_node("Gemm", inputs, [raw], name=node.name, transB=1))
            if "residual_shift" in attrs:   # the add fused into it, in float before the Q
                summed = f"{node.outputs[0]}/sum"
                nodes.append(helper.make_node("Add", [raw, dequantize(node.inputs[3])],
                                              [summed], name=f"{node.name}/residual"))
                raw = summed
            quantize(node, _relu(nodes, raw, attrs["relu"], helper))
        elif op == "qadd":
            raw = f"{node.outputs[0]}/raw"
            nodes.append(helper.make_node("Add", [dequantize(i) for i in node.inputs], [raw],
                                          name=node.name))
            quantize(node, _relu(nodes, raw, attrs["relu"], helper))
        elif op in _FLOAT_OPS:
            raw = f"{node.outputs[0]}/raw"
            extra = _float_attrs(node, helper, inits, numpy_helper, graph)
            nodes.append(helper.make_node(_FLOAT_OPS[op], [dequantize(node.inputs[0])]
                                          + extra.pop("_inputs", []), [raw], name=node.name,
                                          **extra))
            quantize(node, raw)
        elif op == "dequantize_output":
            (out,) = node.outputs
            nodes.append(helper.make_node("DequantizeLinear",
                                          [node.inputs[0], scale(node.inputs[0]), zero8],
                                          [out], name=node.name))
        elif op == "softmax":
            nodes.append(helper.make_node("Softmax", node.inputs, node.outputs, name=node.name,
                                          axis=attrs["axis"]))
        else:
            raise GraphError(f"{node.describe()}: no QDQ form for operator {op!r}")
    values = [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(graph.tensors[name]
                                                                           .shape))
              for name in graph.inputs]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                             list(graph.tensors[name].shape))
               for name in graph.outputs]
    model = helper.make_model(helper.make_graph(nodes, "vdla_qdq", values, outputs, inits),
                              opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model)
    return model


def _relu(nodes, raw: str, relu: bool, helper) -> str:
    if not relu:
        return raw
    nodes.append(helper.make_node("Relu", [raw], [f"{raw}/relu"], name=f"{raw}/relu"))
    return f"{raw}/relu"


def _float_attrs(node: Node, helper, inits, numpy_helper, graph: Graph) -> dict:
    """ONNX attributes (and extra constant inputs) of a float operator between DQ and Q."""
    attrs = node.attrs
    if node.op in ("maxpool", "qavgpool"):
        extra = {"kernel_shape": list(attrs["kernel"]), "strides": list(attrs["stride"]),
                 "pads": list(attrs["pads"])}
        if node.op == "qavgpool":
            extra["count_include_pad"] = int(attrs["count_include_pad"])
        return extra
    if node.op == "flatten":
        return {"axis": attrs["axis"]}
    if node.op == "reshape":
        name = f"{node.name}/shape"
        inits.append(numpy_helper.from_array(np.array(attrs["shape"], np.int64), name))
        return {"_inputs": [name]}
    if node.op == "clip":
        step = graph.tensors[node.inputs[0]].real_scale
        names = [f"{node.name}/min", f"{node.name}/max"]
        for name, bound in zip(names, (attrs["min"], attrs["max"])):
            inits.append(numpy_helper.from_array(np.array(bound * step, np.float32), name))
        return {"_inputs": names}
    if node.op == "pad":
        top, left, bottom, right = attrs["pads"]
        name = f"{node.name}/pads"
        inits.append(numpy_helper.from_array(np.array([0, 0, top, left, 0, 0, bottom, right],
                                                      np.int64), name))
        return {"_inputs": [name]}
    return {}
