"""The one build cache (`vdla.cache`): entries are verified before every use, damaged ones are
rebuilt and never loaded, builds are atomic and happen once per key across processes."""

from __future__ import annotations

import ctypes
import dataclasses
import fcntl
import hashlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.foreign_library import foreign_library
from vdla import cache
from vdla.cache import CacheError, entry_problem, get_or_build, lookup, tool_failure

KIND, KEY = "test/kind", "k1"
ANSWER_SOURCE = "int answer(void) { return 42; }\n"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _write_payload(work: Path) -> dict:
    (work / "payload.bin").write_bytes(bytes(range(256)) * 16)
    return {"made_by": os.getpid()}


# ------------------------------------------------------------------ damage, of every kind
def _replace(path: Path, foreign: Path) -> None:
    path.write_bytes(foreign.read_bytes())


def _truncate(path: Path, foreign: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def _zero(path: Path, foreign: Path) -> None:   # same size, all zeros
    path.write_bytes(bytes(path.stat().st_size))


def _drop_manifest(path: Path, foreign: Path) -> None:
    (path.parent / cache.MANIFEST_NAME).unlink()


def _drop_file(path: Path, foreign: Path) -> None:
    path.unlink()


def _manifest_of_another_key(path: Path, foreign: Path) -> None:
    manifest = json.loads((path.parent / cache.MANIFEST_NAME).read_text())
    manifest["key"] = "another"
    (path.parent / cache.MANIFEST_NAME).write_text(json.dumps(manifest))


def _manifest_not_json(path: Path, foreign: Path) -> None:
    (path.parent / cache.MANIFEST_NAME).write_text("{ not json")


def _manifest_too_large(path: Path, foreign: Path) -> None:   # never read whole
    manifest = json.loads((path.parent / cache.MANIFEST_NAME).read_text())
    manifest["info"] = {"padding": "x" * cache.MANIFEST_LIMIT}
    (path.parent / cache.MANIFEST_NAME).write_text(json.dumps(manifest))


DAMAGE = [
    (_replace, r"does not match the checksum recorded at build time|has \d+ bytes, \d+ were built"),
    (_truncate, r"has 100 bytes, \d+ were built"),
    (_zero, r"does not match the checksum recorded at build time"),
    (_drop_manifest, r"its manifest is missing, unreadable or records no checksums"),
    (_drop_file, r"cannot be read \(No such file or directory\)"),
    (_manifest_of_another_key, r"its manifest belongs to another entry"),
    (_manifest_not_json, r"its manifest is missing, unreadable or records no checksums"),
    (_manifest_too_large, r"its manifest is missing, unreadable or records no checksums"),
]
DAMAGE_IDS = [damage.__name__.strip("_") for damage, _ in DAMAGE]


def test_an_entry_is_built_once_then_verified_and_reused(private_cache):
    built = []

    def build(work):
        built.append(work)
        return _write_payload(work)
    first = get_or_build(KIND, KEY, build, ["payload.bin"])
    again = get_or_build(KIND, KEY, build, ["payload.bin"])
    assert len(built) == 1 and not first.cached and again.cached
    assert first.directory == again.directory == private_cache / KIND / KEY
    assert again.info == {"made_by": os.getpid()}
    manifest = json.loads((first.directory / cache.MANIFEST_NAME).read_text())
    payload = (first.directory / "payload.bin").read_bytes()
    assert manifest["files"] == {"payload.bin": {"bytes": len(payload),
                                                 "sha256": hashlib.sha256(payload).hexdigest()}}
    assert lookup(KIND, KEY).directory == first.directory and lookup(KIND, "other") is None
    # Nothing but the entry and its lock file: no build folder stays behind.
    assert sorted(p.name for p in (private_cache / KIND).iterdir()) == [f".{KEY}.lock", KEY]
    forced = get_or_build(KIND, KEY, build, ["payload.bin"], force=True)
    assert len(built) == 2 and not forced.cached


@pytest.mark.parametrize("damage, problem", DAMAGE, ids=DAMAGE_IDS)
def test_a_damaged_entry_is_announced_and_rebuilt(tmp_path, damage, problem):
    entry = get_or_build(KIND, KEY, _write_payload, ["payload.bin"])
    original = (entry.directory / "payload.bin").read_bytes()
    (tmp_path / "other").write_bytes(b"another artefact")
    damage(entry.directory / "payload.bin", tmp_path / "other")
    assert re.search(problem, entry_problem(entry.directory))
    told = []
    healed = get_or_build(KIND, KEY, _write_payload, ["payload.bin"], what="test artefact",
                          announce=told.append)
    assert not healed.cached and entry_problem(healed.directory) is None
    assert (healed.directory / "payload.bin").read_bytes() == original
    assert len(told) == 1 and re.fullmatch(
        rf"the cached test artefact {re.escape(str(entry.directory))} is damaged "
        rf"\((payload\.bin )?({problem})\); rebuilding it", told[0])
    assert not list((tmp_path / "cache" / KIND).glob(".discard-*"))


def test_lookup_removes_a_damaged_entry_and_says_so(capsys):
    entry = get_or_build(KIND, KEY, _write_payload, ["payload.bin"])
    _truncate(entry.directory / "payload.bin", None)
    assert lookup(KIND, KEY, what="record") is None
    assert not entry.directory.exists()
    assert capsys.readouterr().err == (f"vdla: the cached record {entry.directory} is damaged "
                                       f"(payload.bin has 100 bytes, 4096 were built); "
                                       f"removing it\n")


def test_a_failed_build_leaves_nothing_and_a_missing_file_is_an_error(private_cache):
    def failing(work):
        (work / "payload.bin").write_bytes(b"half")
        raise RuntimeError("the tool failed")
    with pytest.raises(RuntimeError, match="the tool failed"):
        get_or_build(KIND, KEY, failing, ["payload.bin"])
    with pytest.raises(CacheError, match=f"building the test/kind {KEY} wrote no payload.bin"):
        get_or_build(KIND, KEY, lambda work: None, ["payload.bin"])
    with pytest.raises(TypeError, match=f"building the test/kind {KEY} returned list, not a "
                                        f"dict or None"):
        get_or_build(KIND, KEY, lambda work: [_write_payload(work)], ["payload.bin"])
    assert [p.name for p in (private_cache / KIND).iterdir()] == [f".{KEY}.lock"]


@pytest.mark.parametrize("kind, key, message", [
    ("../up", "k", r"cache kind '../up': expected letters, digits"),
    ("/abs", "k", r"cache kind '/abs'"),
    ("ok", "a/b", r"cache key 'a/b': expected letters, digits, '_', '-' and '.' \(not first\)$"),
    ("ok", ".hidden", r"cache key '.hidden'"),
    ("ok", "", r"cache key ''"),
])
def test_kinds_and_keys_stay_inside_the_cache(kind, key, message):
    with pytest.raises(ValueError, match=message):
        get_or_build(kind, key, _write_payload, ["payload.bin"])


def test_a_manifest_cannot_name_files_outside_its_entry(tmp_path):
    entry = get_or_build(KIND, KEY, _write_payload, ["payload.bin"])
    manifest = json.loads((entry.directory / cache.MANIFEST_NAME).read_text())
    manifest["files"] = {"../../outside": manifest["files"]["payload.bin"]}
    (entry.directory / cache.MANIFEST_NAME).write_text(json.dumps(manifest))
    assert entry_problem(entry.directory) == ("its manifest is missing, unreadable or records "
                                              "no checksums")


# ------------------------------------------------------------------ processes
def _race(cache_dir: str, log: str, results: str, index: int) -> None:
    os.environ["VDLA_CACHE_DIR"] = cache_dir

    def build(work):
        with open(log, "a") as stream:
            stream.write(f"{os.getpid()}\n")
        time.sleep(0.5)   # long enough for every racer to arrive while it builds
        return _write_payload(work)
    entry = get_or_build(KIND, KEY, build, ["payload.bin"])
    Path(results, f"{index}.json").write_text(json.dumps([str(entry.directory), entry.cached]))


def test_processes_racing_for_one_key_build_it_once(tmp_path, private_cache):
    context = multiprocessing.get_context("fork")
    (tmp_path / "results").mkdir()
    racers = [context.Process(target=_race, args=(str(private_cache), str(tmp_path / "log"),
                                                  str(tmp_path / "results"), index))
              for index in range(4)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(60)
        assert racer.exitcode == 0
    assert len((tmp_path / "log").read_text().splitlines()) == 1
    results = [json.loads(path.read_text()) for path in (tmp_path / "results").iterdir()]
    assert len(results) == 4 and {directory for directory, _ in results} == \
        {str(private_cache / KIND / KEY)}
    assert sorted(cached for _, cached in results) == [False, True, True, True]


def _slow_build(cache_dir: str, started, finish) -> None:
    os.environ["VDLA_CACHE_DIR"] = cache_dir

    def build(work):
        (work / "payload.bin").write_bytes(b"first half")
        started.set()
        finish.wait(60)
        return _write_payload(work)
    get_or_build(KIND, KEY, build, ["payload.bin"])


def test_a_half_written_entry_is_never_visible_and_a_second_builder_waits(private_cache):
    context = multiprocessing.get_context("fork")
    started, finish = context.Event(), context.Event()
    builder = context.Process(target=_slow_build, args=(str(private_cache), started, finish))
    builder.start()
    try:
        assert started.wait(30)
        assert not (private_cache / KIND / KEY).exists() and lookup(KIND, KEY) is None
        second = []
        waiter = threading.Thread(target=lambda: second.append(get_or_build(
            KIND, KEY, lambda work: pytest.fail("built twice"), ["payload.bin"])))
        waiter.start()
        time.sleep(0.3)
        assert waiter.is_alive() and not second   # waiting for the lock, not building
    finally:
        finish.set()
        builder.join(30)
    waiter.join(30)
    assert builder.exitcode == 0 and second[0].cached
    assert (second[0].directory / "payload.bin").read_bytes() == bytes(range(256)) * 16


def test_a_killed_builder_leaves_the_key_free_and_its_folder_is_swept(private_cache):
    context = multiprocessing.get_context("fork")
    started, never = context.Event(), context.Event()
    builder = context.Process(target=_slow_build, args=(str(private_cache), started, never))
    builder.start()
    assert started.wait(30)
    os.kill(builder.pid, signal.SIGKILL)
    builder.join(30)
    root = private_cache / KIND
    assert len(list(root.glob(f".build-{KEY}.*"))) == 1   # what the killed build left
    # A leftover of another key whose builder is alive (holds its lock) is kept.
    busy = root / ".build-busy.x1"
    busy.mkdir()
    with open(root / ".busy.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entry = get_or_build(KIND, KEY, _write_payload, ["payload.bin"])
        assert not entry.cached and busy.exists()
    assert not list(root.glob(f".build-{KEY}.*"))
    get_or_build(KIND, "k2", _write_payload, ["payload.bin"])   # the next build sweeps it
    assert not busy.exists()


# ------------------------------------------------------------------ failure messages
def test_a_tool_failure_names_the_tools_first_error_on_its_first_line():
    output = "compiling x.c\nx.c:3:1: error: expected ';'\n  3 | }\n1 error generated\n"
    message = tool_failure("compiling a CPU kernel", 1, output, command=["cc", "x.c"])
    assert message.splitlines() == [
        "compiling a CPU kernel failed (exit 1): x.c:3:1: error: expected ';'",
        "$ cc x.c", "last lines of the output:", "compiling x.c",
        "x.c:3:1: error: expected ';'", "  3 | }", "1 error generated"]
    assert tool_failure("verilator", 2, "\n  \n") == "verilator failed (exit 2) and printed nothing"
    assert tool_failure("make", 2, "a\nlast words\n").splitlines()[0] == \
        "make failed (exit 2): last words"


# ------------------------------------------------------------------ the cpu kernel cache
@pytest.mark.parametrize("damage, problem", DAMAGE[:5], ids=DAMAGE_IDS[:5])
def test_a_damaged_cpu_kernel_is_rebuilt_and_foreign_code_never_runs(tmp_path, capsys, damage,
                                                                     problem):
    from vdla.compiler.cpu.build import build_library
    foreign, marker = foreign_library(tmp_path)
    library = build_library(ANSWER_SOURCE)
    damage(library, foreign)
    assert build_library(ANSWER_SOURCE) == library
    told = capsys.readouterr().err
    assert told.startswith(f"vdla: the cached CPU kernel {library.parent} is damaged (")
    assert re.search(problem, told) and told.endswith("; rebuilding it\n")
    # Loaded for the first time in this process only now: the rebuilt library.
    assert ctypes.CDLL(str(library)).answer() == 42
    assert not marker.exists()


def test_a_cpu_program_cannot_run_a_replaced_cached_library(tmp_path, private_cache):
    """End to end, each run in a fresh process: the library vdla built for a program is
    replaced by another; the next run rebuilds it, computes the right output and never
    runs the other library's code."""
    foreign, marker = foreign_library(tmp_path)
    script = tmp_path / "run.py"
    script.write_text("""
import numpy as np
from vdla.compiler.cpu.program import compile_cpu
from vdla.compiler.ops import Dense
from vdla.compiler.cpu.runner import CpuRunner
op = Dense(4, 32, 16, shift=4, relu=True)
inputs = op.random_inputs(np.random.default_rng(0))
out = CpuRunner(threads=1).run(compile_cpu(op, "int8"), inputs).outputs["out"]
np.testing.assert_array_equal(out, op.reference(**inputs))
print("exact")
""")
    env = {**os.environ, "VDLA_CACHE_DIR": str(private_cache)}

    def run():
        return subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                              text=True, timeout=300)
    first = run()
    assert first.returncode == 0 and first.stdout == "exact\n", first.stderr
    libraries = list((private_cache / "cpu").glob("*/kernel.so"))
    assert len(libraries) == 1
    _replace(libraries[0], foreign)
    second = run()
    assert second.returncode == 0 and second.stdout == "exact\n", second.stderr
    assert "is damaged (kernel.so" in second.stderr and "rebuilding it" in second.stderr
    assert not marker.exists()


# ------------------------------------------------------------------ Verilog and records
def test_a_truncated_cached_verilog_is_generated_again(capsys, monkeypatch):
    from vdla.hw import generate
    from vdla.hw.config import PRESETS
    generated = []

    def verilog(config):   # stands in for Amaranth's conversion (seconds)
        generated.append(config.name)
        return f"module {config.name}_top(input clk);\n  // ...\nendmodule\n"
    monkeypatch.setattr(generate, "verilog", verilog)
    tiny = PRESETS["tiny"]
    text = generate.cached_verilog(tiny)
    assert generate.cached_verilog(tiny) == text and generated == ["tiny"]
    [path] = (Path(os.environ["VDLA_CACHE_DIR"]) / "verilog").glob(f"*/{generate.VERILOG_FILE}")
    path.write_text(text[:len(text) // 2])
    assert generate.cached_verilog(tiny) == text and generated == ["tiny", "tiny"]
    assert "is damaged" in capsys.readouterr().err and path.read_text() == text


def test_a_damaged_fmax_record_is_forgotten_not_an_error(capsys):
    from vdla.hw.config import PRESETS
    from vdla.hw.synth import SynthReport, known_fmax, record_fmax
    tiny = PRESETS["tiny"]
    report = SynthReport(luts=1, ffs=1, brams=0, dsps=0, fmax_mhz=77.5, device="LFE5U-85F",
                         fits=True, stage="place_and_route")
    record_fmax(tiny, report)
    assert known_fmax(tiny)["fmax_mhz"] == 77.5
    record_fmax(tiny, dataclasses.replace(report, fmax_mhz=81.0))   # the latest one counts
    assert known_fmax(tiny)["fmax_mhz"] == 81.0
    [path] = (Path(os.environ["VDLA_CACHE_DIR"]) / "synth" / "fmax").glob("*/fmax.json")
    path.write_text('{"fmax_mhz": 1e9')
    assert known_fmax(tiny) is None
    assert "is damaged (fmax.json" in capsys.readouterr().err

