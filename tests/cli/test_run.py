"""``vdla run``: reports, output files and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vdla.cli.run import command as run_command
from tests.cli.click_runner import invoke

REPO = Path(__file__).resolve().parents[2]


def test_run_writes_output_and_reports(layer):
    path, args, expected, tmp = layer
    result = invoke(run_command, [path, *args, "--output", tmp / "out.npy"])
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp / "out.npy"), expected)
    assert "sim: fsim" in result.stdout
    assert "cycles: n/a" in result.stdout
    assert "instructions: 10 (load 2, compute 7, store 1)" in result.stdout
    assert "gemm_macs" in result.stdout


def test_run_json_is_the_last_line(layer):
    path, args, expected, tmp = layer
    result = invoke(run_command, [path, *args, "--output", f"out={tmp / 'o.npy'}", "--json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["sim"] == "fsim" and report["cycles"] is None
    assert report["instructions"] == 10
    assert report["counters"]["gemm_uops"] == 3 * 2 * 1  # rows x k blocks x n blocks
    assert report["outputs"]["out"] == {"shape": [3, 4], "dtype": "int8",
                                        "file": str(tmp / "o.npy")}
    np.testing.assert_array_equal(np.load(tmp / "o.npy"), expected)


def _replace(args, name, value):
    args = list(args)
    index = next(i for i, a in enumerate(args) if a.startswith(f"{name}="))
    if value is None:
        del args[index - 1:index + 1]
    else:
        args[index] = value
    return args


@pytest.mark.parametrize("case, pattern", [
    ("missing-file", r"input 'data': no such file .*nope.npy"),
    ("not-npy", r"input 'data': cannot read .* as a .npy array"),
    ("no-equals", r"--input 'data': expected NAME=FILE"),
    ("wrong-dtype", r"input 'data': expected int8 \(3, 8\), got float64 \(3, 8\)"),
    ("wrong-shape", r"input 'data': expected int8 \(3, 8\), got int8 \(8, 3\)"),
    ("missing-input", r"missing input 'data': expected int8 \(3, 8\)"),
    ("unknown-input", r"unknown input 'extra'"),
    ("unknown-sim", r"--sim 'nosuch': unknown simulator \(available: .*fsim"),
    ("cycle-limit", r"fsim does not support option\(s\) cycle_limit"),
    ("trace", r"fsim does not support option\(s\) trace"),
    ("bad-output-name", r"--output 'result': the program has no such output"),
    ("missing-program", r"cannot read"),
    ("damaged-program", r"damaged or truncated"),
])
def test_run_errors_are_one_line(layer, case, pattern):
    path, args, _, tmp = layer
    data = str(tmp / "data.npy")
    if case == "missing-file":
        args = _replace(args, "data", f"data={tmp / 'nope.npy'}")
    elif case == "not-npy":
        (tmp / "text.npy").write_text("hello")
        args = _replace(args, "data", f"data={tmp / 'text.npy'}")
    elif case == "no-equals":
        args = _replace(args, "data", "data")
    elif case in ("wrong-dtype", "wrong-shape"):
        array = np.zeros((3, 8)) if case == "wrong-dtype" else np.zeros((8, 3), np.int8)
        np.save(data, array)
    elif case == "missing-input":
        args = _replace(args, "data", None)
    elif case == "unknown-input":
        args = [*args, "--input", f"extra={data}"]
    elif case == "unknown-sim":
        args = [*args, "--sim", "nosuch"]
    elif case == "cycle-limit":
        args = [*args, "--cycle-limit", "100"]
    elif case == "trace":
        args = [*args, "--trace", tmp / "wave.fst"]
    elif case == "bad-output-name":
        args = [*args, "--output", f"result={tmp / 'r.npy'}"]
    elif case == "missing-program":
        path = tmp / "nothing.vdla"
    elif case == "damaged-program":
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 1
        path.write_bytes(bytes(raw))
    result = invoke(run_command, [path, *args])
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert __import__("re").search(pattern, lines[0]), lines[0]


def test_vdla_entry_point_reports_bad_input_without_traceback(layer):
    path, args, _, tmp = layer
    args = _replace(args, "weight", None)
    process = subprocess.run([sys.executable, "-m", "vdla", "run", str(path), *args],
                             capture_output=True, text=True, cwd=REPO)
    assert process.returncode != 0
    assert "Traceback" not in process.stderr
    assert process.stderr.strip() == "Error: missing input 'weight': expected int8 (4, 8)"
