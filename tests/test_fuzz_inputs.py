"""Hostile inputs to every reader of user files: ``.npy`` inputs, config and
schedule JSON, baselines; and the CLI's one error path. Each defect once
found by hand is pinned here with the message it now gets."""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pytest

from vdla.bench import suite
from vdla.bench.baseline import check_baseline, load_baseline
from vdla.bench.suite import BenchError
from vdla.compiler.errors import ScheduleError
from vdla.compiler.accel.schedule import load_schedule
from vdla.hw.config import PRESETS, ConfigError, HwConfig, load_config
from vdla.runtime.program_file import save
from tests.fuzz_helpers import assert_one_line_error, vdla
from tests.runtime.programs import dense_inputs, dense_program, dense_reference

TINY = PRESETS["tiny"]
M, K, N = 3, 8, 4
ODD_VALUES = [None, True, -1, 0, 3, 2**30, 10**12, 1.5, float("inf"), "", "../x", [], {},
              [[[]]], {"a": {"b": 1}}]


@pytest.fixture
def layer(tmp_path):
    path = save(dense_program(TINY, M, K, N), tmp_path / "dense.vdla")
    arrays = dense_inputs(np.random.default_rng(4), M, K, N)
    files = {}
    for name, array in arrays.items():
        files[name] = tmp_path / f"{name}.npy"
        np.save(files[name], array)
    return path, files, dense_reference(arrays), tmp_path


def _input_args(files):
    return [arg for name, file in files.items() for arg in ("--input", f"{name}={file}")]


# ---------------------------------------------------------------- .npy inputs
def test_mutated_npy_inputs_are_refused_or_right(monkeypatch, capsys, layer):
    path, files, expected, tmp = layer
    original = files["data"].read_bytes()
    rng = random.Random(5)
    refused = 0
    for trial in range(80):
        data = bytearray(original)
        if trial % 4 == 0:
            data = data[:rng.randrange(len(data))]                  # truncated
        else:
            for _ in range(rng.randint(1, 3)):                      # header or data bytes
                data[rng.randrange(len(data))] = rng.randrange(256)
        crafted = tmp / "crafted.npy"
        crafted.write_bytes(bytes(data))
        out = tmp / "out.npy"
        out.unlink(missing_ok=True)
        code, _, err = vdla(monkeypatch, capsys, "run", path,
                            *_input_args({**files, "data": crafted}), "--output", out)
        if code == 0:   # only the data bytes changed: the answer for those inputs
            arrays = {name: np.load(file) for name, file in {**files, "data": crafted}.items()}
            np.testing.assert_array_equal(np.load(out), dense_reference(arrays))
        else:
            assert_one_line_error(code, err, "input 'data'")
            assert code == 1 and not out.exists()
            refused += 1
    assert refused > 20


def _npy_with_header(shape, dtype="|i1"):
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, {"descr": dtype, "fortran_order": False,
                                                  "shape": shape})
    return stream.getvalue()


@pytest.mark.parametrize("content, message", [
    (b"", "cannot read"),
    (_npy_with_header((10**11,)), "expected int8 (3, 8), got int8 (100000000000,)"),
    (_npy_with_header((3, 8), "|O"), "holds Python objects"),
    (b"\x93NUMPY\x09\x00", "cannot read"),
])
def test_bad_npy_files_get_one_line(monkeypatch, capsys, layer, content, message):
    path, files, _, tmp = layer
    bad = tmp / "bad.npy"
    bad.write_bytes(content)
    code, _, err = vdla(monkeypatch, capsys, "run", path, *_input_args({**files, "data": bad}))
    assert_one_line_error(code, err, "input 'data'", message)
    assert code == 1   # never 130 ("aborted")


def test_dev_null_input_is_an_error_not_an_abort(monkeypatch, capsys, layer):
    path, files, _, _ = layer
    code, _, err = vdla(monkeypatch, capsys, "run", path,
                        *_input_args({**files, "data": "/dev/null"}))
    assert_one_line_error(code, err, "input 'data': cannot read /dev/null as a .npy array")
    assert code == 1


def test_big_endian_input_names_the_byte_order(monkeypatch, capsys, layer):
    path, files, _, tmp = layer
    np.save(tmp / "be.npy", np.load(files["bias"]).astype(">i4"))
    code, _, err = vdla(monkeypatch, capsys, "run", path, *_input_args({**files,
                                                                        "bias": tmp / "be.npy"}))
    assert_one_line_error(code, err, "expected int32 (4,), got int32 big-endian (4,)")


# ---------------------------------------------------------------- outputs and traces
def test_output_is_written_to_exactly_the_path_given(monkeypatch, capsys, layer):
    path, files, expected, tmp = layer
    code, out, err = vdla(monkeypatch, capsys, "run", path, *_input_args(files),
                          "--output", tmp / "result", "--json")
    assert code == 0, err
    assert not (tmp / "result.npy").exists()
    np.testing.assert_array_equal(np.load(tmp / "result"), expected)
    assert json.loads(out.splitlines()[-1])["outputs"]["out"]["file"] == str(tmp / "result")


@pytest.mark.parametrize("args, message", [
    (["--output", "/dev/full"], "output 'out': cannot write /dev/full (No space left on device)"),
    (["--output", "NOWHERE/o.npy"], "the folder"),
    (["--output", "out=A.npy", "--output", "out=B.npy"], "--output 'out' given twice"),
    (["--sim", "rtl", "--trace", "/dev/full"], "--trace /dev/full: not a regular file"),
    (["--sim", "rtl", "--trace", "NOWHERE/t.fst"], "does not exist"),
    (["--sim", "rtl", "--timeline", "NOWHERE/t.png"], "does not exist"),
])
def test_unwritable_destinations_fail_before_the_run(monkeypatch, capsys, layer, args, message):
    path, files, _, tmp = layer
    args = [a.replace("NOWHERE", str(tmp / "missing")) for a in args]
    code, _, err = vdla(monkeypatch, capsys, "run", path, *_input_args(files), *args)
    assert_one_line_error(code, err, message)
    assert not (tmp / "missing").exists()


def test_compile_to_dev_full_names_the_file(monkeypatch, capsys):
    code, _, err = vdla(monkeypatch, capsys, "compile", "dense", "--in-features", 4,
                        "--out-features", 4, "--config", "tiny", "-o", "/dev/full")
    assert_one_line_error(code, err, "/dev/full: cannot write (No space left on device)")


def test_a_bug_says_so_and_where_the_traceback_went(monkeypatch, capsys, layer, tmp_path):
    path, files, _, _ = layer
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path / "cache"))

    def broken(*args, **kwargs):
        raise KeyError("simulated bug")
    monkeypatch.setattr("vdla.cli.run.load", broken)
    code, _, err = vdla(monkeypatch, capsys, "run", path, *_input_args(files))
    assert_one_line_error(code, err, "internal error (a bug in vdla", "KeyError",
                          "traceback written to", bug=True)
    written = list((tmp_path / "cache" / "crash").iterdir())
    assert len(written) == 1 and "simulated bug" in written[0].read_text()
    assert str(written[0]) in err


# ---------------------------------------------------------------- config and schedule JSON
def test_random_config_json_is_a_config_error_or_a_config(tmp_path):
    rng = random.Random(11)
    fields = list(TINY.to_dict())
    for _ in range(200):
        data = TINY.to_dict()
        for _ in range(rng.randint(1, 3)):
            data[rng.choice(fields + ["extra"])] = rng.choice(ODD_VALUES)
        path = tmp_path / "c.json"
        path.write_text(json.dumps(data))
        try:
            config = load_config(str(path))
        except ConfigError as error:
            assert str(error) and "\n" not in str(error)
        else:
            assert isinstance(config, HwConfig) and config.hash


@pytest.mark.parametrize("text, message", [
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
    ('{"cmd_queue_depth": 1073741824}', "cmd_queue_depth: at most 1024"),
    ('{"name": "../../outside"}', "name: expected a label"),
    ('{"block_in": 256, "block_out": 256, "batch": 1}', "MACs per cycle"),
    ('{"batch": 1e400}', "batch: expected an integer"),
])
def test_bad_configs_get_one_line(monkeypatch, capsys, tmp_path, text, message):
    path = tmp_path / "c.json"
    path.write_text(text)
    code, _, err = vdla(monkeypatch, capsys, "compile", "dense", "--in-features", 4,
                        "--out-features", 4, "--config", path, "-o", tmp_path / "x.vdla")
    assert_one_line_error(code, err, message)


def test_special_file_as_config_is_read_no_further_than_a_config_can_be(tmp_path):
    with pytest.raises(ConfigError, match="config /dev/zero: larger than 1048576 bytes"):
        load_config("/dev/zero")


def test_random_schedule_json_is_a_schedule_error_or_a_schedule(tmp_path):
    rng = random.Random(12)
    names = ["tile_b", "tile_h", "tile_w", "tile_k", "tile_c", "virtual_threads",
             "loop_order", "latency_hiding"]
    for _ in range(150):
        data = {rng.choice(names + ["bogus"]): rng.choice(ODD_VALUES)
                for _ in range(rng.randint(1, 3))}
        path = tmp_path / "s.json"
        path.write_text(json.dumps(data))
        try:
            load_schedule(path)
        except ScheduleError as error:
            assert str(error) and "\n" not in str(error)
    path.write_text("{" * 1 + '"tile_h":' + "[" * 100000 + "]" * 100000 + "}")
    with pytest.raises(ScheduleError, match="nested too deeply"):
        load_schedule(path)


# ---------------------------------------------------------------- baselines
def test_random_baselines_are_bench_errors_or_valid(tmp_path):
    rng = random.Random(13)
    good = {"benchmark": "resnet18", "config_hash": TINY.hash, "tolerance": 0.01,
            "layers": {"C2": {"cycles": 1000}, "C5": {"cycles": 2000}}}
    for _ in range(150):
        data = json.loads(json.dumps(good))
        target = rng.choice([data, data["layers"], data["layers"]["C2"]])
        target[rng.choice(list(target) + ["x"])] = rng.choice(ODD_VALUES)
        path = tmp_path / "b.json"
        path.write_text(json.dumps(data))
        try:
            loaded = load_baseline(path)
        except BenchError as error:
            assert "}}}" not in str(error) and "\n" not in str(error)
        else:
            assert all(entry["cycles"] > 0 for entry in loaded["layers"].values())


@pytest.mark.parametrize("data, message", [
    ({"layers": {}}, "naming at least one layer"),
    ({"layers": {"C2": {"cycles": 0}}}, r"layer 'C2': cycles 0: expected an integer, 1 or more"),
    ({"layers": {"C2": {}}}, r"layer 'C2': no 'cycles' field"),
    ({"layers": {"C2": {"cycles": 5}}, "tolerance": "lots"},
     r"tolerance 'lots': expected a number in \[0, 1\]"),
    ([], "expected a JSON object, got list"),
])
def test_bad_baselines_name_the_problem(tmp_path, data, message):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BenchError, match=message):
        load_baseline(path)


def test_special_file_as_baseline_is_bounded():
    with pytest.raises(BenchError, match="larger than 1048576 bytes"):
        load_baseline("/dev/zero")


def test_baseline_of_other_hardware_fails_before_the_bench(monkeypatch, capsys, tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"benchmark": "resnet18", "config_hash": "f" * 16,
                                "layers": {"C2": {"cycles": 5}}}))

    def no_bench(*args, **kwargs):
        raise AssertionError("the bench ran")
    monkeypatch.setattr(suite, "run_benches", no_bench)
    code, _, err = vdla(monkeypatch, capsys, "bench", "resnet18", "--config", "tiny",
                        "--check-baseline", path)
    assert_one_line_error(code, err, "recorded on other hardware")


def test_the_baseline_tolerance_is_honoured():
    from tests.runtime.test_bench import _baseline, _result
    baseline = {**_baseline({"C2": 100_000}), "tolerance": 0.05}
    check = check_baseline(_result({"C2": 103_000}), baseline)
    assert check.ok and check.tolerance == 0.05
    assert not check_baseline(_result({"C2": 106_000}), baseline).ok


def test_negative_seed_is_a_usage_error(monkeypatch, capsys):
    code, _, err = vdla(monkeypatch, capsys, "bench", "resnet18", "--config", "tiny",
                        "--seed", "-1")
    assert code == 2 and "-1 is not in the range x>=0" in err


@pytest.mark.parametrize("sim", ["fsim", pytest.param("rtl", marks=pytest.mark.rtl)])
def test_work_past_the_stated_limit_is_one_line(monkeypatch, capsys, layer, sim):
    path, files, _, _ = layer
    code, _, err = vdla(monkeypatch, capsys, "run", path, *_input_args(files), "--sim", sim,
                        "--work-limit", 3)
    # GEMM: 3 rows x 2 k-blocks; three ALU passes over 3 rows: 6 + 9 executions.
    assert_one_line_error(code, err, "the program asks for 15 micro-op executions, more than "
                                     "the limit of 3")
