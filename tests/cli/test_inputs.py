"""``vdla inputs``: the inputs a program needs, example ones, and the run that uses them."""

from __future__ import annotations

import shlex

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.cli.main import cli
from vdla.compiler import Conv2d, Dense, compile_op
from vdla.hw.config import PRESETS
from vdla.runtime.program_file import save
from tests.runtime.programs import dense_program, dense_reference

TINY = PRESETS["tiny"]

LAYERS = [
    # (layer, the inputs it needs by name: dtype and shape, worked out by hand)
    (Conv2d(1, 5, 6, 7, 9, kernel=(3, 2), stride=2, padding=1, bias=True, shift=5, relu=True),
     {"data": ("int8", (1, 5, 7, 9)), "weight": ("int8", (6, 5, 3, 2)),
      "bias": ("int32", (6,))}),
    (Conv2d(2, 3, 4, 5, 5, kernel=3, padding=1, shift=3),
     {"data": ("int8", (2, 3, 5, 5)), "weight": ("int8", (4, 3, 3, 3))}),
    # A residual (the constant identity block is no input).
    (Conv2d(2, 6, 7, 5, 4, kernel=3, padding=1, bias=True, shift=9, residual_shift=7),
     {"data": ("int8", (2, 6, 5, 4)), "weight": ("int8", (7, 6, 3, 3)),
      "bias": ("int32", (7,)), "residual": ("int8", (2, 7, 5, 4))}),
    (Dense(3, 10, 7, bias=True, shift=4),
     {"data": ("int8", (3, 10)), "weight": ("int8", (7, 10)), "bias": ("int32", (7,))}),
]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize("layer, needs", LAYERS, ids=lambda v: getattr(v, "describe", str)())
def test_lists_names_dtypes_and_shapes(layer, needs, tmp_path):
    path = save(compile_op(layer, TINY), tmp_path / "layer.vdla")
    result = invoke("inputs", path)
    assert result.exit_code == 0, result.output
    for name, (dtype, shape) in needs.items():
        assert f"  {name:<8} {dtype:<5} {shape}" in result.stdout
    assert f"returns 'out': int8  {layer.output_shape}" in result.stdout


@pytest.mark.parametrize("layer, needs", LAYERS, ids=lambda v: getattr(v, "describe", str)())
def test_written_inputs_run_and_match_numpy(layer, needs, tmp_path):
    path = save(compile_op(layer, TINY), tmp_path / "layer.vdla")
    folder = tmp_path / "in"
    result = invoke("inputs", path, "-o", folder, "--seed", 3)
    assert result.exit_code == 0, result.output
    arrays = {name: np.load(folder / f"{name}.npy") for name in needs}
    for name, (dtype, shape) in needs.items():
        assert (arrays[name].dtype.name, arrays[name].shape) == (dtype, shape)
    assert len({arrays[name].tobytes() for name in needs}) == len(needs)  # not all alike
    expected = np.load(folder / "expected_out.npy")
    np.testing.assert_array_equal(expected, layer.reference(**arrays))
    # The printed command runs as it stands.
    line = next(line for line in result.stdout.splitlines() if line.startswith("run it: "))
    words = shlex.split(line.removeprefix("run it: "))
    assert words[:3] == ["vdla", "run", str(path)]
    ran = invoke(*words[1:])
    assert ran.exit_code == 0, ran.output
    np.testing.assert_array_equal(np.load(folder / "out.npy"), expected)


def test_seeds_differ_and_repeat(tmp_path):
    path = save(compile_op(LAYERS[0][0], TINY), tmp_path / "layer.vdla")
    for folder, seed in (("a", 1), ("b", 1), ("c", 2)):
        assert invoke("inputs", path, "-o", tmp_path / folder, "--seed", seed).exit_code == 0
    data = {folder: np.load(tmp_path / folder / "data.npy") for folder in "abc"}
    np.testing.assert_array_equal(data["a"], data["b"])
    assert not np.array_equal(data["a"], data["c"])


def test_a_hand_built_program_gets_inputs_but_no_reference(tmp_path):
    program = dense_program(TINY, 3, 8, 4)
    path = save(program, tmp_path / "dense.vdla")
    folder = tmp_path / "in"
    result = invoke("inputs", path, "-o", folder)
    assert result.exit_code == 0, result.output
    assert not (folder / "expected_out.npy").exists()
    inputs = {region.name: np.load(folder / f"{region.name}.npy") for region in program.inputs}
    assert inputs["bias"].dtype == np.int32 and inputs["data"].shape == (3, 8)
    assert invoke("run", path, *[f"--input={n}={folder / n}.npy" for n in inputs],
                  "--output", tmp_path / "out.npy").exit_code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), dense_reference(inputs))


def test_config_must_match_the_program(tmp_path):
    path = save(compile_op(LAYERS[2][0], TINY), tmp_path / "layer.vdla")
    result = invoke("inputs", path, "--config", "default")
    assert result.exit_code != 0
    assert "compiled for hardware 'tiny'" in result.stderr
    assert "not for 'default'" in result.stderr
    assert invoke("inputs", path, "--config", "tiny").exit_code == 0


def test_unwritable_folder_is_one_line(tmp_path):
    path = save(compile_op(LAYERS[2][0], TINY), tmp_path / "layer.vdla")
    (tmp_path / "file").write_text("")
    result = invoke("inputs", path, "-o", tmp_path / "file" / "in")
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"-o {tmp_path / 'file' / 'in'}: cannot write" in lines[0]


HOST_LAYER = Conv2d(1, 5, 6, 7, 6, kernel=3, padding=1, bias=True, shift=5, relu=True)


@pytest.mark.parametrize("target, mode, dtypes", [
    ("cpu", "int8", ("int8", "int8", "int32", "int8")),
    ("cpu", "fp32", ("float32",) * 4),
    ("gpu", "fp16", ("float16", "float16", "float32", "float16")),
])
def test_host_programs_get_inputs_of_their_dtypes_and_numpys_result(tmp_path, target, mode,
                                                                    dtypes):
    from vdla.compiler.cpu import reference_fp32
    from vdla.compiler.cpu.program import compile_cpu
    from vdla.compiler.gpu.program import compile_gpu
    program = (compile_cpu(HOST_LAYER, mode) if target == "cpu"
               else compile_gpu(HOST_LAYER, mode, check_with_nvcc=False))
    path = save(program, tmp_path / "host.vdla")
    folder = tmp_path / "in"
    result = invoke("inputs", path, "-o", folder)
    assert result.exit_code == 0, result.output
    arrays = {name: np.load(folder / f"{name}.npy") for name in ("data", "weight", "bias")}
    assert [arrays[name].dtype.name for name in arrays] == list(dtypes[:3])
    expected = np.load(folder / "expected_out.npy")
    assert expected.dtype.name == dtypes[3] and expected.shape == HOST_LAYER.output_shape
    if mode == "int8":
        np.testing.assert_array_equal(expected, HOST_LAYER.reference(**arrays))
    else:   # numpy's float64 result, rounded once to the output's type
        np.testing.assert_array_equal(expected, reference_fp32(HOST_LAYER, **arrays)
                                      .astype(dtypes[3]))
        assert np.abs(arrays["data"]).max() <= 8 and np.abs(expected).max() > 0
    line = next(line for line in result.stdout.splitlines() if line.startswith("run it: "))
    words = shlex.split(line.removeprefix("run it: "))
    assert words[:5] == ["vdla", "run", str(path), "--target", target]
    if target == "cpu":   # the printed command runs as it stands
        ran = invoke(*words[1:])
        assert ran.exit_code == 0, ran.output
        np.testing.assert_allclose(np.load(folder / "out.npy"), expected, rtol=1e-5, atol=1e-4)
