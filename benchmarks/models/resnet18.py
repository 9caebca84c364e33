"""ResNet-18 at ImageNet shape as a float ONNX model: seeded weights, data-set BatchNorms.

Usage::

    python benchmarks/models/resnet18.py [-o resnet18.onnx] [--seed 0] [--batch 1]

or, from Python, ``build_resnet18(path, seed=0, batch=1)``. The model is
generated, not committed (about 47 MB): torchvision's ResNet-18 layout
(conv1 7x7/2, max pool 3x3/2, four stages of two basic blocks with 1x1/2
projection shortcuts, global average pool, fc 512->1000), input ``input``
(batch x 3 x 224 x 224 float32), output ``fc`` (batch x 1000 logits). Node names
follow torchvision's modules (``layer2.0.downsample.conv``).

Weights are He-normal (std ``sqrt(2 / fan_in)``); each BatchNormalization's
mean and variance are those of the activations that reach it when the network
runs on ``random_images(4, seed + 1)`` (`bench.onnx_builder`; so every
normalised activation has unit variance per channel, whatever depth), its
scale and shift are seeded near 1 and 0.
Untrained, the network still computes what a trained one does, at the same
magnitudes, which is what quantisation and the accelerator care about.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from vdla.bench.onnx_builder import GraphBuilder, random_images

__all__ = ["build_resnet18", "random_images", "STATISTICS_IMAGES"]

EPSILON = 1e-5
SIZE = 224
CLASSES = 1000
STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # (channels, first block's stride)
STATISTICS_IMAGES = 4


class _Network:
    """Adds ResNet-18's nodes to a measuring `GraphBuilder`, weights from one generator."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.graph = GraphBuilder("resnet18",
                                  feed={"input": random_images(STATISTICS_IMAGES, seed + 1)})

    def channels(self, x: str) -> int:
        return int(self.graph.values[x].shape[1])

    def conv_bn(self, x: str, prefix: str, channels: int, kernel: int, stride: int,
                suffix: str = "") -> str:
        fan_in = self.channels(x) * kernel * kernel
        weight = self.rng.standard_normal((channels, self.channels(x), kernel, kernel))
        weight = (weight * np.sqrt(2 / fan_in)).astype(np.float32)
        pad = kernel // 2
        conv = self.graph.node("Conv", [x], f"{prefix}conv{suffix}", {"weight": weight},
                               kernel_shape=[kernel, kernel], strides=[stride, stride],
                               pads=[pad] * 4)
        return self.graph.batchnorm(conv, f"{prefix}bn{suffix}", self.rng, EPSILON)

    def basic_block(self, x: str, prefix: str, channels: int, stride: int) -> str:
        shortcut = x
        if stride != 1 or channels != self.channels(x):
            shortcut = self.conv_bn(x, f"{prefix}downsample.", channels, 1, stride)
        y = self.conv_bn(x, prefix, channels, 3, stride, "1")
        y = self.graph.node("Relu", [y], f"{prefix}relu1")
        y = self.conv_bn(y, prefix, channels, 3, 1, "2")
        y = self.graph.node("Add", [y, shortcut], f"{prefix}add")
        return self.graph.node("Relu", [y], f"{prefix}relu2")

    def build(self, batch: int):
        graph = self.graph
        x = graph.node("Relu", [self.conv_bn("input", "", 64, 7, 2, "1")], "relu")
        x = graph.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2],
                       pads=[1, 1, 1, 1])
        for stage, (channels, stride) in enumerate(STAGES, start=1):
            for block in range(2):
                x = self.basic_block(x, f"layer{stage}.{block}.", channels,
                                     stride if block == 0 else 1)
        x = graph.node("GlobalAveragePool", [x], "avgpool")
        x = graph.node("Flatten", [x], "flatten", axis=1)
        features = self.channels(x)
        weight = self.rng.standard_normal((CLASSES, features)) * np.sqrt(2 / features)
        bias = self.rng.normal(0.0, 0.01, CLASSES)
        graph.node("Gemm", [x], "fc", {"weight": weight.astype(np.float32),
                                       "bias": bias.astype(np.float32)}, transB=1)
        return graph.model({"input": [batch, 3, SIZE, SIZE]}, {"fc": [batch, CLASSES]})


def build_resnet18(path, seed: int = 0, batch: int = 1):
    """Write ResNet-18 (batch x 3 x 224 x 224 in, batch x 1000 logits out) to ``path``.

    Parameters
    ----------
    path : str or Path
        Where the ONNX file is written (its folder must exist).
    seed : int
        Seeds the weights and the images the BatchNorm statistics come from;
        the same seed writes the same bytes.
    batch : int
        The model's fixed batch dimension.

    Returns
    -------
    onnx.ModelProto
        The model as written (checked by `onnx.checker`).
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    model = _Network(seed).build(batch)
    Path(path).write_bytes(model.SerializeToString())
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("resnet18.onnx"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    build_resnet18(args.output, args.seed, args.batch)
    print(f"wrote {args.output} ({args.output.stat().st_size / 1e6:.1f} MB) in "
          f"{time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
