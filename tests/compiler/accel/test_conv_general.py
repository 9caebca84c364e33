"""Every convolution `Conv2d` takes, on the accelerator: groups of whole GEMM blocks,
dilation, asymmetric padding, rectangular kernels and strides.

Random layers (`compiler.workloads.random_conv2d`) compiled with their default
schedules run on fsim (which also checks tokens, races and the acc bank rule)
for every preset shape and on the Verilator RTL for a sample, bit-exact with
numpy. `benchmarks/conv_sweep.py` runs the same sweep at any size.
"""

import numpy as np
import pytest

from vdla.compiler import Conv2d, compile_op
from vdla.compiler.accel.schedule import Schedule
from vdla.compiler.accel.search import default_schedule
from vdla.compiler.accel.space import schedule_space
from vdla.compiler.workloads import random_conv2d
from vdla.hw.config import PRESETS
from vdla.runtime.runner import AccelRunner

from tests.compiler.accel.test_end_to_end import BATCH2, run_and_check

CONFIGS = {name: PRESETS[name] for name in ("tiny", "default", "odd")} | {"batch2": BATCH2}


@pytest.mark.parametrize("name", CONFIGS)
def test_random_convolutions_on_fsim(name):
    config, rng = CONFIGS[name], np.random.default_rng(sorted(CONFIGS).index(name))
    for seed in range(16):
        run_and_check(random_conv2d(rng, config), config, seed=seed)


def test_groups_are_one_gemm_per_group():
    """A grouped layer does a group's work per output block, not the whole layer's."""
    op = Conv2d(1, 64, 64, 8, 8, kernel=3, padding=1, groups=4, bias=True, shift=6)
    config = PRESETS["tiny"]
    grouped, result, _ = run_and_check(op, config)
    dense_op = Conv2d(1, 64, 64, 8, 8, kernel=3, padding=1, bias=True, shift=6)
    dense = compile_op(dense_op, config)
    # GEMM micro-ops count block MACs: a quarter of the dense layer's.
    inputs = dense_op.random_inputs(np.random.default_rng(0))
    dense_uops = AccelRunner(config).run(dense, inputs).counters["gemm_uops"]
    assert result.counters["gemm_uops"] * 4 == dense_uops
    assert result.counters["gemm_uops"] == op.macs // (config.block_in * config.block_out
                                                       * config.batch)


@pytest.mark.parametrize("name, groups", [("tiny", 40), ("default", 40), ("default", 10),
                                          ("odd", 20)])
def test_small_groups_share_a_gemm_block(name, groups):
    """Groups smaller than a block tile its diagonal (depthwise: a channel each): a
    micro-op per (pixel, block of channels, tap), a ``(C/G) / block_in`` share of its
    MACs useful."""
    config = PRESETS[name]
    outputs = 40 * config.block_out // config.block_in
    op = Conv2d(2, 40, outputs, 9, 7, kernel=3, stride=(2, 1), padding=(1, 0, 2, 1),
                groups=groups, bias=True, shift=6, relu=True)
    _, result, _ = run_and_check(op, config)
    blocks, images = -(-op.in_channels // config.block_in), -(-op.batch // config.batch)
    assert result.counters["gemm_uops"] == images * op.out_height * op.out_width * blocks * 9


@pytest.mark.parametrize("schedule", [
    Schedule(tile_h=3, tile_w=4, tile_k=3, tile_c=1, virtual_threads=2, loop_order="kbhw"),
    Schedule(tile_h=1, tile_w=4, tile_k=2, tile_c=2, virtual_threads=3, resident_weights=True),
], ids=["ragged-k", "resident-weights"])
def test_grouped_tiles_stay_in_their_group(schedule):
    # 3 blocks per group on tiny: tile_k 3 and 2 are cut to divide a group (3, 1).
    op = Conv2d(2, 24, 36, 9, 10, kernel=(3, 2), stride=(1, 2), padding=(2, 0, 1, 1),
                dilation=(2, 1), groups=3, bias=True, shift=7, relu=True)
    run_and_check(op, PRESETS["tiny"], schedule)


@pytest.mark.rtl
@pytest.mark.parametrize("name", ["tiny", "odd"])
def test_random_convolutions_on_rtl(name):
    config, rng = PRESETS[name], np.random.default_rng(23 + len(name))
    device = AccelRunner(config, sim="rtl")
    for seed in range(3):
        op = random_conv2d(rng, config, max_channels=12)
        program = compile_op(op, config)
        inputs = op.random_inputs(np.random.default_rng(seed))
        got = device.run(program, inputs).outputs["out"]
        assert np.array_equal(got, op.reference(**inputs)), op.describe()


def test_grouped_space_offers_tiles_inside_a_group():
    op = Conv2d(1, 96, 96, 8, 8, kernel=3, padding=1, groups=2)     # 3 blocks a group at 16
    space = schedule_space(op, PRESETS["default"])
    assert space.options("tile_k") == (3, 1)
    assert default_schedule(op, PRESETS["default"]).tile_k in (3, 1)
