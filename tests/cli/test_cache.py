"""``vdla cache``: the cache's size by kind, pruning by age or to a size, its errors
(the pruning itself: tests/test_cache_prune.py)."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from vdla.cli.cache import Size, command as cache_command, human
from vdla import cache
from tests.cli.click_runner import invoke


@pytest.fixture(autouse=True)
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _entry(kind, key, size, days_ago):
    def build(work):
        (work / "payload.bin").write_bytes(b"x" * size)
    directory = cache.get_or_build(kind, key, build, ["payload.bin"]).directory
    os.utime(directory, (time.time() - days_ago * 86400,) * 2)
    return directory


def test_sizes_by_kind(root):
    _entry("rtl", "a", 3 << 20, 1)
    _entry("rtl", "b", 1 << 20, 1)
    (root / "crash").mkdir()
    (root / "crash" / "vdla-crash-20260101-000000-1.txt").write_text("x" * 100)
    result = invoke(cache_command, [])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert re.fullmatch(rf"cache {re.escape(str(root))}: 4\.0 MiB", lines[0])
    assert re.fullmatch(r"  rtl +4\.0 MiB +2 items +RTL models \(Verilator\)", lines[1])
    assert re.fullmatch(r"  crash +100 B +1 item +crash reports", lines[2])
    assert len(lines) == 3


def test_an_empty_cache(root):
    result = invoke(cache_command, [])
    assert result.exit_code == 0
    assert result.stdout == f"cache {root}: empty\n"


def test_older_than_and_dry_run(root):
    old = _entry("cpu", "old", 2 << 20, 10)
    new = _entry("cpu", "new", 1 << 20, 1)
    dry = invoke(cache_command, ["--older-than", "7", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert re.search(rf"\n +2\.0 MiB  {re.escape(str(old))}\nwould remove 1 item, 2\.0 MiB \(cpu 1\): "
                     r"the cache would hold 1\.0 MiB\n$", dry.stdout), dry.stdout
    assert old.exists()
    done = invoke(cache_command, ["--older-than", "7"])
    assert done.stdout.splitlines()[-1] == "removed 1 item, 2.0 MiB (cpu 1): the cache holds 1.0 MiB"
    assert not old.exists() and new.exists()


def test_max_size_and_json(root):
    old = _entry("verilog", "old", 3 << 20, 3)
    new = _entry("verilog", "new", 3 << 20, 2)
    result = invoke(cache_command, ["--max-size", "4M", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["root"] == str(root) and report["kinds"]["verilog"]["items"] == 2
    assert [item["path"] for item in report["pruned"]["removed"]] == [str(old)]
    assert report["pruned"]["bytes_after"] == report["bytes"] - report["pruned"]["freed_bytes"] < 4 << 20
    assert not old.exists() and new.exists()


@pytest.mark.parametrize("text, size", [("500M", 500 << 20), ("2G", 2 << 30), ("1.5GiB", 3 << 29),
                                        ("4096", 4096), ("10kb", 10240), ("0", 0)])
def test_sizes_are_powers_of_1024(text, size):
    assert Size().convert(text, None, None) == size


def test_human_sizes():
    assert [human(n) for n in (0, 1023, 1024, 5 << 30)] == ["0 B", "1023 B", "1.0 KiB", "5.0 GiB"]


@pytest.mark.parametrize("args, message", [
    (["--max-size", "5X"], "--max-size: expected a size such as 500M or 2G (K, M, G, T: powers of "
                           "1024), got '5X'"),
    (["--older-than", "-1"], "--older-than: must be 0 or more days, got -1"),
    (["--older-than", "soon"], "--older-than: expected a number, got 'soon'"),
    (["--dry-run"], "--dry-run: give --older-than or --max-size, whose pruning it shows"),
])
def test_bad_options_are_one_line(args, message):
    result = invoke(cache_command, args)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {message}\n"
