"""`bench.gpu_compare`: the GPU columns of the comparison, with and without a device."""

from __future__ import annotations

import numpy as np
import pytest

from vdla.bench import compare
from vdla.bench.gpu_compare import GPU_COLUMNS, float_inputs
from vdla.compiler.gpu.kernel import gpu_unavailable_reason
from vdla.compiler.ops import Conv2d
from vdla.compiler.workloads import Workload
from vdla.hw.config import PRESETS

SMALL = (Workload("C90", Conv2d(1, 20, 24, 8, 8, kernel=3, padding=1, bias=True, shift=8,
                                relu=True), 2),
         Workload("C91", Conv2d(1, 24, 40, 8, 8, kernel=1, stride=2, bias=True, shift=6,
                                relu=True), 1))


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a CUDA device is present")
def test_without_a_device_every_gpu_column_says_not_measured():
    report = compare.run_comparison(PRESETS["tiny"], ("gpu",), workloads=SMALL[:1], repeats=1)
    for name in GPU_COLUMNS:
        assert report["columns"][name]["missing"].startswith("not measured (no CUDA device")
        assert report["columns"][name]["total_seconds"] is None
    assert report["gpu"]["missing"].startswith("not measured (no CUDA device")
    assert not any(name.startswith("gpu") for name in report["ratios"])
    lines = compare.format_table(report)
    assert sum("not measured (no CUDA device" in line for line in lines) == 1
    assert "gpu int8" not in lines[1]  # the header row: no empty gpu columns


def test_gpu_ratio_takes_cudnns_fastest_arithmetic_per_layer():
    def column(c90, c91):
        return {"seconds": {"C90": c90, "C91": c91}, "missing": None,
                "total_seconds": 2 * c90 + c91}
    columns = {"gpu int8": column(2.0, 1.0), "cudnn fp16": column(3.0, 9.0),
               "cudnn tf32": column(4.0, 2.0), "cudnn fp32": column(5.0, 6.0)}
    # best: C90 3.0 (fp16) x2 + C91 2.0 (tf32) = 8.0; ours 2*2 + 1 = 5.
    assert compare._gpu_ratios(columns, SMALL) == {"gpu int8 / cudnn best": 5.0 / 8.0}
    columns["cudnn tf32"]["missing"] = "not measured: torch is not installed"
    assert compare._gpu_ratios(columns, SMALL) == {}


def test_float_inputs_are_exact():
    inputs = SMALL[0].op.random_inputs(np.random.default_rng(0))
    scaled = float_inputs(inputs)
    for name, array in scaled.items():
        if name != "bias":  # the bias stays fp32 in the gpu target (fp16's accumulator)
            np.testing.assert_array_equal(array.astype(np.float16).astype(np.float32), array)
        np.testing.assert_array_equal(array * (256 if name == "bias" else 16), inputs[name])


@pytest.mark.gpu
def test_gpu_columns_are_measured_and_checked():
    report = compare.run_comparison(PRESETS["tiny"], ("gpu",), workloads=SMALL, repeats=2)
    columns = report["columns"]
    assert columns["gpu int8"]["checked"]["C90"] == "bit-exact"
    assert columns["gpu int8 b8"]["checked"]["C91"] == "bit-exact"
    assert columns["gpu int8"]["total_seconds"] > 0
    assert report["gpu"]["device"]["name"] and report["gpu"]["graph_seconds"]["int8"] > 0
