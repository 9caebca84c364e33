"""`graph.layout`: blocked activations and their logical arrays."""

from __future__ import annotations

import numpy as np
import pytest

from vdla.graph.layout import block, unblock
from vdla.hw.config import PRESETS


@pytest.mark.parametrize("shape", [(4, 128), (4, 16, 1, 1), (2, 16, 8, 8)])
def test_unblocked_arrays_own_their_memory(shape):
    """An arena slot is reused once its tensor is dead: the logical array of a blocked
    value must not be a view of it (a dense layer's (N, C) output, one batch row per block,
    unpacks to the same bytes)."""
    config = PRESETS["default"]
    x = np.random.default_rng(0).integers(-128, 128, shape).astype(np.int8)
    value = block(x, config)
    logical = unblock(value, config)
    np.testing.assert_array_equal(logical, x)
    value.packed[...] = 0   # the slot overwritten by a later layer
    np.testing.assert_array_equal(logical, x)
