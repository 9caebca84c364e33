"""Small ONNX models built with onnx.helper for the graph-level tests (seeded weights)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def initializer(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def model_bytes(nodes, inputs, outputs, inits=(), opset: int = 17) -> bytes:
    """A serialised one-graph model; ``inputs``/``outputs`` are ``(name, elem_type, shape)``."""
    def values(specs):
        return [helper.make_tensor_value_info(name, kind, shape) for name, kind, shape in specs]
    graph = helper.make_graph(list(nodes), "g", values(inputs), values(outputs), list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=8).SerializeToString()


def residual_cnn(seed: int = 0, channels: int = 8, size: int = 8, classes: int = 10,
                 batch: int | str = "N", opset: int = 17, pads=(1, 1, 1, 1)) -> onnx.ModelProto:
    """conv-bn-relu, maxpool, conv-bn-relu, conv-bn, residual add, relu, avgpool, gemm, softmax.

    The shape of the digits model (8x8 images), with BatchNorm statistics that
    keep activations at a moderate scale.
    """
    rng = np.random.default_rng(seed)

    def conv_weight(out, inp, k=3):
        return (rng.standard_normal((out, inp, k, k)) / np.sqrt(inp * k * k)).astype(np.float32)

    def bn(prefix, c):
        return [initializer(f"{prefix}_scale", rng.uniform(0.5, 1.5, c).astype(np.float32)),
                initializer(f"{prefix}_bias", rng.uniform(-0.2, 0.2, c).astype(np.float32)),
                initializer(f"{prefix}_mean", rng.uniform(-0.1, 0.1, c).astype(np.float32)),
                initializer(f"{prefix}_var", rng.uniform(0.5, 1.5, c).astype(np.float32))]

    inits = [initializer("w1", conv_weight(channels, 1)), *bn("bn1", channels),
             initializer("w2", conv_weight(channels, channels)), *bn("bn2", channels),
             initializer("w3", conv_weight(channels, channels)),
             initializer("b3", rng.uniform(-0.1, 0.1, channels).astype(np.float32)),
             *bn("bn3", channels),
             initializer("fc_w", (rng.standard_normal((classes, channels)) / 3)
                         .astype(np.float32)),
             initializer("fc_b", rng.uniform(-0.1, 0.1, classes).astype(np.float32))]

    def bn_node(x, prefix, y):
        return helper.make_node("BatchNormalization", [x] + [f"{prefix}_{p}" for p in
                                                             ("scale", "bias", "mean", "var")],
                                [y], name=prefix, epsilon=1e-5)

    nodes = [
        helper.make_node("Conv", ["input", "w1"], ["c1"], name="conv1", pads=list(pads)),
        bn_node("c1", "bn1", "n1"),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        bn_node("c2", "bn2", "n2"),
        helper.make_node("Relu", ["n2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="conv3", pads=[1, 1, 1, 1]),
        bn_node("c3", "bn3", "n3"),
        helper.make_node("Add", ["n3", "p1"], ["s"], name="residual"),
        helper.make_node("Relu", ["s"], ["r3"], name="relu3"),
        helper.make_node("GlobalAveragePool", ["r3"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "residual_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 1, size, size])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, classes])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def images(count: int, size: int = 8, seed: int = 1) -> np.ndarray:
    """Smooth random images in [0, 1) (digits-like ranges)."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(0, 1, (count, 1, size // 2, size // 2))
    return np.repeat(np.repeat(coarse, 2, axis=2), 2, axis=3).astype(np.float32)


def general_convs(seed: int = 0, batch: int | str = "N") -> onnx.ModelProto:
    """Every kind of Conv the importer takes, on 1x8x8 images, each followed by a ReLU.

    A 3x3 stem to 8 channels; a depthwise 3x3 of stride 2 with SAME_UPPER's
    asymmetric pads; a grouped (2 groups) 3x3 with dilation 2; a 1x3 kernel
    with a left pad past its extent (windows that see only padding); then global
    average pool and a Gemm to 10 logits.
    """
    rng = np.random.default_rng(seed)

    def weight(shape):
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    specs = [  # name, weight shape, attributes
        ("stem", (8, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
        ("depthwise", (8, 1, 3, 3), {"group": 8, "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ("grouped", (8, 4, 3, 3), {"group": 2, "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
        ("wide", (8, 8, 1, 3), {"pads": [0, 3, 1, 0]}),
    ]
    nodes, inits, x = [], [], "input"
    for name, shape, attrs in specs:
        inits += [initializer(f"{name}_w", weight(shape)),
                  initializer(f"{name}_b", rng.uniform(-0.1, 0.1, shape[0]).astype(np.float32))]
        nodes += [helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"],
                                   name=name, **attrs),
                  helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"], name=f"{name}_relu")]
        x = f"{name}_r"
    inits.append(initializer("fc_w", weight((10, 8))))
    nodes += [helper.make_node("GlobalAveragePool", [x], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
              helper.make_node("Gemm", ["f", "fc_w"], ["logits"], name="fc", transB=1)]
    graph = helper.make_graph(
        nodes, "general_convs",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
