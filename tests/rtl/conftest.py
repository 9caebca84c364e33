"""Session-wide RTL builds, so the suite pays for each Verilator build once.

Builds go to the normal cache (``$VDLA_CACHE_DIR`` or ``~/.cache/vdla/rtl``),
so a second test run starts from cached models; the cache test itself uses a
private directory.
"""

from __future__ import annotations

import pytest

from vdla.hw.config import PRESETS
from vdla.sim.rtl.build import build_model


@pytest.fixture(scope="session")
def tiny():
    return PRESETS["tiny"]


@pytest.fixture(scope="session")
def standin_verilog_tiny(tiny):
    from tests.rtl.standin import standin_verilog
    return standin_verilog(tiny)


@pytest.fixture(scope="session")
def standin_build(tiny, standin_verilog_tiny):
    return build_model(tiny, verilog=standin_verilog_tiny)


@pytest.fixture(scope="session")
def chip_build(tiny):
    """The real accelerator at ``tiny``."""
    return build_model(tiny)


@pytest.fixture(scope="session")
def chip_trace_build(tiny):
    return build_model(tiny, trace=True)
