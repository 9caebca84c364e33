"""Layers the gpu target's tests share: odd shapes, batch 8, dense, ResNet-18 C2–C11."""

import dataclasses

from vdla.compiler.ops import Conv2d, Dense
from vdla.compiler.workloads import RESNET18

from tests.compiler.cpu.test_kernel import SHAPES as CPU_SHAPES

# The cpu target's odd shapes (channels not multiples of a tile or of dp4a's 4, stride 2,
# 1x1,
# non-square kernels and strides, padding, shifts past 31, dense), batch 8 added.
ODD_SHAPES = CPU_SHAPES[:6] + [
    Conv2d(8, 6, 9, 5, 7, kernel=3, padding=1, bias=True, shift=6, relu=True),
    CPU_SHAPES[6],
    Dense(8, 300, 17, bias=True, shift=12, relu=True),
]

# ResNet-18's C2–C11 at batch 1 and 8, keyed "C2/b1".
RESNET_LAYERS = {f"{w.name}/b{batch}": dataclasses.replace(w.op, batch=batch)
                 for w in RESNET18 for batch in (1, 8)}


def describe(op) -> str:
    return op.describe()
