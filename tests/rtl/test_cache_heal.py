"""The model cache verifies its entries and heals: damaged libraries are rebuilt,
killed builds' folders removed, and tool caches follow ``VDLA_CACHE_DIR``."""

from __future__ import annotations

import os
import re
import time

import pytest

from vdla.hw.cache import cache_root, tool_cache_environment
from vdla.sim.rtl import RtlModel
from vdla.sim.rtl.build import LIBRARY_NAME, STALE_BUILD_SECONDS, build_model, entry_problem

pytestmark = pytest.mark.rtl


def _truncate(library):
    library.write_bytes(library.read_bytes()[:4096])


def _garbage(library):   # same size, other bytes
    data = bytearray(library.read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = bytes(64)
    library.write_bytes(bytes(data))


def _delete(library):
    library.unlink()


@pytest.mark.parametrize("damage, problem", [
    (_truncate, r"libvdla_rtl.so has 4096 bytes, \d+ were built"),
    (_garbage, r"does not match the checksum recorded at build time"),
    (_delete, r"libvdla_rtl.so cannot be read \(No such file or directory\)"),
])
def test_a_damaged_entry_is_found_and_rebuilt(tmp_path, monkeypatch, tiny, standin_verilog_tiny,
                                              damage, problem):
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path))
    first = build_model(tiny, verilog=standin_verilog_tiny)
    assert entry_problem(first.directory) is None
    damage(first.library)
    assert re.search(problem, entry_problem(first.directory))
    told = []
    healed = build_model(tiny, verilog=standin_verilog_tiny, progress=told.append)
    assert not healed.cached and healed.directory == first.directory
    assert entry_problem(healed.directory) is None
    assert "is damaged" in told[0] and "rebuilding" in told[0]
    with RtlModel(healed) as model:   # loads, rather than SIGBUS or a loader error
        assert model.bus_bytes == tiny.dram_bus_bytes
    assert not list((tmp_path / "rtl").glob(".discard-*"))


def test_killed_builds_leave_nothing_behind_for_long(tmp_path, monkeypatch, tiny,
                                                      standin_verilog_tiny):
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path))
    build_model(tiny, verilog=standin_verilog_tiny)
    stale, fresh = tmp_path / "rtl" / ".build-old-x", tmp_path / "rtl" / ".build-new-y"
    for folder in (stale, fresh):
        (folder / "obj").mkdir(parents=True)
        (folder / LIBRARY_NAME).write_bytes(b"partial")
    old = time.time() - STALE_BUILD_SECONDS - 60
    os.utime(stale, (old, old))
    assert build_model(tiny, verilog=standin_verilog_tiny).cached
    assert not stale.exists()
    assert fresh.exists()   # may be another process's build in progress


def test_tool_caches_follow_vdla_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/else")
    with tool_cache_environment():
        assert os.environ["XDG_CACHE_HOME"] == str(tmp_path / "c" / "tools")
    assert os.environ["XDG_CACHE_HOME"] == "/somewhere/else"


def test_a_read_only_home_gets_a_writable_default(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o500)
    try:
        monkeypatch.delenv("VDLA_CACHE_DIR", raising=False)
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        monkeypatch.setenv("HOME", str(home))
        if os.access(home, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        root = cache_root()
        assert not str(root).startswith(str(home))
        with tool_cache_environment():
            assert os.environ["XDG_CACHE_HOME"] == str(root / "tools")
    finally:
        home.chmod(0o700)
