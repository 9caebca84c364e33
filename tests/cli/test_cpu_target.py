"""``vdla compile --target cpu`` and ``vdla run --target cpu``: bit-exact outputs, one-line errors."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from vdla.cli.compile import command as compile_command
from vdla.cli.run import command as run_command
from vdla.compiler.ops import Conv2d
from vdla.runtime.program_file import load


def test_cli_compiles_and_runs_for_the_cpu(tmp_path):
    runner = CliRunner()
    program = tmp_path / "layer.vdla"
    result = runner.invoke(compile_command, [
        "conv2d", "--batch", "2", "--in-channels", "13", "--out-channels", "11", "--height", "10",
        "--width", "9", "--kernel", "3x2", "--stride", "1", "--pad", "1", "--bias",
        "--shift", "6", "--relu", "--target", "cpu", "-o", str(program)])
    assert result.exit_code == 0, result.output
    assert "for the cpu (int8" in result.output
    op = Conv2d(2, 13, 11, 10, 9, kernel=(3, 2), padding=1, bias=True, shift=6, relu=True)
    inputs = op.random_inputs(np.random.default_rng(4))
    args = []
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    out = tmp_path / "out.npy"
    result = runner.invoke(run_command, [str(program), "--target", "cpu", *args,
                                         "--output", str(out)])
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(out), op.reference(**inputs))
    # The file records its target: --target may be left out, not contradicted.
    assert runner.invoke(run_command, [str(program), *args]).exit_code == 0
    result = runner.invoke(run_command, [str(program), "--target", "accel", *args])
    assert result.exit_code != 0
    assert "compiled for target 'cpu'" in result.output and "Traceback" not in result.output
    assert load(program).target == "cpu"


def test_cli_rejects_accelerator_knobs_for_the_cpu(tmp_path):
    result = CliRunner().invoke(compile_command, [
        "dense", "--in-features", "8", "--out-features", "4", "--target", "cpu",
        "--virtual-threads", "2", "-o", str(tmp_path / "x.vdla")])
    assert result.exit_code != 0
    assert "--virtual-threads and --no-latency-hiding are accelerator knobs" in result.output
    result = CliRunner().invoke(compile_command, [
        "dense", "--in-features", "8", "--out-features", "4", "--precision", "fp32",
        "-o", str(tmp_path / "x.vdla")])
    assert "the accelerator computes int8 only" in result.output


