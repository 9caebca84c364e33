"""Layers the gpu target's tests share: odd shapes, batch 8, dense, ResNet-18 C2–C11."""

import dataclasses

from vdla.compiler.ops import Conv2d, Dense
from vdla.compiler.workloads import RESNET18

# Channels that are not multiples of any tile or of dp4a's 4, stride 2, 1x1,
# non-square kernels and strides, padding, shifts past 31, dense, batch 8.
ODD_SHAPES = [
    Conv2d(2, 5, 7, 9, 8, kernel=(3, 1), stride=2, bias=True, shift=3, relu=True),
    Conv2d(1, 35, 21, 13, 11, kernel=3, padding=1),
    Conv2d(2, 13, 11, 10, 9, kernel=(3, 2), stride=(1, 2), padding=(1, 1), bias=True, shift=5),
    Conv2d(1, 20, 12, 9, 9, kernel=3, stride=2, padding=1, bias=True, shift=7),
    Conv2d(1, 4, 10, 4, 4, kernel=1, bias=True, shift=40, relu=True),
    Conv2d(1, 64, 40, 6, 6, kernel=1, stride=2, bias=True, shift=9),
    Conv2d(8, 6, 9, 5, 7, kernel=3, padding=1, bias=True, shift=6, relu=True),
    Dense(3, 37, 21, bias=True, shift=5),
    Dense(8, 300, 17, bias=True, shift=12, relu=True),
]

# ResNet-18's C2–C11 at batch 1 and 8, keyed "C2/b1".
RESNET_LAYERS = {f"{w.name}/b{batch}": dataclasses.replace(w.op, batch=batch)
                 for w in RESNET18 for batch in (1, 8)}


def describe(op) -> str:
    return op.describe()
