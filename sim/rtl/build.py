"""Build the accelerator's Verilog into a native model: a cached shared library.

``build_model(config)`` generates the Verilog with `hw.generate.verilog`, runs
Verilator on it together with ``harness.cpp`` (the DRAM model of the config's
memory system, `hw.config.MemorySystem`, and the C ABI) and links one shared
library that `sim.rtl.backend` loads through ctypes.

Caching. A model is an entry of the one build cache (`vdla.cache.get_or_build`,
kind ``rtl``) whose key digests the config hash, the Verilog text, the
harness source, the memory system's parameters, the trace flag, the
Verilator version and the build flags.
The cache records the library's and the Verilog's size and SHA-256 and
checks them before every load, so a truncated, zeroed or replaced library is
rebuilt, never loaded; it builds under a per-key lock in a private folder
renamed into place. The Verilog of a config is a cache entry too
(`hw.generate.cached_verilog`), keyed by the config and a digest of the
``hw`` package sources, so a cache hit does not pay for Amaranth's conversion.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import shutil
import time
from importlib import resources
from pathlib import Path
from typing import Callable

from vdla.errors import VdlaError
from vdla import cache
from vdla.cache import cpu_fingerprint
from vdla.hw.config import HwConfig
from vdla.hw.counters import ACTIVITY_STATES, RTL_ACTIVITY, RTL_STATUS, rtl_counters
from vdla.sim.rtl.toolchain import check_toolchain, make_flags, verilator_bin, verilator_env, \
    verilator_version

__all__ = ["RtlBuildError", "ModelBuild", "build_model", "cache_dir", "RunStatus"]


class RunStatus(enum.IntEnum):
    """What the harness's run call returns; its C++ ``enum Status`` is generated
    from this into ``vdla_config.h`` (``DONE`` -> ``kDone``)."""

    DONE = 0
    TIMEOUT = 1
    MEMORY_ERROR = 2
    NOT_STARTED = 3

    @property
    def cpp_name(self) -> str:
        return "k" + "".join(word.capitalize() for word in self.name.split("_"))

LIBRARY_NAME = "libvdla_rtl.so"
VERILOG_NAME = "accelerator.v"
MANIFEST_NAME = cache.MANIFEST_NAME
# Bump when the build recipe below changes in a way the key does not see.
RECIPE_VERSION = 1
# Verilator flags; the makefile's OPT_FAST comes from `toolchain.make_flags`.
VERILATOR_FLAGS = ("--cc", "--exe", "--build", "-O3", "-Wno-fatal", "--prefix", "Vtop",
                   "--x-assign", "fast", "--x-initial", "fast")
CXX_FLAGS = ("-fPIC", "-std=c++17")
LD_FLAGS = ("-shared", "-Wl,-Bsymbolic")
# The model's hot code: -O2, and -march=native on top of it, make it several
# times faster than verilated.mk's -Os (benchmarks/README.md, "Simulator and
# compiler speed"). -march=native ties a library to the CPU it was built on, so the cache
# key then includes a CPU fingerprint. $VDLA_RTL_OPT_FAST overrides the default.
DEFAULT_OPT_FAST = os.environ.get("VDLA_RTL_OPT_FAST", "-O2 -march=native")
PORTABLE_OPT_FAST = "-O2"


class RtlBuildError(VdlaError):
    """Verilator or the C++ compiler failed to build the model."""


@dataclasses.dataclass(frozen=True)
class ModelBuild:
    """A built model in the cache.

    Attributes
    ----------
    directory : Path
        The cache entry (library, Verilog, manifest, config header).
    library, verilog : Path
    key : str
        The cache key.
    trace : bool
        Whether the model can write FST waveforms.
    cached : bool
        True when this call found the build in the cache.
    seconds : float
        Time this call took (generation + build, or the lookup).
    manifest : dict
        What the build recorded (key, config, toolchain, flags, timing).
    """

    directory: Path
    key: str
    trace: bool
    cached: bool
    seconds: float
    manifest: dict

    @property
    def library(self) -> Path:
        """The shared library to load with ctypes."""
        return self.directory / LIBRARY_NAME

    @property
    def verilog(self) -> Path:
        """The Verilog the model was built from."""
        return self.directory / VERILOG_NAME


def cache_dir() -> Path:
    """Root of the RTL build cache (``$VDLA_CACHE_DIR/rtl`` or ``~/.cache/vdla/rtl``)."""
    root = cache.cache_root() / "rtl"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _harness_source() -> str:
    return resources.files("vdla.sim.rtl").joinpath("harness.cpp").read_text()


def _package_file(name: str) -> str:
    return resources.files("vdla.sim.rtl").joinpath(name).read_text()


def _system_lz4() -> Path | None:
    """The machine's liblz4 runtime, if any (Verilator's FST writer compresses with it)."""
    import ctypes.util
    name = ctypes.util.find_library("lz4")
    if not name:
        return None
    for directory in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                      "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/local/lib"):
        candidate = Path(directory) / name
        if candidate.exists():
            return candidate
    return None


def _prepare_lz4(work: Path) -> list[str]:
    """Make ``-llz4`` and ``<lz4.h>`` resolve for an FST build; returns extra sources.

    The wheel's FST writer includes <lz4.h> and links ``-llz4``, but most
    machines carry only the runtime ``liblz4.so.1``. With it, a local
    ``liblz4.so`` symlink suffices; without it, ``lz4_literals.cpp`` provides
    the two functions (stored blocks) and an empty ``liblz4.a`` satisfies the
    linker.
    """
    (work / "lz4.h").write_text(_package_file("lz4.h"))
    system = _system_lz4()
    if system is not None:
        (work / "liblz4.so").symlink_to(system)
        return []
    (work / "lz4_literals.cpp").write_text(_package_file("lz4_literals.cpp"))
    (work / "liblz4.a").write_bytes(b"!<arch>\n")
    return ["lz4_literals.cpp"]


def _config_header(config: HwConfig, trace: bool, key: str) -> str:
    from vdla.hw.layouts import REQUEST_LAYOUT, write_beat_layout  # Amaranth: cold builds only
    request = {name: REQUEST_LAYOUT[name] for name in ("addr", "beats")}
    strobes = write_beat_layout(config)["strb"]
    counters = " ".join(f"X({name})" for name in rtl_counters(config))
    status = " ".join(f"X({name})" for name in RTL_STATUS)
    activity = " ".join(f"X({name})" for name in RTL_ACTIVITY)
    run_status = ", ".join(f"{status.cpp_name} = {status.value}" for status in RunStatus)
    return "\n".join([
        "// Generated by sim/rtl/build.py for one model build; do not edit.",
        "#pragma once",
        f"#define VDLA_BUS_BITS {config.dram_bus_bits}",
        f"#define VDLA_READ_LATENCY {config.dram_read_latency}",
        *(f"#define VDLA_MEMORY_{name.upper()} {value}u"
          for name, value in dataclasses.asdict(config.memory_system).items()),
        *(f"#define VDLA_REQUEST_{name.upper()}_{part} {value}"
          for name, field in request.items()
          for part, value in (("LSB", field.offset), ("BITS", field.width))),
        f"#define VDLA_WRITE_STRB_LSB {strobes.offset}",
        f"#define VDLA_WRITE_BITS {write_beat_layout(config).size}",
        f"#define VDLA_TRACE {int(trace)}",
        f'#define VDLA_BUILD_ID "{key}"',
        f"#define VDLA_COUNTERS(X) {counters}",
        f"#define VDLA_STATUS(X) {status}",
        f"#define VDLA_ACTIVITY(X) {activity}",
        f"#define VDLA_NUM_ACTIVITY_STATES {len(ACTIVITY_STATES)}",
        f"enum Status : int {{ {run_status} }};",
        "",
    ])


def _cache_key(config: HwConfig, verilog: str, harness: str, trace: bool,
               opt_fast: str = DEFAULT_OPT_FAST) -> str:
    lz4 = f"lz4 {_system_lz4() or _package_file('lz4_literals.cpp')}" if trace else ""
    cpu = f"cpu {cpu_fingerprint()}" if "native" in opt_fast else ""
    digest = cache.key_of(
        f"recipe {RECIPE_VERSION}", config.hash, verilog, harness, f"trace {trace}", lz4, cpu,
        f"memory {dataclasses.asdict(config.memory_system)}",   # the header's VDLA_MEMORY_*
        f"verilator {verilator_version()}", " ".join(VERILATOR_FLAGS + CXX_FLAGS + LD_FLAGS),
        make_flags(opt_fast), " ".join(rtl_counters(config)), " ".join(RTL_STATUS),
        " ".join(RTL_ACTIVITY), " ".join(ACTIVITY_STATES),
        " ".join(f"{status.name}={status.value}" for status in RunStatus), length=16)
    return f"{config.hash}-{digest}{'-fst' if trace else ''}"


def build_model(config: HwConfig, trace: bool = False, *, verilog: str | None = None,
                jobs: int | None = None, progress: Callable[[str], None] | None = None,
                force: bool = False, opt_fast: str = DEFAULT_OPT_FAST) -> ModelBuild:
    """Build (or find in the cache) the native model of ``config``.

    Parameters
    ----------
    config : HwConfig
    trace : bool
        Build the ``--trace-fst`` variant, able to write waveforms (slower).
    verilog : str, optional
        Verilog of the top to build instead of ``hw.generate.verilog(config)``
        (tests use a stand-in top with the same ports).
    jobs : int, optional
        Parallel compile jobs (default: CPU count).
    progress : callable, optional
        Called with a line of text before a cold build starts.
    force : bool
        Rebuild even when the cache has the model.
    opt_fast : str
        C++ optimisation flags of the model's hot code (``OPT_FAST``); e.g.
        the default ``"-O2 -march=native"`` ties the library to this CPU
        (`PORTABLE_OPT_FAST` does not).

    Returns
    -------
    ModelBuild

    Raises
    ------
    RtlBuildError
        When Verilator or the compiler fails; the message's first line
        names their first error, the tail of their output follows.
    """
    began = time.monotonic()
    if verilog is None:
        from vdla.hw.generate import cached_verilog  # Amaranth loads only when a build needs it
        verilog = cached_verilog(config)
    harness = _harness_source()
    key = _cache_key(config, verilog, harness, trace, opt_fast)

    def build(work: Path) -> dict:
        check_toolchain()
        if progress:
            progress(f"building the RTL model of config {config.name!r} ({key}) with Verilator")
        (work / VERILOG_NAME).write_text(verilog)
        (work / "harness.cpp").write_text(harness)
        (work / "vdla_config.h").write_text(_config_header(config, trace, key))
        extra_sources = _prepare_lz4(work) if trace else []
        command = [str(verilator_bin()), *VERILATOR_FLAGS, "-j", str(jobs or os.cpu_count() or 2),
                   "-Mdir", "obj", "-o", f"../{LIBRARY_NAME}",
                   *[arg for flag in CXX_FLAGS + ("-I..",) for arg in ("-CFLAGS", flag)],
                   *[arg for flag in LD_FLAGS for arg in ("-LDFLAGS", flag)],
                   *(["--trace-fst", "-LDFLAGS", "-L.."] if trace else []),
                   VERILOG_NAME, "harness.cpp", *extra_sources]
        cache.run_tool(command, work, f"building the RTL model of config {config.name!r}",
                       RtlBuildError, env=verilator_env(opt_fast=opt_fast), tail_lines=40)
        shutil.rmtree(work / "obj")  # objects are large and not needed to run
        return {
            "key": key, "config": config.to_dict(), "config_hash": config.hash, "trace": trace,
            "verilator": verilator_version(), "library": LIBRARY_NAME, "verilog": VERILOG_NAME,
            "opt_fast": opt_fast, "portable": "native" not in opt_fast,
            "counters": list(rtl_counters(config)), "status": list(RTL_STATUS),
            "activity": list(RTL_ACTIVITY),
            "build_seconds": round(time.monotonic() - began, 2),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "command": command,
        }

    entry = cache.get_or_build("rtl", key, build, (LIBRARY_NAME, VERILOG_NAME),
                               what="RTL model", announce=progress, force=force)
    return ModelBuild(entry.directory, key, trace, entry.cached, time.monotonic() - began,
                      entry.info)
