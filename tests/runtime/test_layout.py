"""Blocked DRAM layouts: the depthwise weight layout's diagonal blocks."""

import numpy as np
import pytest

from vdla.hw.config import PRESETS
from vdla.runtime.layout import LayoutError, pack, packed_shape, unpack


def test_depthwise_weights_sit_on_the_block_diagonal():
    config = PRESETS["tiny"]                       # 4x4 blocks
    weight = np.random.default_rng(0).integers(-128, 128, size=(6, 1, 3, 2), dtype=np.int8)
    packed = pack("depthwise", weight, config)
    assert packed.shape == packed_shape("depthwise", weight.shape, config) == (2, 1, 3, 2, 4, 4)
    for channel in range(8):
        block, lane = divmod(channel, 4)
        expected = np.zeros((3, 2, 4), np.int8)
        if channel < 6:
            expected[:, :, lane] = weight[channel, 0]
        # Output lane ``lane`` of the block reads input lane ``lane`` only.
        assert np.array_equal(packed[block, 0, :, :, lane, :], expected)
    assert np.array_equal(unpack("depthwise", packed.ravel(), weight.shape, config), weight)


def test_depthwise_layout_needs_a_square_block():
    weight = np.zeros((8, 1, 3, 3), np.int8)
    with pytest.raises(LayoutError, match=r"^w: the depthwise layout takes \(C, 1, KH, KW\) "
                                          r"weights on a square GEMM block, got \(8, 1, 3, 3\) "
                                          r"on 4x8$"):
        pack("depthwise", weight, PRESETS["odd"], "w")
