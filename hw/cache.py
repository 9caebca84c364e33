"""Where vdla keeps what it builds (Verilog, Verilator models, cocotb benches).

One root for every cache, so that one variable moves or clears them all:
``$VDLA_CACHE_DIR``, else ``~/.cache/vdla``, else (a read-only home) a folder
of this user's in the system's temporary directory. The tools vdla runs keep
their own caches (the WebAssembly Yosys behind Amaranth compiles into
wasmtime's cache under ``$XDG_CACHE_HOME``); `tool_cache_environment` moves
those under the same root whenever ``$VDLA_CACHE_DIR`` is set or the home
cache cannot be written. This module imports nothing heavy: the simulators
ask for the path without loading Amaranth.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import tempfile
from pathlib import Path

__all__ = ["cache_root", "tool_cache_environment", "cpu_fingerprint", "publish"]


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def _home_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def cache_root() -> Path:
    """``$VDLA_CACHE_DIR``, or ``~/.cache/vdla`` when writable, or a temporary-folder default."""
    base = os.environ.get("VDLA_CACHE_DIR")
    if base:
        return Path(base)
    home = _home_cache() / "vdla"
    if _writable(home):
        return home
    return Path(tempfile.gettempdir()) / f"vdla-cache-{os.getuid()}"


@contextlib.contextmanager
def tool_cache_environment():
    """Within this block, tools started as subprocesses cache under `cache_root`.

    Sets ``XDG_CACHE_HOME`` (wasmtime's, hence Amaranth's Yosys's, cache
    location) to ``cache_root()/tools`` when ``$VDLA_CACHE_DIR`` is set or
    the usual cache folder cannot be written; otherwise changes nothing.
    """
    if not os.environ.get("VDLA_CACHE_DIR") and _writable(_home_cache()):
        yield
        return
    tools = cache_root() / "tools"
    tools.mkdir(parents=True, exist_ok=True)
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tools)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = previous


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
