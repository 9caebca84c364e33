"""Small offline models of the architectures users bring, as float ONNX: seeded, CI-sized.

Usage::

    python benchmarks/models/zoo.py -o DIR [--seed 0] [--only NAME,...]

or, from Python, ``MODELS[name](seed)`` (an ``onnx.ModelProto``) and
``random_inputs(model, count, seed)``. Generated, not committed.

Each builder writes what that architecture's exporter would, with
`onnx.helper` and seeded numpy weights, at opset 17 and IR version 8 (what
onnxruntime 1.31 reads; `vdla.bench.onnx_builder`): every model has one input
``input`` with a symbolic batch ``N``, passes `onnx.checker` (full check,
strict shape inference) and runs on onnxruntime, and the same seed gives the
same bytes. Sizes are scaled down to a few million MACs where the original is
larger; layouts and operators are the originals':

- ``squeezenet``: SqueezeNet 1.1 at half width, 64 px: fire modules (squeeze
  1x1, expand 1x1 and 3x3 joined by Concat), ceil-mode max pools, a 1x1 conv
  classifier, global pool;
- ``mobilenetv3``: a MobileNetV3 stem and two bottlenecks, HardSwish, and
  squeeze-excite (GlobalAveragePool, 1x1 convs, HardSigmoid, Mul), 32 px;
- ``unet``: a two-level U-Net, 32 px: one up-step a ConvTranspose, the other a
  bilinear Resize (align corners, as torch's Upsample) and a 1x1 conv, skip
  connections by Concat, a per-pixel 2-class map;
- ``yolo``: a YOLOv5/v8-style detector, 32 px: Focus stem (four strided
  Slices, Concat), LeakyRelu(0.1), a C2f-style block (Split, Concat), a
  nearest Resize up-step, detection heads at two scales (two outputs);
- ``shufflenetv2``: a ShuffleNetV2 stem, down-sampling unit and basic unit
  (Split, Concat, channel shuffle as Reshape -> Transpose -> Reshape), 32 px;
- ``dcgan``: DCGAN's generator (Radford et al. 2016) at ngf 8: z (100 x 1 x 1)
  through five ConvTransposes with BatchNormalization and Relu to a Tanh
  64 x 64 image;
- ``dqn``: the DQN of the TVM paper (Mnih et al. 2015): 4 x 84 x 84 frames,
  conv 8x8/4 x32, 4x4/2 x64, 3x3/1 x64, fc 512, fc 18 actions;
- ``kws_dscnn``, ``ic_resnet8``, ``vww_mobilenet``, ``ad_autoencoder``:
  MLPerf Tiny's four reference models at their sizes (keyword spotting DS-CNN
  on 1 x 49 x 10 MFCCs, 12 classes; image classification ResNet-8 on 32 x 32 x 3
  with 16/32/64 filters; visual wake words MobileNetV1 0.25 on 96 x 96 x 3, 2
  classes; anomaly detection's fully connected autoencoder 640 -> 128 x4 -> 8 ->
  128 x4 -> 640), padded as Keras's ``same`` (one more row and column at the
  end where a stride-2 window needs it) and written as tf2onnx writes them
  (MatMul and Add for Keras Dense layers);
- ``torch_export``: a small audio classifier as `torch.onnx.export` writes it:
  Squeeze, input normalisation by Sub and Div constants, Unsqueeze, Constant
  nodes, a Mul by a constant, ``x.view(x.size(0), -1)`` as Shape -> Gather ->
  Unsqueeze -> Concat -> Reshape, Gemm with transB.

Weights are He-normal (fan-in per group); each BatchNormalization has a
scale in [0.75, 1.25], a shift, mean and variance drawn near the identity.
``CLASSIFIERS`` names the models whose output's axis 1 holds class scores
(where a top-1 comparison means something).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from vdla.bench.onnx_builder import IR_VERSION, OPSET

__all__ = ["MODELS", "CLASSIFIERS", "random_inputs", "macs", "write_all"]


class _Net:
    """Nodes and initialisers of one model, weights from one seeded generator.

    Each node's (first) output is named after the node; initialisers are
    ``<node>.<role>``. Shapes are tracked as nodes are added (``shapes``), so
    builders size their weights from what reaches them.
    """

    def __init__(self, name: str, seed: int, inputs: dict[str, tuple[int, ...]]):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.initializers: list = []
        self.inputs = inputs
        self.shapes: dict[str, tuple[int, ...]] = dict(inputs)

    # -- plumbing -----------------------------------------------------------------------

    def const(self, name: str, value) -> str:
        from onnx import numpy_helper
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        self.shapes[name] = np.shape(value)
        return name

    def node(self, op: str, inputs: list[str], name: str, outputs: int = 1,
             **attrs) -> str | list[str]:
        """Add a node; its output name (a list of ``<name>_<i>`` for several outputs)."""
        from onnx import helper
        names = [name] if outputs == 1 else [f"{name}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=name, **attrs))
        self._infer()
        return names[0] if outputs == 1 else names

    def constant_node(self, name: str, value) -> str:
        """A Constant node (how torch.onnx.export writes small constants)."""
        from onnx import numpy_helper
        return self.node("Constant", [], name,
                         value=numpy_helper.from_array(np.asarray(value), name))

    def _infer(self) -> None:
        """The shapes of the new node's outputs, from onnx shape inference (batch 1)."""
        import onnx
        from onnx import TensorProto, helper
        # Weights as typed inputs: inference reads the values of small constants only (shapes,
        # axes, scales), and serialising every weight after each node would be quadratic.
        weights = [init for init in self.initializers if np.prod(init.dims) > 16]
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, (1,) + shape[1:])
             for name, shape in self.inputs.items()]
            + [helper.make_tensor_value_info(init.name, init.data_type, init.dims)
               for init in weights],
            [], [init for init in self.initializers if np.prod(init.dims) <= 16])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        for value in inferred.graph.value_info:
            dims = value.type.tensor_type.shape.dim
            self.shapes[value.name] = tuple(d.dim_value for d in dims)

    def channels(self, x: str) -> int:
        return self.shapes[x][1]

    def weight(self, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (self.rng.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32)

    def bias(self, count: int) -> np.ndarray:
        return self.rng.normal(0.0, 0.05, count).astype(np.float32)

    # -- layers ---------------------------------------------------------------------------

    def conv(self, x: str, name: str, channels: int, kernel=1, stride=1, pads=None,
             groups: int = 1, bias: bool = True) -> str:
        """A Conv; ``pads`` (top, left, bottom, right) default to half the kernel."""
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        pads = [kh // 2, kw // 2, kh // 2, kw // 2] if pads is None else list(pads)
        c = self.channels(x)
        inputs = [x, self.const(f"{name}.weight",
                                self.weight((channels, c // groups, kh, kw), c // groups * kh * kw))]
        if bias:
            inputs.append(self.const(f"{name}.bias", self.bias(channels)))
        return self.node("Conv", inputs, name, kernel_shape=[kh, kw], strides=[stride, stride],
                         pads=pads, group=groups)

    def conv_transpose(self, x: str, name: str, channels: int, kernel: int, stride: int,
                       pad: int, bias: bool = True) -> str:
        c = self.channels(x)
        # fan-in of each output pixel: the taps that reach it (kernel / stride per axis).
        fan_in = c * max(1, (kernel // stride) ** 2)
        inputs = [x, self.const(f"{name}.weight", self.weight((c, channels, kernel, kernel),
                                                               fan_in))]
        if bias:
            inputs.append(self.const(f"{name}.bias", self.bias(channels)))
        return self.node("ConvTranspose", inputs, name, kernel_shape=[kernel, kernel],
                         strides=[stride, stride], pads=[pad] * 4)

    def batchnorm(self, x: str, name: str) -> str:
        c = self.channels(x)
        values = {"scale": self.rng.uniform(0.75, 1.25, c), "bias": self.rng.normal(0, 0.1, c),
                  "mean": self.rng.normal(0, 0.1, c), "var": self.rng.uniform(0.5, 1.5, c)}
        inputs = [x] + [self.const(f"{name}.{role}", value.astype(np.float32))
                        for role, value in values.items()]
        return self.node("BatchNormalization", inputs, name, epsilon=1e-5)

    def clip(self, x: str, name: str, low: float, high: float) -> str:
        return self.node("Clip", [x, self.const(f"{name}.min", np.array(low, np.float32)),
                                  self.const(f"{name}.max", np.array(high, np.float32))], name)

    def gemm(self, x: str, name: str, features: int) -> str:
        """A torch Linear: Gemm with the weight stored (out, in), transB=1."""
        fan_in = self.shapes[x][1]
        return self.node("Gemm", [x, self.const(f"{name}.weight",
                                                self.weight((features, fan_in), fan_in)),
                                  self.const(f"{name}.bias", self.bias(features))],
                         name, transB=1)

    def dense_keras(self, x: str, name: str, features: int) -> str:
        """A Keras Dense as tf2onnx writes it: MatMul by (in, out), then Add of the bias."""
        fan_in = self.shapes[x][1]
        y = self.node("MatMul", [x, self.const(f"{name}/kernel",
                                               self.weight((fan_in, features), fan_in))],
                      f"{name}/MatMul")
        return self.node("Add", [y, self.const(f"{name}/bias", self.bias(features))],
                         f"{name}/BiasAdd")

    def model(self, outputs: list[str]):
        """The checked ``ModelProto``: inputs with batch ``N``, outputs as inferred."""
        import onnx
        from onnx import TensorProto, helper

        def value(name, shape):
            return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", *shape[1:]])
        graph = helper.make_graph(self.nodes, self.name,
                                  [value(n, s) for n, s in self.inputs.items()],
                                  [value(n, self.shapes[n]) for n in outputs], self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="vdla benchmarks/models/zoo.py")
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model, full_check=True)
        return model


# -- the models ---------------------------------------------------------------------------


def squeezenet(seed: int = 0):
    """SqueezeNet 1.1 (torchvision's ``squeezenet1_1``) at half width, 64 x 64, 10 classes."""
    net = _Net("squeezenet", seed, {"input": (1, 3, 64, 64)})

    def fire(x, name, squeeze, expand):
        s = net.node("Relu", [net.conv(x, f"{name}.squeeze", squeeze)], f"{name}.squeeze_act")
        a = net.node("Relu", [net.conv(s, f"{name}.expand1x1", expand)],
                     f"{name}.expand1x1_act")
        b = net.node("Relu", [net.conv(s, f"{name}.expand3x3", expand, 3)],
                     f"{name}.expand3x3_act")
        return net.node("Concat", [a, b], f"{name}.cat", axis=1)

    def pool(x, name):
        return net.node("MaxPool", [x], name, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    x = net.node("Relu", [net.conv("input", "features.0", 32, 3, 2, pads=[0] * 4)],
                 "features.1")
    x = pool(x, "features.2")
    x = fire(fire(x, "features.3", 8, 32), "features.4", 8, 32)
    x = pool(x, "features.5")
    x = fire(fire(x, "features.6", 16, 64), "features.7", 16, 64)
    x = pool(x, "features.8")
    for index, (squeeze, expand) in enumerate(((24, 96), (24, 96), (32, 128), (32, 128))):
        x = fire(x, f"features.{9 + index}", squeeze, expand)
    x = net.node("Relu", [net.conv(x, "classifier.1", 10)], "classifier.2")
    x = net.node("GlobalAveragePool", [x], "classifier.3")
    return net.model([net.node("Flatten", [x], "logits", axis=1)])


def mobilenetv3(seed: int = 0):
    """A MobileNetV3 stem, two bottlenecks with squeeze-excite, a HardSwish head, 32 x 32."""
    net = _Net("mobilenetv3", seed, {"input": (1, 3, 32, 32)})

    def conv_bn(x, name, channels, kernel=1, stride=1, groups=1, act="HardSwish"):
        y = net.batchnorm(net.conv(x, f"{name}.0", channels, kernel, stride, groups=groups,
                                   bias=False), f"{name}.1")
        return y if act is None else net.node(act, [y], f"{name}.2")

    def squeeze_excite(x, name, squeeze):
        s = net.node("GlobalAveragePool", [x], f"{name}.avgpool")
        s = net.node("Relu", [net.conv(s, f"{name}.fc1", squeeze)], f"{name}.relu")
        s = net.node("HardSigmoid", [net.conv(s, f"{name}.fc2", net.channels(x))],
                     f"{name}.scale_activation", alpha=1 / 6, beta=0.5)
        return net.node("Mul", [x, s], f"{name}.mul")

    def bottleneck(x, name, expanded, channels, stride):
        y = conv_bn(x, f"{name}.expand", expanded)
        y = conv_bn(y, f"{name}.depthwise", expanded, 3, stride, groups=expanded)
        y = squeeze_excite(y, f"{name}.se", expanded // 4)
        y = conv_bn(y, f"{name}.project", channels, act=None)
        if stride == 1 and channels == net.channels(x):
            y = net.node("Add", [x, y], f"{name}.add")
        return y

    x = conv_bn("input", "features.0", 16, 3, 2)
    x = bottleneck(x, "features.1", 64, 24, 2)
    x = bottleneck(x, "features.2", 72, 24, 1)
    x = conv_bn(x, "features.3", 96)
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "avgpool")], "flatten", axis=1)
    x = net.node("HardSwish", [net.gemm(x, "classifier.0", 64)], "classifier.1")
    return net.model([net.gemm(x, "classifier.3", 10)])


def unet(seed: int = 0):
    """A two-level U-Net on 32 x 32 x 3: one ConvTranspose up-step, one bilinear Resize."""
    net = _Net("unet", seed, {"input": (1, 3, 32, 32)})

    def double_conv(x, name, channels):
        for i in range(2):
            x = net.node("Relu", [net.batchnorm(net.conv(x, f"{name}.{3 * i}", channels, 3,
                                                         bias=False), f"{name}.{3 * i + 1}")],
                         f"{name}.{3 * i + 2}")
        return x

    enc1 = double_conv("input", "inc", 8)
    enc2 = double_conv(net.node("MaxPool", [enc1], "down1.pool", kernel_shape=[2, 2],
                                strides=[2, 2]), "down1.conv", 16)
    bottom = double_conv(net.node("MaxPool", [enc2], "down2.pool", kernel_shape=[2, 2],
                                  strides=[2, 2]), "down2.conv", 32)
    up = net.conv_transpose(bottom, "up1.up", 16, 2, 2, 0)
    x = double_conv(net.node("Concat", [enc2, up], "up1.cat", axis=1), "up1.conv", 16)
    scales = net.const("up2.scales", np.array([1, 1, 2, 2], np.float32))
    up = net.node("Resize", [x, "", scales], "up2.up", mode="linear",
                  coordinate_transformation_mode="align_corners")
    up = net.conv(up, "up2.reduce", 8)
    x = double_conv(net.node("Concat", [enc1, up], "up2.cat", axis=1), "up2.conv", 8)
    return net.model([net.conv(x, "outc", 2)])


def yolo(seed: int = 0):
    """A YOLOv5/v8-style detector on 32 x 32 x 3: Focus, C2f, two heads of 3 x (5 + 3)."""
    net = _Net("yolo", seed, {"input": (1, 3, 32, 32)})

    def conv(x, name, channels, kernel=1, stride=1):
        y = net.batchnorm(net.conv(x, f"{name}.conv", channels, kernel, stride, bias=False),
                          f"{name}.bn")
        return net.node("LeakyRelu", [y], f"{name}.act", alpha=0.1)

    def strided(row, column):
        starts = net.const(f"focus.starts{row}{column}", np.array([row, column], np.int64))
        ends = net.const(f"focus.ends{row}{column}", np.array([32, 32], np.int64))
        axes = net.const(f"focus.axes{row}{column}", np.array([2, 3], np.int64))
        steps = net.const(f"focus.steps{row}{column}", np.array([2, 2], np.int64))
        return net.node("Slice", ["input", starts, ends, axes, steps],
                        f"focus.slice{row}{column}")

    x = net.node("Concat", [strided(0, 0), strided(1, 0), strided(0, 1), strided(1, 1)],
                 "focus.cat", axis=1)
    x = conv(x, "model.0", 16, 3)
    x = conv(x, "model.1", 32, 3, 2)
    # C2f: a 1x1 conv, split in halves, a bottleneck on one, all three concatenated.
    y = conv(x, "model.2.cv1", 32)
    halves = net.node("Split", [y, net.const("model.2.split", np.array([16, 16], np.int64))],
                      "model.2.split", outputs=2, axis=1)
    z = conv(conv(halves[1], "model.2.m.0.cv1", 16, 3), "model.2.m.0.cv2", 16, 3)
    p3 = conv(net.node("Concat", [*halves, z], "model.2.cat", axis=1), "model.2.cv2", 32)
    p4 = conv(p3, "model.3", 64, 3, 2)
    anchors = 3 * (5 + 3)
    large = net.conv(p4, "detect.1", anchors)
    up = net.node("Resize", [conv(p4, "model.4", 32), "",
                             net.const("model.5.scales", np.array([1, 1, 2, 2], np.float32))],
                  "model.5", mode="nearest")
    y = conv(net.node("Concat", [up, p3], "model.6", axis=1), "model.7", 16, 3)
    small = net.conv(y, "detect.0", anchors)
    return net.model([small, large])


def shufflenetv2(seed: int = 0):
    """A ShuffleNetV2 stem, down-sampling unit and basic unit (channel split and shuffle)."""
    net = _Net("shufflenetv2", seed, {"input": (1, 3, 32, 32)})

    def conv_bn(x, name, channels, kernel=1, stride=1, groups=1, relu=True):
        y = net.batchnorm(net.conv(x, f"{name}.0", channels, kernel, stride, groups=groups,
                                   bias=False), f"{name}.1")
        return net.node("Relu", [y], f"{name}.2") if relu else y

    def branch(x, name, channels, stride):
        y = conv_bn(x, f"{name}.0", channels)
        y = conv_bn(y, f"{name}.3", channels, 3, stride, groups=channels, relu=False)
        return conv_bn(y, f"{name}.5", channels)

    def shuffle(x, name):
        _, c, h, w = net.shapes[x]
        y = net.node("Reshape", [x, net.const(f"{name}.shape1",
                                              np.array([-1, 2, c // 2, h, w], np.int64))],
                     f"{name}.view")
        y = net.node("Transpose", [y], f"{name}.transpose", perm=[0, 2, 1, 3, 4])
        return net.node("Reshape", [y, net.const(f"{name}.shape2",
                                                 np.array([-1, c, h, w], np.int64))],
                        f"{name}.flatten")

    x = conv_bn("input", "conv1", 24, 3, 2)
    # Down-sampling unit: both branches see the whole input.
    left = conv_bn(conv_bn(x, "stage2.0.branch1.0", 24, 3, 2, groups=24, relu=False),
                   "stage2.0.branch1.2", 24)
    right = branch(x, "stage2.0.branch2", 24, 2)
    x = shuffle(net.node("Concat", [left, right], "stage2.0.cat", axis=1), "stage2.0.shuffle")
    # Basic unit: half the channels pass, the other half through the branch.
    halves = net.node("Split", [x, net.const("stage2.1.split", np.array([24, 24], np.int64))],
                      "stage2.1.split", outputs=2, axis=1)
    right = branch(halves[1], "stage2.1.branch2", 24, 1)
    x = shuffle(net.node("Concat", [halves[0], right], "stage2.1.cat", axis=1),
                "stage2.1.shuffle")
    x = conv_bn(x, "conv5", 128)
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "globalpool")], "flatten",
                 axis=1)
    return net.model([net.gemm(x, "fc", 10)])


def dcgan(seed: int = 0):
    """DCGAN's generator at ngf 8: z of 100 x 1 x 1 to a 3 x 64 x 64 image in [-1, 1]."""
    net = _Net("dcgan", seed, {"input": (1, 100, 1, 1)})
    x = "input"
    for index, (channels, stride, pad) in enumerate(((64, 1, 0), (32, 2, 1), (16, 2, 1),
                                                     (8, 2, 1))):
        y = net.conv_transpose(x, f"main.{3 * index}", channels, 4, stride, pad, bias=False)
        x = net.node("Relu", [net.batchnorm(y, f"main.{3 * index + 1}")],
                     f"main.{3 * index + 2}")
    y = net.conv_transpose(x, "main.12", 3, 4, 2, 1, bias=False)
    return net.model([net.node("Tanh", [y], "main.13")])


def dqn(seed: int = 0):
    """The DQN of the TVM paper: 4 x 84 x 84 frames to 18 action values."""
    net = _Net("dqn", seed, {"input": (1, 4, 84, 84)})
    x = "input"
    for index, (channels, kernel, stride) in enumerate(((32, 8, 4), (64, 4, 2), (64, 3, 1))):
        x = net.node("Relu", [net.conv(x, f"conv{index + 1}", channels, kernel, stride,
                                       pads=[0] * 4)], f"relu{index + 1}")
    x = net.node("Flatten", [x], "flatten", axis=1)
    x = net.node("Relu", [net.gemm(x, "fc1", 512)], "relu4")
    return net.model([net.gemm(x, "fc2", 18)])


def _same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's ``same`` padding of one axis: (before, after), the odd one after."""
    total = max((-(-size // stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _keras_conv(net: _Net, x: str, name: str, channels: int, kernel, stride: int = 1,
                groups: int = 1) -> str:
    """A Keras Conv2D or DepthwiseConv2D with ``padding='same'``, then BatchNormalization."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    _, _, h, w = net.shapes[x]
    (top, bottom), (left, right) = _same_pads(h, kh, stride), _same_pads(w, kw, stride)
    y = net.conv(x, name, channels, (kh, kw), stride, pads=[top, left, bottom, right],
                 groups=groups, bias=False)
    return net.batchnorm(y, f"{name}_bn")


def _keras_head(net: _Net, x: str, pool: str, classes: int):
    """Keras's classifier tail: an AveragePool over the whole map (named ``pool``),
    Flatten, Dense and Softmax; the finished model."""
    _, _, h, w = net.shapes[x]
    x = net.node("AveragePool", [x], pool, kernel_shape=[h, w], strides=[h, w])
    x = net.node("Flatten", [x], "flatten", axis=1)
    return net.model([net.node("Softmax", [net.gemm(x, "dense", classes)], "softmax", axis=1)])


def kws_dscnn(seed: int = 0):
    """MLPerf Tiny keyword spotting: DS-CNN on 49 x 10 MFCCs, 12 classes."""
    net = _Net("kws_dscnn", seed, {"input": (1, 1, 49, 10)})
    x = net.node("Relu", [_keras_conv(net, "input", "conv_1", 64, (10, 4), 2)], "conv_1_relu")
    for index in range(1, 5):
        x = net.node("Relu", [_keras_conv(net, x, f"dw_{index}", 64, 3, groups=64)],
                     f"dw_{index}_relu")
        x = net.node("Relu", [_keras_conv(net, x, f"pw_{index}", 64, 1)], f"pw_{index}_relu")
    return _keras_head(net, x, "avg_pool", 12)


def ic_resnet8(seed: int = 0):
    """MLPerf Tiny image classification: ResNet-8 on 32 x 32 x 3 (16, 32, 64 filters)."""
    net = _Net("ic_resnet8", seed, {"input": (1, 3, 32, 32)})
    x = net.node("Relu", [_keras_conv(net, "input", "conv2d", 16, 3)], "activation")
    for stack, (channels, stride) in enumerate(((16, 1), (32, 2), (64, 2)), start=1):
        y = net.node("Relu", [_keras_conv(net, x, f"stack{stack}_conv1", channels, 3, stride)],
                     f"stack{stack}_relu1")
        y = _keras_conv(net, y, f"stack{stack}_conv2", channels, 3)
        if stride != 1:
            x = net.conv(x, f"stack{stack}_shortcut", channels, 1, stride, pads=[0] * 4)
        x = net.node("Relu", [net.node("Add", [x, y], f"stack{stack}_add")],
                     f"stack{stack}_relu2")
    return _keras_head(net, x, "average_pooling2d", 10)


def vww_mobilenet(seed: int = 0):
    """MLPerf Tiny visual wake words: MobileNetV1 0.25 on 96 x 96 x 3, 2 classes, ReLU6."""
    net = _Net("vww_mobilenet", seed, {"input": (1, 3, 96, 96)})

    def relu6(x, name):
        return net.clip(x, name, 0.0, 6.0)

    x = relu6(_keras_conv(net, "input", "conv1", 8, 3, 2), "conv1_relu")
    blocks = ((16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1),
              (128, 1), (128, 1), (128, 1), (256, 2), (256, 1))
    for index, (channels, stride) in enumerate(blocks, start=1):
        c = net.channels(x)
        x = relu6(_keras_conv(net, x, f"conv_dw_{index}", c, 3, stride, groups=c),
                  f"conv_dw_{index}_relu")
        x = relu6(_keras_conv(net, x, f"conv_pw_{index}", channels, 1), f"conv_pw_{index}_relu")
    return _keras_head(net, x, "global_average_pooling", 2)


def ad_autoencoder(seed: int = 0):
    """MLPerf Tiny anomaly detection: the 640 -> 128 x4 -> 8 -> 128 x4 -> 640 autoencoder."""
    net = _Net("ad_autoencoder", seed, {"input": (1, 640)})
    x = "input"
    for index, features in enumerate((128, 128, 128, 128, 8, 128, 128, 128, 128), start=1):
        y = net.batchnorm(net.dense_keras(x, f"dense_{index}", features),
                          f"batch_normalization_{index}")
        x = net.node("Relu", [y], f"activation_{index}")
    return net.model([net.dense_keras(x, "dense_10", 640)])


def torch_export(seed: int = 0):
    """A small audio classifier as `torch.onnx.export` writes it (1 x 32 x 20 features in)."""
    net = _Net("torch_export", seed, {"input": (1, 1, 32, 20)})
    rng = net.rng
    x = net.node("Squeeze", ["input", net.constant_node("/Constant", np.array([1], np.int64))],
                 "/Squeeze")
    mean = net.const("mean", rng.normal(0, 0.5, 20).astype(np.float32))
    std = net.const("std", rng.uniform(0.5, 2.0, 20).astype(np.float32))
    x = net.node("Div", [net.node("Sub", [x, mean], "/Sub"), std], "/Div")
    x = net.node("Unsqueeze", [x, net.constant_node("/Constant_1", np.array([1], np.int64))],
                 "/Unsqueeze")
    x = net.node("Relu", [net.conv(x, "/features/features.0/Conv", 16, 3)],
                 "/features/features.1/Relu")
    x = net.node("MaxPool", [x], "/features/features.2/MaxPool", kernel_shape=[2, 2],
                 strides=[2, 2])
    x = net.node("Relu", [net.conv(x, "/features/features.3/Conv", 32, 3)],
                 "/features/features.4/Relu")
    x = net.node("MaxPool", [x], "/features/features.5/MaxPool", kernel_shape=[2, 2],
                 strides=[2, 2])
    x = net.node("Mul", [x, net.constant_node("/Constant_2", np.array(0.5, np.float32))],
                 "/Mul")
    # x.view(x.size(0), -1)
    shape = net.node("Shape", [x], "/Shape")
    size = net.node("Gather", [shape, net.constant_node("/Constant_3", np.array(0, np.int64))],
                    "/Gather", axis=0)
    size = net.node("Unsqueeze", [size, net.constant_node("/Constant_4",
                                                          np.array([0], np.int64))],
                    "/Unsqueeze_1")
    target = net.node("Concat", [size, net.constant_node("/Constant_5",
                                                         np.array([-1], np.int64))],
                      "/Concat", axis=0)
    x = net.node("Reshape", [x, target], "/Reshape")
    x = net.node("Relu", [net.gemm(x, "/classifier/classifier.0/Gemm", 64)],
                 "/classifier/classifier.1/Relu")
    return net.model([net.gemm(x, "/classifier/classifier.2/Gemm", 10)])


MODELS: dict[str, Callable[[int], object]] = {
    "squeezenet": squeezenet,
    "mobilenetv3": mobilenetv3,
    "unet": unet,
    "yolo": yolo,
    "shufflenetv2": shufflenetv2,
    "dcgan": dcgan,
    "dqn": dqn,
    "kws_dscnn": kws_dscnn,
    "ic_resnet8": ic_resnet8,
    "vww_mobilenet": vww_mobilenet,
    "ad_autoencoder": ad_autoencoder,
    "torch_export": torch_export,
}

CLASSIFIERS = frozenset({"squeezenet", "mobilenetv3", "shufflenetv2", "dqn", "kws_dscnn",
                         "ic_resnet8", "vww_mobilenet", "torch_export"})


def random_inputs(model, count: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``count`` seeded float32 samples of each of the model's inputs, batch first.

    Spatial inputs (rank 4, at least 8 x 8) are blocky patterns plus noise, as
    `vdla.bench.onnx_builder.random_images`, so that samples differ after a
    global pool; others are standard normal.
    """
    from vdla.bench.onnx_builder import random_images
    rng = np.random.default_rng(seed)
    feeds = {}
    initializers = {init.name for init in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim][1:]
        if len(shape) == 3 and min(shape[1:]) >= 8:
            images = random_images(count * -(-shape[0] // 3), int(rng.integers(1 << 31)),
                                   max(shape[1:]))
            feeds[value.name] = np.ascontiguousarray(
                images.reshape(count, -1, *images.shape[2:])[:, :shape[0], :shape[1], :shape[2]])
        else:
            feeds[value.name] = rng.standard_normal((count, *shape)).astype(np.float32)
    return feeds


def macs(model) -> int:
    """Multiply-accumulates of one sample through the Conv, ConvTranspose, Gemm and MatMul
    nodes (onnx shape inference at batch 1)."""
    import onnx
    model = onnx.shape_inference.infer_shapes(_at_batch_one(model))
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in (*model.graph.input, *model.graph.value_info, *model.graph.output)}
    shapes.update({init.name: list(init.dims) for init in model.graph.initializer})
    total = 0
    for node in model.graph.node:
        if node.op_type == "Conv":
            weight, out = shapes[node.input[1]], shapes[node.output[0]]
            total += int(np.prod(out[1:])) * int(np.prod(weight[1:]))
        elif node.op_type == "ConvTranspose":
            weight, x = shapes[node.input[1]], shapes[node.input[0]]
            total += int(np.prod(x[1:])) * int(np.prod(weight[1:]))
        elif node.op_type in ("Gemm", "MatMul"):
            weight, out = shapes[node.input[1]], shapes[node.output[0]]
            total += int(np.prod(out[1:])) * int(np.prod(weight)) // int(out[-1])
    return total


def _at_batch_one(model):
    import onnx
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for value in (*copy.graph.input, *copy.graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_value = 1
    return copy


def write_all(folder: str | Path, seed: int = 0, names=None) -> list[Path]:
    """Write each model (all, or ``names``) to ``folder/<name>.onnx``; the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names or MODELS:
        path = folder / f"{name}.onnx"
        path.write_bytes(MODELS[name](seed).SerializeToString())
        paths.append(path)
    return paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", type=Path, required=True, help="folder to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="comma-separated model names")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else None
    unknown = [name for name in names or () if name not in MODELS]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r} (models: {', '.join(MODELS)})")
    import onnx
    for path in write_all(args.output, args.seed, names):
        print(f"{str(path):40s} {path.stat().st_size / 1e3:8.1f} kB  "
              f"{macs(onnx.load(path)) / 1e6:6.2f} M MACs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
