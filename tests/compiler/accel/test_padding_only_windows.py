"""Windows that see only padding: any pad the LOADs' 4-bit pad fields hold compiles.

A tile whose input window lies wholly in the padding loads zeros without reading
DRAM (`compiler.accel.passes.dma`); its outputs are the epilogue of a zero sum.
Each layer runs on fsim, bit-exact with `Conv2d.reference` (numpy, checked against
ONNX in `tests/compiler/test_ops.py`) and with the cpu target.
"""

import numpy as np
import pytest

from vdla.compiler import Conv2d, compile_op
from vdla.compiler.accel.passes.dma import lower_copy
from vdla.compiler.accel.schedule import Schedule
from vdla.compiler.accel import ir
from vdla.compiler.cpu.program import compile_cpu
from vdla.compiler.cpu.runner import CpuRunner
from vdla.compiler.errors import ShapeError
from vdla.compiler.ops import MAX_PAD
from vdla.hw.config import PRESETS
from vdla.runtime.runner import AccelRunner


def _check(op, config, schedule=None, seed=0, cpu=True):
    inputs = op.random_inputs(np.random.default_rng(seed))
    expected = op.reference(**inputs)
    got = AccelRunner(config).run(compile_op(op, config, schedule), inputs).outputs["out"]
    np.testing.assert_array_equal(got, expected, err_msg=op.describe())
    if cpu:
        host = CpuRunner().run(compile_cpu(op), inputs).outputs["out"]
        np.testing.assert_array_equal(host, expected, err_msg=op.describe())
    return expected


def test_issue_36_example_kernel_1x3_stride_3_pad_1():
    # Rows: a 1-row kernel with a pad of 1 reads only padding for the first output row.
    op = Conv2d(1, 16, 16, 8, 9, kernel=(1, 3), stride=3, padding=1, bias=True, shift=5)
    expected = _check(op, PRESETS["default"])
    # The all-padding rows are the bias alone: the test sees them.
    assert (expected[:, :, 0] != 0).any() and (expected[:, :, 1:] != expected[:, :, :1]).any()


@pytest.mark.parametrize("schedule", [None, Schedule(tile_h=1, tile_w=1, virtual_threads=2),
                                      Schedule(tile_h=2, tile_w=3, resident_weights=True)],
                         ids=["default", "single-outputs", "resident"])
def test_padding_up_to_the_pad_field(schedule):
    op = Conv2d(2, 20, 12, 3, 4, kernel=(2, 1), stride=(2, 3), padding=(MAX_PAD, 4, 6, MAX_PAD),
                bias=True, shift=6, relu=True)
    _check(op, PRESETS["tiny"], schedule, cpu=schedule is None)


def test_random_pads_past_the_kernel():
    rng = np.random.default_rng(36)
    config = PRESETS["tiny"]
    for seed in range(6):
        kernel = tuple(int(k) for k in rng.integers(1, 4, size=2))
        dilation = tuple(int(d) for d in rng.integers(1, 3, size=2))
        padding = tuple(int(p) for p in rng.integers(0, MAX_PAD + 1, size=4))
        op = Conv2d(int(rng.integers(1, 3)), int(rng.integers(1, 20)), int(rng.integers(1, 20)),
                    int(rng.integers(1, 6)), int(rng.integers(1, 6)), kernel=kernel,
                    stride=tuple(int(s) for s in rng.integers(1, 4, size=2)), padding=padding,
                    dilation=dilation, bias=True, shift=int(rng.integers(4, 9)))
        _check(op, config, seed=seed, cpu=seed < 2)


def test_a_padding_only_load_reads_no_dram():
    buffer = ir.Buffer("inp_tile", "inp", 64)
    # Rows -3..-1 of a 4x5 tensor: nothing but padding on the row axis.
    (insn,) = lower_copy(ir.Copy("load", "data", (1, 1, 4, 5), (0, 0, -3, -1), (1, 1, 3, 7),
                                 "inp", buffer))
    load = insn.instruction
    assert (load.y_size, load.y_pad_top, load.y_pad_bottom) == (0, 3, 0)
    assert (load.x_size, load.x_pad_left, load.x_pad_right) == (5, 1, 1)


def test_padding_past_the_field_is_refused_in_one_line():
    op = Conv2d(1, 4, 4, 4, 4, kernel=1, padding=(0, 0, MAX_PAD + 1, 0))
    with pytest.raises(ShapeError, match=r"^padding 16 \(bottom\) exceeds the ISA's 4-bit load "
                                         r"pad fields \(at most 15\); use --target cpu$"):
        compile_op(op, PRESETS["tiny"])
