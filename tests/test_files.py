"""Bounded reads and atomic writes (vdla/files.py), and the commands that read or write
user files through them: /dev/zero and oversized files refused in one line under a memory
cap, an existing output kept whole when a write fails (RLIMIT_FSIZE)."""

import os
import resource
import stat
import subprocess
import sys

import pytest

from vdla.files import bounded_lines, printable, read_bounded, write_atomic


class Refused(ValueError):
    pass


def test_read_bounded_refuses_more_than_the_limit(tmp_path):
    path = tmp_path / "small.json"
    path.write_bytes(b"x" * 100)
    assert read_bounded(path, 100, "thing") == b"x" * 100
    with pytest.raises(Refused, match=r"^thing .*small.json: larger than 99 bytes, not a thing "
                                      r"file$"):
        read_bounded(path, 99, "thing", Refused)
    with pytest.raises(Refused, match=r"^thing /dev/zero: larger than 4096 bytes"):
        read_bounded("/dev/zero", 4096, "thing", Refused)
    with pytest.raises(Refused, match=r"^cannot read thing .*: it is a directory$"):
        read_bounded(tmp_path, 10, "thing", Refused)
    with pytest.raises(Refused, match=r"^cannot read thing .*missing: No such file"):
        read_bounded(tmp_path / "missing", 10, "thing", Refused)


def test_a_fifo_nobody_writes_reads_as_empty_instead_of_hanging(tmp_path):
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    assert read_bounded(fifo, 10, "thing") == b""
    assert list(bounded_lines(fifo, 10, 10, "thing")) == []


def test_a_fifo_given_as_an_npy_input_is_refused_instead_of_hanging(tmp_path):
    from click import ClickException
    from vdla.cli.arrays import read_npy
    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)
    with pytest.raises(ClickException, match=r"^--calibration: cannot read .*x\.npy as a \.npy "
                                             r"array \(EOF: reading magic string, expected 8 bytes got 0\)$"):
        read_npy(str(fifo), "--calibration")


def test_a_huge_regular_file_is_refused_from_its_size_without_reading(tmp_path):
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:
        handle.truncate(1 << 40)            # sparse: a terabyte that takes no space
    with pytest.raises(Refused, match=r"huge.json: larger than 4096 bytes, not a thing file$"):
        read_bounded(huge, 4096, "thing", Refused)


def test_bounded_lines_bounds_each_line_and_the_whole(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"one\n\ntwo\nthree")              # a last line without its newline
    assert list(bounded_lines(path, 100, 10, "log")) == [(1, b"one"), (2, b""), (3, b"two"),
                                                        (4, b"three")]
    assert list(bounded_lines(tmp_path / "missing", 100, 10, "log")) == []
    with pytest.raises(Refused, match=r"^log .*log.jsonl:4: a line longer than 4 bytes"):
        list(bounded_lines(path, 100, 4, "log", Refused))
    with pytest.raises(Refused, match=r"^log .*log.jsonl: larger than 8 bytes, not a log file"):
        list(bounded_lines(path, 8, 10, "log", Refused))
    with pytest.raises(Refused, match=r"^log /dev/zero:1: a line longer than 65536 bytes"):
        list(bounded_lines("/dev/zero", 1 << 30, 1 << 16, "log", Refused))


def test_write_atomic_keeps_permissions_and_writes_special_files_in_place(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    path.chmod(0o640)
    write_atomic(path, lambda handle: handle.write(b"new"))
    assert path.read_bytes() == b"new" and stat.S_IMODE(path.stat().st_mode) == 0o640
    fresh = tmp_path / "fresh.bin"
    write_atomic(fresh, lambda handle: handle.write(b"x"))
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask
    link = tmp_path / "link.bin"
    link.symlink_to(path)
    write_atomic(link, lambda handle: handle.write(b"through"))
    assert link.is_symlink() and path.read_bytes() == b"through"
    link.unlink()
    write_atomic("/dev/null", lambda handle: handle.write(b"gone"))
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)      # written to, not renamed over

    def broken(handle):
        handle.write(b"half")
        raise RuntimeError("killed")
    with pytest.raises(RuntimeError, match="killed"):
        write_atomic(path, broken)
    assert path.read_bytes() == b"through"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.bin", "out.bin"]


def _vdla(args, cwd, memory=None, file_size=None, timeout=120):
    """``vdla args`` in a subprocess under an address-space and/or file-size limit."""
    def limit():
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "vdla", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=limit)


DENSE = ["dense", "--in-features", "16", "--out-features", "16"]


@pytest.mark.parametrize("args, message", [
    (["tune", *DENSE, "--target", "cpu", "--log", "/dev/zero"],
     "tuning record log /dev/zero:1: a line longer than 1048576 bytes"),
    (["tune", *DENSE, "--target", "cpu", "--log", "t.jsonl", "--transfer", "/dev/zero"],
     "tuning record log /dev/zero:1: a line longer than 1048576 bytes"),
    (["compile", *DENSE, "-o", "x.vdla", "--tuned", "/dev/zero"],
     "tuning record log /dev/zero:1: a line longer than 1048576 bytes"),
    (["dse", "--space", "/dev/zero"], "space /dev/zero: larger than 1048576 bytes"),
    (["config", "show", "/dev/zero"], "config /dev/zero: larger than 1048576 bytes"),
    (["run", "/dev/zero"], "/dev/zero: "),
    (["tune", *DENSE, "--target", "cpu", "--log", "big.jsonl"],
     "tuning record log big.jsonl: larger than 67108864 bytes, not a tuning record log file"),
])
@pytest.mark.slow
def test_unbounded_files_are_refused_in_one_line_under_a_memory_cap(tmp_path, args, message):
    if "big.jsonl" in args:
        with open(tmp_path / "big.jsonl", "wb") as file:     # sparse: nothing written
            file.truncate(65 << 20)
    result = _vdla(args, tmp_path, memory=2 << 30)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr


def test_a_failed_output_write_keeps_the_existing_file(tmp_path):
    """``vdla run --output keep.npy`` under ``ulimit -f 0``: the write fails in one line and
    the earlier ``keep.npy`` is untouched (a plain open() would have emptied it)."""
    import numpy as np
    from vdla.compiler import Dense, compile_op
    from vdla.hw.config import PRESETS
    from vdla.runtime.program_file import save
    op = Dense(1, 16, 16)
    save(compile_op(op, PRESETS["tiny"]), tmp_path / "dense.vdla")
    rng = np.random.default_rng(0)
    inputs = {}
    for region in compile_op(op, PRESETS["tiny"]).inputs:
        inputs[region.name] = tmp_path / f"{region.name}.npy"
        np.save(inputs[region.name], rng.integers(-3, 3, region.shape).astype(region.dtype))
    keep = tmp_path / "keep.npy"
    np.save(keep, np.arange(5))
    before = keep.read_bytes()
    args = ["run", "dense.vdla", "--sim", "fsim", "--output", "keep.npy",
            *[f"--input={name}={path.name}" for name, path in inputs.items()]]
    result = _vdla(args, tmp_path, file_size=0)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error: output 'out': cannot write keep.npy (File too large)"]
    assert keep.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["dense.vdla", "keep.npy", *[p.name for p in inputs.values()]])
    result = _vdla(args, tmp_path)          # and without the limit, the run writes it
    assert result.returncode == 0, result.stderr
    assert np.load(keep).shape == (1, 16)


@pytest.mark.parametrize("text, shown", [
    ("conv1/weight_q", "conv1/weight_q"),
    ("caf\u00e9 \u5377\u79ef", "caf\u00e9 \u5377\u79ef"),   # printable letters stay as they are
    ("p\x1b]0;owned\x07", "p\\x1b]0;owned\\x07"),                    # an OSC title sequence
    ("a\nb\rc\td", "a\\nb\\rc\\td"),
    ("x\x1b[2J\x9b", "x\\x1b[2J\\x9b"),                              # CSI, 7- and 8-bit
    ("evil\u202etxt.exe\u200b", "evil\\u202etxt.exe\\u200b"),       # bidi override, zero width
    ("line\u2028sep", "line\\u2028sep"),
    (7, "7"),
])
def test_printable_escapes_what_a_terminal_would_obey(text, shown):
    assert printable(text) == shown
    assert printable(text).isprintable()
