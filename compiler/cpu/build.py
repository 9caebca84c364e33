"""Compile generated C with the system compiler into a cached shared library.

A library is an entry of the one build cache (`vdla.cache.get_or_build`, kind
``cpu``) whose key digests the C source, the compiler's version and the flags;
flags with ``-march=native`` tie a library to this CPU, so the key then
includes `vdla.cache.cpu_fingerprint` as the RTL model's does. The cache checks
the library's recorded size and SHA-256 every time `build_library` hands it
out, so a replaced, truncated or zeroed ``kernel.so`` is rebuilt before
ctypes could load it; builds run under a per-key lock and are published
atomically.

Flags. ``$VDLA_CPU_CFLAGS`` overrides the default ``-O3 -march=native``.
When the compiler rejects ``-march=native`` the next
portable set is tried (`FLAG_SETS`); the C chooses its dot product from the
macros the flags define, so every set computes the same result.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
from pathlib import Path

from vdla.errors import VdlaError
from vdla import cache
from vdla.cache import cpu_fingerprint

__all__ = ["CpuBuildError", "build_library", "cpu_features", "compiler_flags", "compiler_version",
           "cpu_model", "cache_dir", "FLAG_SETS"]

LIBRARY_NAME = "kernel.so"
COMMON_FLAGS = ("-shared", "-fPIC", "-std=gnu11", "-pthread")
# Tried in order; the first the compiler accepts is used.
FLAG_SETS = (("-O3", "-march=native"), ("-O3",))


class CpuBuildError(VdlaError):
    """The C compiler is missing or failed to build a kernel."""


def cache_dir() -> Path:
    """Root of the CPU kernel cache (``<cache root>/cpu``)."""
    root = cache.cache_root() / "cpu"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _compiler() -> str:
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        raise CpuBuildError(f"no C compiler: {compiler!r} is not on PATH (set $CC)")
    return compiler


def _accepts(flags: tuple[str, ...]) -> bool:
    probe = subprocess.run([_compiler(), *flags, "-x", "c", "-E", "-dM", "-"], input="",
                           capture_output=True, text=True)
    return probe.returncode == 0


@functools.lru_cache(maxsize=None)
def compiler_flags() -> tuple[str, ...]:
    """The optimisation flags kernels are built with (see the module docstring)."""
    override = os.environ.get("VDLA_CPU_CFLAGS")
    if override is not None:
        return tuple(override.split())
    for flags in FLAG_SETS:
        if _accepts(flags):
            return flags
    raise CpuBuildError(f"the C compiler {_compiler()!r} accepts none of the flag sets "
                        f"{[' '.join(f) for f in FLAG_SETS]}")


@functools.lru_cache(maxsize=None)
def cpu_features() -> dict[str, bool]:
    """Vector features the kernels' flags enable (from the compiler's predefined macros).

    Returns
    -------
    dict
        ``avx512`` (AVX-512 F/BW/VL: 32 registers of 16 lanes), ``vnni``
        (AVX512-VNNI ``vpdpbusd``), ``avx_vnni``, ``avx2``.
    """
    flags = compiler_flags()
    probe = subprocess.run([_compiler(), *flags, "-x", "c", "-E", "-dM", "-"], input="",
                           capture_output=True, text=True)
    macros = set(line.split()[1] for line in probe.stdout.splitlines() if line.startswith("#define"))
    return {
        "avx512": {"__AVX512F__", "__AVX512BW__", "__AVX512VL__"} <= macros,
        "vnni": "__AVX512VNNI__" in macros,
        "avx_vnni": "__AVXVNNI__" in macros,
        "avx2": "__AVX2__" in macros,
    }


@functools.lru_cache(maxsize=None)
def compiler_version() -> str:
    """The first line of the C compiler's ``--version``."""
    result = subprocess.run([_compiler(), "--version"], capture_output=True, text=True)
    return result.stdout.splitlines()[0] if result.stdout else "unknown"


def cpu_model() -> str:
    """This CPU's model name (``/proc/cpuinfo``), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cache_key(source: str, flags: tuple[str, ...]) -> str:
    native = any("native" in flag for flag in flags)
    return cache.key_of(source, _compiler(), compiler_version(), " ".join(COMMON_FLAGS + flags),
                        cpu_fingerprint() if native else "portable")


def build_library(source: str, flags: tuple[str, ...] | None = None) -> Path:
    """Build (or find in the cache) the shared library of ``source``.

    Parameters
    ----------
    source : str
        A C translation unit.
    flags : tuple of str, optional
        Optimisation flags; `compiler_flags` by default.

    Returns
    -------
    pathlib.Path
        The library, just verified against its recorded size and SHA-256:
        load it now with `ctypes.CDLL` (and call again before another load).

    Raises
    ------
    CpuBuildError
        With the compiler's first error and last lines of output when it fails.
    """
    flags = compiler_flags() if flags is None else tuple(flags)
    command = [_compiler(), *COMMON_FLAGS, *flags, "kernel.c", "-o", LIBRARY_NAME]

    def build(work: Path) -> dict:
        (work / "kernel.c").write_text(source)
        cache.run_tool(command, work, "compiling a CPU kernel", CpuBuildError)
        return {"command": command, "compiler": compiler_version()}
    entry = cache.get_or_build("cpu", _cache_key(source, flags), build, [LIBRARY_NAME],
                               what="CPU kernel")
    return entry.directory / LIBRARY_NAME
