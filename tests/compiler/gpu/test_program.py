"""gpu programs: the file format, each device refusing the others' programs, the CLI.

These run everywhere; `test_device` runs the programs on a GPU.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.cli.main import cli as main
from vdla.compiler.gpu.kernel import gpu_unavailable_reason
from vdla.compiler.gpu.program import compile_gpu
from vdla.hw.config import PRESETS
from vdla.compiler.cpu.runner import CpuRunner
from vdla.compiler.gpu.runner import GpuRunner
from vdla.runtime.runner import AccelRunner, ProgramError
from vdla.runtime.program_file import load, save

from tests.compiler.gpu.shapes import ODD_SHAPES


@pytest.mark.parametrize("mode, dtypes", [("int8", ("int8", "int8", "int32", "int8")),
                                          ("fp16", ("float16", "float16", "float32", "float16")),
                                          ("fp32", ("float32",) * 4)])
def test_program_file_round_trip(tmp_path, mode, dtypes):
    op = ODD_SHAPES[0]
    program = compile_gpu(op, mode, check_with_nvcc=False)
    save(program, tmp_path / "p.vdla")
    loaded = load(tmp_path / "p.vdla")
    assert loaded.target == "gpu" and loaded.instructions == []
    assert loaded.metadata == program.metadata and "source" not in loaded.metadata["gpu"]
    assert [loaded.tensor(n).dtype.name for n in ("data", "weight", "bias", "out")] == list(dtypes)
    assert loaded.tensor("out").shape == op.output_shape


@pytest.mark.parametrize("runner, message", [
    (lambda: AccelRunner(PRESETS["tiny"]), "compiled for target 'gpu' cannot run on the "
                                           "accelerator's fsim simulator; run it with "
                                           "--target gpu"),
    (lambda: CpuRunner(), "compiled for target 'gpu' cannot run on the cpu target"),
])
def test_other_runners_refuse_gpu_programs(runner, message):
    op = ODD_SHAPES[7]
    program = compile_gpu(op, check_with_nvcc=False)
    with pytest.raises(ProgramError, match=message):
        runner().run(program, op.random_inputs(np.random.default_rng(0)))


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a CUDA device is present")
def test_gpu_runner_without_a_gpu_says_why():
    with pytest.raises(ProgramError, match="the gpu target cannot run here: no CUDA device"):
        GpuRunner()


def test_cli_compiles_for_the_gpu(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["compile", "conv2d", "--in-channels", "5", "--out-channels", "7",
                                  "--height", "9", "--width", "8", "--stride", "2", "--bias",
                                  "--target", "gpu", "--precision", "fp16", "--json",
                                  "-o", str(tmp_path / "p.vdla"), "--dump",
                                  str(tmp_path / "k.cu")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["target"] == "gpu" and summary["precision"] == "fp16"
    assert "__global__" in (tmp_path / "k.cu").read_text()
    assert load(tmp_path / "p.vdla").metadata["gpu"]["mode"] == "fp16"


@pytest.mark.parametrize("args, message", [
    (["--target", "cpu", "--precision", "fp16"], "--precision fp16: the cpu target computes"),
    (["--target", "gpu", "--virtual-threads", "2"], "--virtual-threads and --no-latency-hiding "
                                                    "are accelerator knobs; --target gpu"),
])
def test_cli_refuses_options_of_other_targets(tmp_path, args, message):
    result = CliRunner().invoke(main, ["compile", "dense", "--batch", "2", "--in-features", "3",
                                       "--out-features", "4", "-o", str(tmp_path / "p.vdla"),
                                       *args])
    assert result.exit_code != 0 and message in result.output
