"""Named workloads: the ResNet-18 convolutions that VTA's evaluation offloads.

C1 (the 7x7 stem on 3 channels) stays on the CPU in VTA's study; C2–C11 are the
3x3 and 1x1 convolutions of the four residual stages. ``uses`` is how often
ResNet-18 runs each shape, so a network total is ``sum(cycles * uses)``.
"""

from __future__ import annotations

import dataclasses

from vdla.compiler.ops import Conv2d

__all__ = ["Workload", "RESNET18", "resnet18_layer"]


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
