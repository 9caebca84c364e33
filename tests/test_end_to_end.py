"""Layers through the command line, as a user runs them: ``vdla compile`` then
``vdla run --sim fsim|rtl`` on .npy files, checked against the op's numpy reference.

The RTL runs are marked ``rtl``: they build (once per config, cached) and run
the Verilator model of the generated Verilog.
"""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.cli.main import cli
from vdla.compiler import Conv2d, Dense
from vdla.compiler.workloads import RESNET18
from vdla.hw.config import PRESETS


def _random_conv(seed: int) -> Conv2d:
    """An odd convolution: channels off the block size, kernels 1-7, strides 1-3, batch > 1.

    Stride and padding are the same on both axes: the command line takes one of each.
    """
    rng = np.random.default_rng(seed)
    kernel = (int(rng.integers(1, 8)), int(rng.integers(1, 8)))
    stride = int(rng.integers(1, 4))
    padding = int(rng.integers(0, min(kernel)))
    return Conv2d(batch=int(rng.integers(1, 4)), in_channels=int(rng.integers(1, 40)),
                  out_channels=int(rng.integers(1, 40)),
                  height=kernel[0] + int(rng.integers(0, 12)),
                  width=kernel[1] + int(rng.integers(0, 12)), kernel=kernel, stride=stride,
                  padding=padding, bias=bool(rng.integers(0, 2)), shift=int(rng.integers(0, 12)),
                  relu=bool(rng.integers(0, 2)))


def _compile_args(op) -> list[str]:
    if isinstance(op, Dense):
        args = ["dense", "--batch", op.batch, "--in-features", op.in_features,
                "--out-features", op.out_features]
    else:
        args = ["conv2d", "--batch", op.batch, "--in-channels", op.in_channels,
                "--out-channels", op.out_channels, "--height", op.height, "--width", op.width,
                "--kernel", f"{op.kernel[0]}x{op.kernel[1]}", "--stride", op.stride[0],
                "--pad", op.padding[0]]
    args += ["--shift", op.shift] + (["--bias"] if op.bias else []) + \
        (["--relu"] if op.relu else [])
    return [str(a) for a in args]


def run_through_cli(op, config: str, sim: str, tmp_path, seed: int = 0) -> dict:
    """Compile and run ``op`` with the CLI; assert the output equals numpy's; return the report."""
    runner = CliRunner()
    program = tmp_path / "layer.vdla"
    result = runner.invoke(cli, ["compile", *_compile_args(op), "--config", config,
                                 "-o", str(program)])
    assert result.exit_code == 0, result.output
    inputs = op.random_inputs(np.random.default_rng(seed))
    arguments = ["run", str(program), "--sim", sim, "--output", str(tmp_path / "out.npy"),
                 "--json"]
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        arguments += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    result = runner.invoke(cli, arguments)
    assert result.exit_code == 0, result.output
    out = np.load(tmp_path / "out.npy")
    np.testing.assert_array_equal(out, op.reference(**inputs))
    return json.loads(result.output.strip().splitlines()[-1])


ODD_CONVS = [_random_conv(seed) for seed in range(6)]
DENSES = [Dense(batch=5, in_features=37, out_features=19, bias=True, shift=4, relu=True),
          Dense(batch=1, in_features=300, out_features=7, shift=6)]


@pytest.mark.parametrize("config", ["default", "tiny"])
@pytest.mark.parametrize("op", ODD_CONVS + DENSES, ids=lambda op: op.describe())
def test_odd_layers_on_fsim(op, config, tmp_path):
    report = run_through_cli(op, config, "fsim", tmp_path)
    assert report["sim"] == "fsim" and report["cycles"] is None


@pytest.mark.rtl
@pytest.mark.parametrize("config", ["default", "tiny"])
@pytest.mark.parametrize("op", ODD_CONVS[:4] + DENSES[:1], ids=lambda op: op.describe())
def test_odd_layers_on_rtl(op, config, tmp_path):
    report = run_through_cli(op, config, "rtl", tmp_path, seed=1)
    assert report["cycles"] > 0
    # Useful MACs only: padded lanes count in the micro-op rate, never in utilization.
    peak = PRESETS[config].macs_per_cycle
    assert report["gemm_utilization"] == pytest.approx(op.macs / (report["cycles"] * peak))
    assert 0 < report["gemm_utilization"] <= report["gemm_uops_per_cycle"] <= 1


@pytest.mark.rtl
@pytest.mark.parametrize("workload", RESNET18, ids=lambda w: w.name)
def test_resnet18_layers_on_rtl_at_default(workload, tmp_path):
    report = run_through_cli(workload.op, "default", "rtl", tmp_path)
    # A GEMM core of 256 MACs a cycle can never beat the ideal cycle count.
    assert report["cycles"] >= workload.op.macs // 256
    assert report["gemm_utilization"] == \
        pytest.approx(workload.op.macs / (report["cycles"] * 256))
    # Channels are multiples of the 16-wide block: no padded lanes, so the rates agree.
    assert report["gemm_uops_per_cycle"] == pytest.approx(report["gemm_utilization"])
