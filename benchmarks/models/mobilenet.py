"""A MobileNetV2-style network as a float ONNX model: seeded weights, data-set BatchNorms.

Usage::

    python benchmarks/models/mobilenet.py [-o mobilenet.onnx] [--small] [--seed 0] [--batch 1]

or, from Python, ``build_mobilenet(path, seed=0, batch=1, shape=MOBILENET_V2)``.
Generated, not committed. MobileNetV2's layout (Sandler et al. 2018,
torchvision's ``mobilenet_v2``): a 3x3/2 stem convolution; inverted-residual
blocks, each a 1x1 expansion (skipped where the expansion factor is 1), a 3x3
depthwise convolution of stride 1 or 2, and a linear 1x1 projection, with a
residual Add where the block keeps its stride 1 and its channels; a last 1x1
convolution; global average pool; a Gemm classifier. Every convolution is
followed by a BatchNormalization and all but the projections by ReLU6 (Clip
0..6). Input ``input`` (batch x 3 x size x size float32), output ``fc``
(batch x classes logits); node names follow torchvision's modules
(``features.3.conv.1``).

Two shapes: `MOBILENET_V2` (224 px, width 1.0, 17 blocks, 1000 classes:
torchvision's 3.50 M parameters) for the benchmark, and `SMALL` (32 px,
width 0.25, seven blocks with stride-2 and residual ones, 10 classes) for the
tests. Weights are He-normal; each BatchNormalization's mean and variance are
those of the activations reaching it on seeded images
(`bench.onnx_builder.GraphBuilder.batchnorm`), as in `resnet18.py`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from vdla.bench.onnx_builder import GraphBuilder, random_images

__all__ = ["Shape", "MOBILENET_V2", "SMALL", "build_mobilenet", "random_images"]

STATISTICS_IMAGES = 4


@dataclasses.dataclass(frozen=True)
class Shape:
    """A MobileNetV2-style network's sizes.

    ``blocks`` is MobileNetV2's table: (expansion t, channels c, repeats n,
    first stride s) per stage, channels before the width multiplier.
    """

    size: int
    width: float
    blocks: tuple[tuple[int, int, int, int], ...]
    stem: int
    last: int
    classes: int


MOBILENET_V2 = Shape(224, 1.0, ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)),
                     stem=32, last=1280, classes=1000)
SMALL = Shape(32, 0.25, ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 2, 2), (6, 64, 2, 2)),
              stem=32, last=128, classes=10)


def _divisible(value: float, divisor: int = 8) -> int:
    """torchvision's ``_make_divisible``: the nearest multiple of 8, never 10 % below."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class _Network:
    """Adds a MobileNetV2's nodes to a measuring `GraphBuilder`, weights from one generator."""

    def __init__(self, shape: Shape, seed: int):
        self.shape = shape
        self.rng = np.random.default_rng(seed)
        self.graph = GraphBuilder("mobilenet", feed={"input": random_images(
            STATISTICS_IMAGES, seed + 1, shape.size)})

    def channels(self, x: str) -> int:
        return int(self.graph.values[x].shape[1])

    def conv_bn(self, x: str, prefix: str, channels: int, kernel: int = 1, stride: int = 1,
                groups: int = 1, relu6: bool = True) -> str:
        """Conv (no bias), BatchNormalization and, with ``relu6``, Clip(0, 6)."""
        fan_in = self.channels(x) // groups * kernel * kernel
        weight = self.rng.standard_normal((channels, self.channels(x) // groups, kernel, kernel))
        conv = self.graph.node("Conv", [x], f"{prefix}.0",
                               {"weight": (weight * np.sqrt(2 / fan_in)).astype(np.float32)},
                               kernel_shape=[kernel, kernel], strides=[stride, stride],
                               pads=[kernel // 2] * 4, group=groups)
        y = self.graph.batchnorm(conv, f"{prefix}.1", self.rng)
        if not relu6:
            return y
        return self.graph.node("Clip", [y], f"{prefix}.2", {
            "min": np.array(0, np.float32), "max": np.array(6, np.float32)})

    def inverted_residual(self, x: str, prefix: str, expansion: int, channels: int,
                          stride: int) -> str:
        hidden = self.channels(x) * expansion
        y, part = x, 0
        if expansion != 1:
            y, part = self.conv_bn(x, f"{prefix}.conv.0", hidden), 1
        y = self.conv_bn(y, f"{prefix}.conv.{part}", hidden, 3, stride, groups=hidden)
        y = self.conv_bn(y, f"{prefix}.conv.{part + 1}", channels, relu6=False)
        if stride == 1 and channels == self.channels(x):
            y = self.graph.node("Add", [x, y], f"{prefix}.add")
        return y

    def build(self, batch: int):
        shape, graph = self.shape, self.graph
        x = self.conv_bn("input", "features.0", _divisible(shape.stem * shape.width), 3, 2)
        index = 1
        for expansion, channels, repeats, stride in shape.blocks:
            for repeat in range(repeats):
                x = self.inverted_residual(x, f"features.{index}", expansion,
                                           _divisible(channels * shape.width),
                                           stride if repeat == 0 else 1)
                index += 1
        last = _divisible(shape.last * max(1.0, shape.width))
        x = self.conv_bn(x, f"features.{index}", last)
        x = graph.node("GlobalAveragePool", [x], "avgpool")
        x = graph.node("Flatten", [x], "flatten", axis=1)
        weight = self.rng.standard_normal((shape.classes, last)) * np.sqrt(2 / last)
        bias = self.rng.normal(0.0, 0.01, shape.classes)
        graph.node("Gemm", [x], "fc", {"weight": weight.astype(np.float32),
                                       "bias": bias.astype(np.float32)}, transB=1)
        return graph.model({"input": [batch, 3, shape.size, shape.size]},
                           {"fc": [batch, shape.classes]})


def build_mobilenet(path, seed: int = 0, batch: int = 1, shape: Shape = MOBILENET_V2):
    """Write a MobileNetV2-style network (batch x 3 x size x size in, logits out) to ``path``.

    Parameters
    ----------
    path : str or Path
        Where the ONNX file is written (its folder must exist).
    seed : int
        Seeds the weights and the images the BatchNorm statistics come from;
        the same seed writes the same bytes.
    batch : int
        The model's fixed batch dimension.
    shape : Shape
        `MOBILENET_V2` or `SMALL` (or any other).

    Returns
    -------
    onnx.ModelProto
        The model as written (checked by `onnx.checker`).
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    model = _Network(shape, seed).build(batch)
    Path(path).write_bytes(model.SerializeToString())
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("mobilenet.onnx"))
    parser.add_argument("--small", action="store_true",
                        help="the tests' 32 px, width 0.25 network")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    build_mobilenet(args.output, args.seed, args.batch, SMALL if args.small else MOBILENET_V2)
    print(f"wrote {args.output} ({args.output.stat().st_size / 1e6:.2f} MB) in "
          f"{time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
