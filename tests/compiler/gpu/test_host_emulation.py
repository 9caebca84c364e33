"""The generated CUDA C itself, run on the CPU by `compiler.gpu.host_emulation`, against numpy.

One OS thread per CUDA thread and a barrier per ``__syncthreads``: the kernel's
own text (packing, ``__dp4a``, guards, REQUANT) computes the layer. Each
distinct kernel is one C++ build (~3 s, cached by content hash afterwards).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from vdla.compiler.cpu import reference_fp32
from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.gpu import gpu_knob_space
from vdla.compiler.gpu.host_emulation import EmulationError, emulate
from vdla.compiler.workloads import random_conv2d

from tests.compiler.gpu.shapes import ODD_SHAPES, describe

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                reason="no C++ compiler to build the emulation")


def _run(op, mode="int8", schedule=None, inputs=None):
    inputs = inputs or op.random_inputs(np.random.default_rng(5), bias_range=1 << 30)
    return emulate(op, mode, schedule, inputs["data"], inputs["weight"],
                   inputs.get("bias")), inputs


@pytest.mark.parametrize("op", ODD_SHAPES, ids=describe)
@pytest.mark.slow
def test_int8_kernel_text_is_bit_exact_with_numpy(op):
    out, inputs = _run(op)
    np.testing.assert_array_equal(out, op.reference(**inputs))


def test_a_larger_register_tile_is_bit_exact():
    op = ODD_SHAPES[1]
    problem = CpuProblem.from_op(op)
    schedule = max(gpu_knob_space(problem, "int8"), key=lambda s: s.thread_m * s.thread_n)
    assert schedule.thread_m * schedule.thread_n >= 8
    out, inputs = _run(op, schedule=schedule)
    np.testing.assert_array_equal(out, op.reference(**inputs))


@pytest.mark.parametrize("op", [ODD_SHAPES[2], ODD_SHAPES[7]], ids=describe)
def test_fp32_kernel_text_is_close_to_numpy(op):
    inputs = {name: (array / 16).astype(np.float32)
              for name, array in op.random_inputs(np.random.default_rng(6)).items()}
    out, _ = _run(op, "fp32", inputs=inputs)
    np.testing.assert_allclose(out, reference_fp32(op, **inputs), rtol=1e-5, atol=1e-4)


def test_fp16_is_refused_with_the_reason():
    op = ODD_SHAPES[0]
    with pytest.raises(EmulationError, match="fp16 kernels need cuda_fp16.h"):
        _run(op, "fp16", inputs={n: a.astype(np.float16) for n, a in
                                 op.random_inputs(np.random.default_rng(0)).items()})


@pytest.mark.slow
def test_random_convolutions_kernel_text_is_bit_exact():
    """The same sweep as the model's (`test_tiling`), a few layers through the CUDA C itself."""
    rng = np.random.default_rng(2325)
    for _ in range(4):
        op = random_conv2d(rng, max_channels=12)
        out, inputs = _run(op, inputs=op.random_inputs(rng, bias_range=1 << 30))
        np.testing.assert_array_equal(out, op.reference(**inputs), err_msg=op.describe())
