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
    ("cycle-limit", r"^Error: --cycle-limit does not apply to --sim fsim \(it applies to "
                    r"--sim rtl\)$"),
    ("trace", r"^Error: --trace does not apply to --sim fsim \(it applies to --sim rtl\)$"),
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


# Which runners take each backend option, as the backends document it (README, docs):
# the reference the declarations (`sim.backend.register_backend`,
# `compiler.runners.HOST_RUNNERS`) are checked against.
TAKEN_BY = {
    "--trace": ["--sim rtl"],
    "--cycle-limit": ["--sim rtl"],
    "--work-limit": ["--sim fsim", "--sim rtl"],
    "--timeline": ["--sim rtl"],
    "--timeline-window": ["--sim rtl"],
    "--port": ["--sim board"],
    "--baud": ["--sim board"],
    "--board-memory": ["--sim board-sim"],
    "--threads": ["--target cpu"],
}


def test_help_names_the_backends_that_take_each_option():
    result = invoke(run_command, ["--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())   # click wraps the help text
    for flag, takers in TAKEN_BY.items():
        assert __import__("re").search(rf"{flag} \S.*? Applies to {', '.join(takers)}\.",
                                       text), flag


@pytest.mark.parametrize("flag, value", [
    ("--trace", "wave.fst"), ("--cycle-limit", "100"), ("--timeline", "t.png"),
    ("--port", "/dev/ttyUSB1"), ("--baud", "9600"), ("--board-memory", "litedram-sdram"),
    ("--threads", "3")])
def test_an_option_fsim_does_not_declare_is_refused_before_any_input_is_read(layer, flag,
                                                                             value):
    path, args, _, tmp = layer
    # An input that would fail if it were read: the refusal must come first.
    args = _replace(args, "data", f"data={tmp / 'nope.npy'}")
    result = invoke(run_command, [path, *args, flag, tmp / value if "." in value else value])
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"Error: {flag} does not apply to --sim fsim (it applies "
                                     f"to {', '.join(TAKEN_BY[flag])})")


def test_a_registered_backend_takes_the_options_it_declares(layer, monkeypatch):
    """A new backend declares its options where it registers; run accepts, passes and
    documents them from that declaration alone."""
    from vdla.sim import backend, backends
    from vdla.sim.fsim import FunctionalSimulator
    backends.backend_names()    # the built-in tiers first: they must not overwrite ours
    made = []

    def factory(config, cycle_limit=None, **options):
        made.append(cycle_limit)
        return FunctionalSimulator(config, **options)
    monkeypatch.setitem(backend.REGISTRY, "counting", factory)
    monkeypatch.setitem(backend.RUN_OPTIONS, "counting", ("cycle_limit",))
    path, args, expected, tmp = layer
    result = invoke(run_command, [path, *args, "--sim", "counting", "--cycle-limit", 77,
                                  "--output", tmp / "o.npy"])
    assert result.exit_code == 0, result.output
    assert made == [77]
    np.testing.assert_array_equal(np.load(tmp / "o.npy"), expected)
    result = invoke(run_command, [path, *args, "--sim", "counting", "--work-limit", 5])
    assert result.stderr.strip() == ("Error: --work-limit does not apply to --sim counting (it "
                                     "applies to --sim fsim, --sim rtl)")
    text = " ".join(invoke(run_command, ["--help"]).stdout.split())
    assert "Applies to --sim counting, --sim rtl." in text


def test_every_missing_input_is_named(layer):
    path, args, _, _ = layer
    args = _replace(_replace(args, "weight", None), "bias", None)
    result = invoke(run_command, [path, *args])
    assert result.exit_code == 1
    assert result.stderr.strip() == ("Error: missing inputs 'weight' and 'bias': expected "
                                     "int8 (4, 8) and int32 (4,)")


def test_output_is_written_at_the_path_named(layer):
    path, args, expected, tmp = layer
    result = invoke(run_command, [path, *args, "--output", tmp / "out.bin"])
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp / "out.bin"), expected)
    assert not (tmp / "out.bin.npy").exists()
    assert f"output out: int8 (3, 4) -> {tmp / 'out.bin'}" in result.stdout.splitlines()


@pytest.fixture
def cpu_layer(tmp_path):
    """A conv compiled for the cpu target, its inputs as .npy files, the expected output."""
    from vdla.compiler.cpu.program import compile_cpu
    from vdla.compiler.ops import Conv2d
    from vdla.runtime.program_file import save
    op = Conv2d(1, 8, 8, 6, 6, kernel=3, padding=1, bias=True, shift=5, relu=True)
    path = save(compile_cpu(op, "int8"), tmp_path / "conv.vdla")
    inputs = op.random_inputs(np.random.default_rng(6))
    args = []
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    return path, args, op.reference(**inputs), tmp_path


def test_a_cpu_program_runs_on_the_target_its_file_records(cpu_layer):
    path, args, expected, tmp = cpu_layer
    result = invoke(run_command, [path, *args, "--threads", 1, "--output", tmp / "o.npy"])
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(tmp / "o.npy"), expected)
    assert "(1 threads, int8, " in result.stdout
    for extra, message in [
            (["--target", "accel"], f"--target accel: {path} was compiled for target 'cpu' "
                                    "(leave --target out to run it there)"),
            (["--target", "gpu"], f"--target gpu: {path} was compiled for target 'cpu' "
                                  "(leave --target out to run it there)"),
            (["--sim", "rtl"], f"--sim rtl does not apply to --target cpu ({path} was "
                               "compiled for it; it runs no simulator)"),
            (["--trace", tmp / "w.fst"], "--trace does not apply to --target cpu (it applies "
                                         "to --sim rtl)")]:
        result = invoke(run_command, [path, *args, *extra])
        assert result.exit_code == 1
        assert result.stderr.strip() == f"Error: {message}"
    # An explicit target that agrees with the file is taken as it is.
    assert invoke(run_command, [path, *args, "--target", "cpu"]).exit_code == 0
