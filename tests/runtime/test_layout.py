"""Blocked DRAM layouts: the block-diagonal weight layout of small groups, and packed sizes."""

import numpy as np
import pytest

from vdla.hw.config import PRESETS
from vdla.runtime.layout import LayoutError, pack, packed_nbytes, packed_shape, unpack


def test_depthwise_weights_sit_on_the_block_diagonal():
    config = PRESETS["tiny"]                       # 4x4 blocks
    weight = np.random.default_rng(0).integers(-128, 128, size=(6, 1, 3, 2), dtype=np.int8)
    packed = pack("block_diagonal", weight, config)
    assert packed.shape == packed_shape("block_diagonal", weight.shape, config) \
        == (2, 1, 3, 2, 4, 4)
    for channel in range(8):
        block, lane = divmod(channel, 4)
        expected = np.zeros((3, 2, 4), np.int8)
        if channel < 6:
            expected[:, :, lane] = weight[channel, 0]
        # Output lane ``lane`` of the block reads input lane ``lane`` only.
        assert np.array_equal(packed[block, 0, :, :, lane, :], expected)
    assert np.array_equal(unpack("block_diagonal", packed.ravel(), weight.shape, config), weight)


def test_groups_of_two_fill_two_by_two_diagonal_blocks():
    config = PRESETS["odd"]                        # 4 outputs x 8 inputs: 2 inputs per output
    weight = np.arange(1, 6 * 2 + 1, dtype=np.int8).reshape(6, 2, 1, 1)    # 6 groups of 2 -> 1
    packed = pack("block_diagonal", weight, config)
    first = packed[0, 0, 0, 0]                     # outputs 0..3 x inputs 0..7
    expected = np.zeros((4, 8), np.int8)
    for output in range(4):
        expected[output, 2 * output:2 * output + 2] = weight[output, :, 0, 0]
    assert np.array_equal(first, expected)
    assert np.array_equal(unpack("block_diagonal", packed, weight.shape, config), weight)


def test_block_diagonal_layout_needs_groups_that_tile_the_block():
    weight = np.zeros((8, 3, 3, 3), np.int8)
    with pytest.raises(LayoutError, match=r"^w: the block_diagonal layout takes groups of C/G "
                                          r"input channels dividing the block's 4 and C/G x 4/4 "
                                          r"outputs, got weights \(8, 3, 3, 3\)$"):
        pack("block_diagonal", weight, PRESETS["tiny"], "w")


# tiny: batch 1, block_in 4, block_out 4. Each size is what the packed shape multiplies out to,
# at or past 2**64, where a product in numpy's int64 wraps (2**64 wraps to 0 bytes).
@pytest.mark.parametrize("layout, shape, nbytes", [
    ("activation", (2**16,) * 4, 2**16 * 2**14 * 2**16 * 2**16 * 1 * 4),
    ("weight", (2**16,) * 4, 2**14 * 2**14 * 2**16 * 2**16 * 4 * 4),
    ("output", (3, 2**30, 2**20, 2**20), 3 * 2**28 * 2**20 * 2**20 * 1 * 4),
    ("dense_data", (2**40, 2**40 + 1), 2**40 * (2**38 + 1) * 1 * 4),
    ("bias", (2**64,), 2**62 * 1 * 4 * 4),
])
def test_packed_sizes_are_exact_for_huge_shapes(layout, shape, nbytes):
    assert nbytes >= 2**64
    assert packed_nbytes(layout, shape, PRESETS["tiny"]) == nbytes
