"""Compile generated CUDA C with nvcc, without a GPU, and read ptxas's resource report.

Running a kernel needs a GPU and NVRTC (`compiler.gpu.kernel`); compiling one
needs neither: nvcc (``$VDLA_NVCC``, else ``nvcc`` on PATH, else
``/usr/local/cuda/bin/nvcc``) turns the CUDA C into a cubin for a named
architecture (``sm_90a``, the H100, by default) and ``-Xptxas -v`` reports the
registers, shared memory, spills and barriers of the kernel. Reports are
entries of the one build cache (`vdla.cache.get_or_build`, kind ``gpu/nvcc``,
keyed by the source, the architecture and nvcc's version), verified before
every read.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from vdla.errors import VdlaError
from vdla import cache

__all__ = ["NvccError", "PtxasReport", "find_nvcc", "nvcc_version", "compile_cubin"]

DEFAULT_ARCH = "sm_90a"
_REPORT = "report.json"


class NvccError(VdlaError):
    """nvcc is missing or rejected a kernel."""


@dataclasses.dataclass(frozen=True)
class PtxasReport:
    """What ptxas says one compiled kernel uses."""

    arch: str
    registers: int
    shared_bytes: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    cubin_bytes: int


def find_nvcc() -> str | None:
    """The nvcc to use, or None when there is none."""
    for candidate in (os.environ.get("VDLA_NVCC"), shutil.which("nvcc"),
                      "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@functools.lru_cache(maxsize=None)
def nvcc_version() -> str:
    """nvcc's ``release ...`` line."""
    nvcc = _nvcc()
    output = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    lines = [line for line in output.splitlines() if "release" in line]
    return lines[0].strip() if lines else output.strip().splitlines()[-1]


def _nvcc() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        raise NvccError("no nvcc: set $VDLA_NVCC or put the CUDA toolkit's bin on PATH")
    return nvcc


def _parse(log: str, arch: str, cubin_bytes: int) -> PtxasReport:
    def number(pattern: str) -> int:
        found = re.search(pattern, log)
        return int(found.group(1)) if found else 0
    if not re.search(r"Used (\d+) registers", log):
        raise NvccError(f"ptxas printed no resource usage for the kernel:\n{log[-2000:]}")
    return PtxasReport(arch=arch, registers=number(r"Used (\d+) registers"),
                       shared_bytes=number(r"(\d+) bytes smem"),
                       spill_stores=number(r"(\d+) bytes spill stores"),
                       spill_loads=number(r"(\d+) bytes spill loads"),
                       stack_bytes=number(r"(\d+) bytes stack frame"), cubin_bytes=cubin_bytes)


def compile_cubin(source: str, arch: str = DEFAULT_ARCH) -> PtxasReport:
    """Compile ``source`` to a cubin for ``arch`` (cached) and return ptxas's report.

    Raises
    ------
    NvccError
        Without nvcc, or with nvcc's last lines of output when it fails.
    """
    command = [_nvcc(), "-cubin", f"-arch={arch}", "-Xptxas", "-v", "-o", "kernel.cubin",
               "kernel.cu"]

    def produce(work: Path) -> None:
        (work / "kernel.cu").write_text(source)
        log = cache.run_tool(command, work, "nvcc", NvccError)
        report = _parse(log, arch, (work / "kernel.cubin").stat().st_size)
        (work / _REPORT).write_text(json.dumps(dataclasses.asdict(report)) + "\n")
    entry = cache.get_or_build("gpu/nvcc", cache.key_of(source, arch, nvcc_version()), produce,
                               [_REPORT], what="ptxas report")
    return PtxasReport(**json.loads((entry.directory / _REPORT).read_text()))
