"""One ONNX node against onnx's own reference and onnxruntime: the helpers the operator tests
of pooling, Pad, Gemm and BatchNormalization share."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.graph.models import initializer, model_bytes
from vdla.frontend.onnx import from_bytes
from vdla.graph.kernels import execute


def fed_first(node, arrays, opset: int = 17) -> bytes:
    """A model of ``node`` with its first input fed and the others initialisers."""
    names = list(node.input)
    inputs = [(names[0], helper.np_dtype_to_tensor_dtype(arrays[0].dtype), arrays[0].shape)]
    inits = [initializer(name, array) for name, array in zip(names[1:], arrays[1:]) if name]
    return model_bytes([node], inputs, [(out, TensorProto.UNDEFINED, None)
                                        for out in node.output], inits, opset)


def onnx_reference(data: bytes, feeds: dict) -> list[np.ndarray]:
    return ReferenceEvaluator(onnx.load_from_string(data)).run(None, feeds)


def onnxruntime(data: bytes, feeds: dict) -> list[np.ndarray]:
    """The outputs onnxruntime computes (an output of undefined type takes the first
    input's, which onnxruntime needs declared)."""
    import onnxruntime as ort
    model = onnx.load_from_string(data)
    for output in model.graph.output:
        if output.type.tensor_type.elem_type == TensorProto.UNDEFINED:
            output.type.tensor_type.elem_type = model.graph.input[0].type.tensor_type.elem_type
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def vdla_float(data: bytes, feeds: dict):
    """vdla's float graph of a model and its outputs."""
    graph = from_bytes(data)
    values = execute(graph, feeds)
    return graph, [values[name] for name in graph.outputs]


def qdq_node(node, x_scale: float, y_scale: float, inits=(), shape=None,
             opset: int = 19) -> bytes:
    """DequantizeLinear -> ``node`` -> QuantizeLinear on an int8 input ``q`` (``node``'s first
    input is its dequantised value): what vdla's int8 form of ``node`` must compute."""
    first = node.input[0]
    graph = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["q", "sx"], [first]), node,
         helper.make_node("QuantizeLinear", [node.output[0], "sy", "zero"], ["y"])], "qdq",
        [helper.make_tensor_value_info("q", TensorProto.INT8, shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [numpy_helper.from_array(np.array(x_scale, np.float32), "sx"),
         numpy_helper.from_array(np.array(y_scale, np.float32), "sy"),
         numpy_helper.from_array(np.array(0, np.int8), "zero"), *inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=9).SerializeToString()
