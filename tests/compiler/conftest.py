"""Shared fixtures for the compiler tests."""

import numpy as np
import pytest

from vdla.hw.config import PRESETS


@pytest.fixture(params=["default", "tiny"])
def config(request):
    return PRESETS[request.param]


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
