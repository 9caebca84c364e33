"""The gpu target on a CUDA device: int8 bit-exact with numpy, fp16/fp32 close, the launch path.

Every test here is marked ``gpu`` and skips, with the reason, where no CUDA
device (or no CuPy) is present. The session that wrote them had no GPU: they
are run by ``python benchmarks/gpu.py`` on the H100 (see benchmarks/README.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.cli.main import cli
from vdla.compiler.cpu import reference_fp32
from vdla.compiler.gpu.kernel import GpuKernel, capture_graph
from vdla.compiler.gpu.program import compile_gpu
from vdla.compiler.gpu.runner import GpuRunner

from tests.compiler.gpu.shapes import ODD_SHAPES, RESNET_LAYERS, describe

pytestmark = pytest.mark.gpu


def _inputs(op, seed=0):
    return op.random_inputs(np.random.default_rng(seed), bias_range=1 << 30)


@pytest.mark.parametrize("op", ODD_SHAPES + list(RESNET_LAYERS.values()), ids=describe)
def test_int8_is_bit_exact_with_numpy(op):
    inputs = _inputs(op)
    result = GpuRunner().run(compile_gpu(op, check_with_nvcc=False), inputs)
    out = result.outputs["out"]
    assert out.dtype == np.int8 and out.shape == op.output_shape
    np.testing.assert_array_equal(out, op.reference(**inputs))


@pytest.mark.parametrize("op", ODD_SHAPES[1::2] + [RESNET_LAYERS["C5/b1"]], ids=describe)
@pytest.mark.parametrize("mode", ["fp16", "fp32"])
def test_floats_are_close_to_numpy(op, mode):
    dtype = np.float16 if mode == "fp16" else np.float32
    # Multiples of 1/16 below 8: exact in fp16; the sums accumulate in fp32.
    inputs = {name: (array / 16).astype(dtype if name != "bias" else np.float32)
              for name, array in _inputs(op, 1).items()}
    if "bias" in inputs:
        inputs["bias"] = (inputs["bias"] / (1 << 22)).astype(np.float32)
    out = GpuRunner().run(compile_gpu(op, mode, check_with_nvcc=False),
                                   inputs).outputs["out"]
    expected = reference_fp32(op, **inputs)
    tolerance = 2e-3 if mode == "fp16" else 1e-5
    np.testing.assert_allclose(out.astype(np.float64), expected, rtol=tolerance,
                               atol=tolerance * max(1.0, float(np.abs(expected).max())))


def test_launch_path_and_graph_replay_match_run():
    ops = [RESNET_LAYERS["C2/b1"], RESNET_LAYERS["C4/b1"], ODD_SHAPES[7]]
    kernels, expected = [], []
    for op in ops:
        inputs = _inputs(op, 2)
        kernel = GpuKernel(op)
        kernel.set_weights(inputs["weight"], inputs.get("bias"))
        kernel.data.set(inputs["data"], stream=kernel.stream)
        kernels.append(kernel)
        expected.append(op.reference(**inputs))
    import cupy
    stream = cupy.cuda.Stream(non_blocking=True)
    for kernel in kernels:
        kernel.stream.synchronize()
        kernel.out.fill(0)
    graph = capture_graph(kernels, stream)
    graph.launch(stream)
    stream.synchronize()
    for kernel, reference in zip(kernels, expected):
        np.testing.assert_array_equal(kernel.out.get(), reference)


def test_cli_runs_a_gpu_program(tmp_path):
    op = ODD_SHAPES[3]
    inputs = _inputs(op)
    paths = []
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        paths += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    runner = CliRunner()
    compiled = runner.invoke(cli, ["compile", "conv2d", "--in-channels", "20",
                                   "--out-channels", "12", "--height", "9", "--width", "9",
                                   "--stride", "2", "--pad", "1", "--bias", "--shift", "7",
                                   "--target", "gpu", "-o", str(tmp_path / "p.vdla")])
    assert compiled.exit_code == 0, compiled.output
    result = runner.invoke(cli, ["run", str(tmp_path / "p.vdla"), "--target", "gpu", *paths,
                                 "--output", f"out={tmp_path / 'out.npy'}"])
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), op.reference(**inputs))
