"""Where vdla keeps what it builds (Verilog, Verilator models, cocotb benches).

One root for every cache, so that one variable moves or clears them all. This
module imports nothing heavy: the simulators ask for the path without loading
Amaranth.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """``$VDLA_CACHE_DIR``, or ``~/.cache/vdla``."""
    base = os.environ.get("VDLA_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "vdla"
