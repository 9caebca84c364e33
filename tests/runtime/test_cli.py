"""``vdla run`` and ``vdla inspect``: reports, output files and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.cli.inspect import command as inspect_command
from vdla.cli.run import command as run_command
from vdla.hw.config import PRESETS
from vdla.hw.isa import Uop
from vdla.runtime.program_file import save
from tests.runtime.programs import dense_inputs, dense_program, dense_reference

TINY = PRESETS["tiny"]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def layer(tmp_path):
    """A saved dense program, its inputs as .npy files, and the expected output."""
    program = dense_program(TINY, 3, 8, 4)
    path = save(program, tmp_path / "dense.vdla")
    inputs = dense_inputs(np.random.default_rng(5), 3, 8, 4)
    args = []
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    return path, args, dense_reference(inputs), tmp_path


def invoke(command, args):
    return CliRunner().invoke(command, [str(a) for a in args])


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


def test_inspect_text(layer):
    path, *_ = layer
    result = invoke(inspect_command, [path])
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "config: tiny" in out
    assert "instructions: 10 (load 2, compute 7, store 1)" in out
    assert "push:next" in out and "LOAD   wgt" in out
    assert "pop:prev push:prev           STORE  out" in out
    assert "load->compute   pushes      1  pops      1" in out
    assert "UNBALANCED" not in out
    assert "micro-ops: 3" in out
    assert "dense_output  3x4" in out
    assert 'layer: "dense"' in out


def test_inspect_json_and_long_uop_tables(tmp_path):
    program = dense_program(TINY, 3, 8, 4)
    program.uops = [Uop(dst=i % 256, src=(3 * i) % 256, wgt=i % 128) for i in range(40)]
    program.instructions[1] = program.instructions[1].replace(push_next=False)
    path = save(program, tmp_path / "long.vdla")
    text = invoke(inspect_command, [path]).stdout
    assert "... 24 more" in text
    # 40 micro-ops no longer fit their region: shown, and reported as failing verification.
    assert "DRAM plan verification: FAILED: DRAM plan: micro-ops at bytes" in text
    assert "load->compute   pushes      0  pops      1  UNBALANCED" in text
    result = invoke(inspect_command, [path, "--json"])
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["uops"] == [[u.dst, u.src, u.wgt] for u in program.uops]
    assert report["tokens"]["load->compute"] == {"pushes": 0, "pops": 1}
    assert report["instructions_per_module"] == {"load": 2, "compute": 7, "store": 1}
    assert [item["index"] for item in report["listing"]["store"]] == [8]
    assert report["listing"]["load"][0]["fields"]["memory_type"] == "INP"
    names = {region["name"] for region in report["dram"]["regions"]}
    assert names == {"instructions", "uops", "data", "weight", "bias", "out"}


def test_inspect_damaged_file(tmp_path):
    (tmp_path / "x.vdla").write_bytes(b"VDLAPROG" + bytes(20))
    result = invoke(inspect_command, [tmp_path / "x.vdla"])
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "Error: " in result.stderr
