"""Where vdla keeps what it builds (Verilog, Verilator models, cocotb benches).

One root for every cache, so that one variable moves or clears them all. This
module imports nothing heavy: the simulators ask for the path without loading
Amaranth.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
from pathlib import Path

__all__ = ["cache_root", "cpu_fingerprint", "publish"]


def cache_root() -> Path:
    """``$VDLA_CACHE_DIR``, or ``~/.cache/vdla``."""
    base = os.environ.get("VDLA_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "vdla"


def cpu_fingerprint() -> str:
    """Digest of this CPU's model and feature flags (for ``-march=native`` builds)."""
    text = platform.machine() + platform.processor()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        text += "".join(sorted({line for line in lines
                                if line.startswith(("model name", "flags", "Features",
                                                    "CPU part"))}))
    except OSError:
        pass
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def publish(work: Path, final: Path, marker: str) -> None:
    """Move a finished build directory ``work`` to its cache entry ``final``.

    A rename is atomic, so readers see a whole entry or none. When another
    process published the same key first (its ``marker`` file exists), its
    copy is identical and ``work`` is discarded.
    """
    try:
        os.rename(work, final)
    except OSError:
        if not (final / marker).exists():
            raise
        shutil.rmtree(work, ignore_errors=True)
