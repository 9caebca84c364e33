"""Random convolutions over every parameter `compiler.ops.Conv2d` takes, for the sweeps.

`random_conv` draws groups (depthwise included), dilation 1–3, asymmetric
padding 0–5 (padding at or past the kernel included), rectangular kernels and
strides and batch 1–3 on small images; with ``config`` it draws only layers
the accelerator takes (`compiler.ops.accelerator_limits`): groups of whole
GEMM blocks or depthwise, padding the loads can add, windows its buffers hold.
"""

from vdla.compiler.errors import ScheduleError, ShapeError
from vdla.compiler.ops import Conv2d, accelerator_limits
from vdla.compiler.schedule import default_schedule


def random_conv(rng, config=None, max_channels: int = 24) -> Conv2d:
    """One random `Conv2d` (for ``config``'s accelerator, if given)."""
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
            if config.block_in == config.block_out and rng.random() < 0.2:
                per_in = per_out = 1                    # depthwise: blocks on the diagonal
                groups = int(rng.integers(2, 2 * max_channels))
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
