"""Named workloads: the ResNet-18 convolutions that VTA's evaluation offloads, and
MobileNetV2's depthwise layers; random convolutions for sweeps.

C1 (the 7x7 stem on 3 channels) stays on the CPU in VTA's study; C2–C11 are the
3x3 and 1x1 convolutions of the four residual stages. ``uses`` is how often
ResNet-18 runs each shape, so a network total is ``sum(cycles * uses)``.
`random_conv2d` draws layers over every parameter `Conv2d` takes, for the
tests' and `benchmarks/conv_sweep.py`'s sweeps.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vdla.compiler.errors import ScheduleError, ShapeError
from vdla.compiler.ops import Conv2d, accelerator_limits
from vdla.compiler.accel.search import default_schedule

__all__ = ["Workload", "RESNET18", "resnet18_layer", "MOBILENET_V2_DEPTHWISE", "random_conv2d"]


@dataclasses.dataclass(frozen=True)
class Workload:
    """One layer of a benchmark network and how many times the network runs it."""

    name: str
    op: Conv2d
    uses: int


def _conv(channels_in, channels_out, size, kernel, stride):
    # bias + shift + relu: the epilogue every ResNet conv (with folded batch norm) has.
    return Conv2d(batch=1, in_channels=channels_in, out_channels=channels_out,
                  height=size, width=size, kernel=kernel, stride=stride,
                  padding=kernel // 2, bias=True, shift=10, relu=True)


RESNET18: tuple[Workload, ...] = (
    Workload("C2", _conv(64, 64, 56, 3, 1), 4),
    Workload("C3", _conv(64, 128, 56, 3, 2), 1),
    Workload("C4", _conv(64, 128, 56, 1, 2), 1),
    Workload("C5", _conv(128, 128, 28, 3, 1), 3),
    Workload("C6", _conv(128, 256, 28, 3, 2), 1),
    Workload("C7", _conv(128, 256, 28, 1, 2), 1),
    Workload("C8", _conv(256, 256, 14, 3, 1), 3),
    Workload("C9", _conv(256, 512, 14, 3, 2), 1),
    Workload("C10", _conv(256, 512, 14, 1, 2), 1),
    Workload("C11", _conv(512, 512, 7, 3, 1), 3),
)


def resnet18_layer(name: str) -> Workload:
    """The ResNet-18 workload called ``name`` (``"C2"`` … ``"C11"``)."""
    for workload in RESNET18:
        if workload.name == name.upper():
            return workload
    raise ValueError(f"unknown ResNet-18 layer {name!r} "
                     f"(known: {', '.join(w.name for w in RESNET18)})")


def _depthwise(channels, size, stride):
    return Conv2d(batch=1, in_channels=channels, out_channels=channels, height=size, width=size,
                  kernel=3, stride=stride, padding=1, groups=channels, bias=True, shift=6,
                  relu=True)


# MobileNetV2's depthwise 3x3 layers at a 224 px input (channels, input size,
# stride), each with how often the network runs it.
MOBILENET_V2_DEPTHWISE: tuple[Workload, ...] = tuple(
    Workload(f"DW{channels}/{size}/s{stride}", _depthwise(channels, size, stride), uses)
    for channels, size, stride, uses in (
        (32, 112, 1, 1), (96, 112, 2, 1), (144, 56, 1, 1), (144, 56, 2, 1), (192, 28, 1, 2),
        (192, 28, 2, 1), (384, 14, 1, 3), (576, 14, 1, 2), (576, 14, 2, 1), (960, 7, 1, 2)))


def random_conv2d(rng: np.random.Generator, config=None, max_channels: int = 24) -> Conv2d:
    """A random `Conv2d` for sweeps over every parameter it takes.

    Groups (depthwise and channel multipliers included), dilation 1–3,
    asymmetric padding 0–5 (padding at or past the kernel included),
    rectangular kernels 1–4 and strides 1–3, batch 1–3 on 3–13 px images,
    random epilogues. With ``config`` (a `HwConfig`) only layers the
    accelerator takes with no zero weights (groups of whole GEMM blocks or
    tiling a block's diagonal; `ops.accelerator_limits`) and whose
    windows its buffers hold (`accel.search.default_schedule` finds a schedule).
    """
    while True:
        groups = int(rng.choice([1, 1, 2, 3, 4]))
        if config is None:
            per_in, per_out = (int(rng.integers(1, max_channels // groups + 1))
                               for _ in range(2))
            if rng.random() < 0.25:        # depthwise, or a channel multiplier
                per_in, per_out, groups = 1, int(rng.choice([1, 1, 2])), int(rng.integers(2, 17))
        else:
            per_in = config.block_in * int(rng.integers(1, 3)) if groups > 1 \
                else int(rng.integers(1, max_channels + 1))
            per_out = config.block_out * int(rng.integers(1, 3)) if groups > 1 \
                else int(rng.integers(1, max_channels + 1))
            if rng.random() < 0.3:      # groups tiling a block's diagonal (depthwise, ...)
                per_in = int(rng.choice([d for d in range(1, config.block_in + 1)
                                         if config.block_in % d == 0
                                         and d * config.block_out % config.block_in == 0]))
                per_out = per_in * config.block_out // config.block_in
                groups = int(rng.integers(2, 2 * max_channels // per_in + 2))
        kernel = tuple(int(k) for k in rng.integers(1, 5, size=2))
        dilation = tuple(int(d) for d in rng.integers(1, 4, size=2))
        padding = tuple(int(p) for p in rng.integers(0, 6, size=4))
        height, width = (int(s) for s in rng.integers(3, 14, size=2))
        try:
            op = Conv2d(int(rng.integers(1, 4)), per_in * groups, per_out * groups, height, width,
                        kernel=kernel, stride=tuple(int(s) for s in rng.integers(1, 4, size=2)),
                        padding=padding, dilation=dilation, groups=groups,
                        bias=bool(rng.random() < 0.7), shift=int(rng.integers(0, 12)),
                        relu=bool(rng.random() < 0.5))
            if config is not None:
                accelerator_limits(op.geometry(), config)
                default_schedule(op, config)
            return op
        except (ShapeError, ScheduleError):
            # No output, padding the accelerator refuses or a dilated window
            # larger than its buffers: draw again.
            continue
