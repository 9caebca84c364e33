"""The generated CUDA C: what it contains, and nvcc's verdict on every kernel for sm_90a.

nvcc compiles without a GPU; where it is absent the compile tests skip, saying
so. ptxas's report must fit an H100: no spills, at most 255 registers a
thread and 64 K a block, the shared memory the schedule declares (<= 48 KiB
static).
"""

from __future__ import annotations

import pytest

from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.gpu import Tiling, default_gpu_schedule
from vdla.compiler.gpu.codegen import KERNEL_NAME, generate_cuda
from vdla.compiler.gpu.nvcc import NvccError, compile_cubin, find_nvcc
from vdla.compiler.gpu.schedule import H100

from tests.compiler.gpu.shapes import ODD_SHAPES, RESNET_LAYERS, describe

needs_nvcc = pytest.mark.skipif(find_nvcc() is None,
                                reason="no nvcc ($VDLA_NVCC, PATH or /usr/local/cuda/bin)")


def _source(op, mode="int8"):
    problem = CpuProblem.from_op(op)
    schedule = default_gpu_schedule(problem, mode)
    return generate_cuda(problem, schedule, mode, op.shift, op.relu, op.describe()), \
        Tiling(problem, schedule, mode)


@pytest.mark.parametrize("mode, step", [("int8", "__dp4a("), ("fp16", "fmaf("),
                                        ("fp32", "fmaf(")])
def test_source_is_one_specialised_kernel(mode, step):
    op = RESNET_LAYERS["C3/b1"]
    source, tiling = _source(op, mode)
    assert source.count("__global__") == 1 and 'extern "C"' in source
    assert f"{KERNEL_NAME}(" in source and step in source
    assert f"__launch_bounds__({tiling.threads}, 1)" in source
    assert f"k0 < {tiling.words}; k0 += {tiling.schedule.block_k}" in source
    assert source.count("__syncthreads()") == 2
    assert ("#define SHIFT 10" in source) == (mode == "int8")



@pytest.mark.parametrize("op", [RESNET_LAYERS["C8/b1"], ODD_SHAPES[2], ODD_SHAPES[8]],
                         ids=describe)
@pytest.mark.parametrize("mode", ["int8", "fp16", "fp32"])
def test_every_load_is_unconditional_and_prefetched(op, mode):
    """Guarded loads compiled to branches and serialised on the GPU: each global load is a
    declaration of its own, at a masked offset, and the next step's are fetched in the loop."""
    source, tiling = _source(op, mode)
    assert "&&" not in source and "||" not in source
    loads = [line.strip() for line in source.splitlines()
             if "data[" in line or "weight[" in line]
    assert all(line.startswith("const ") for line in loads)
    # a prologue fetch and one in the loop, each with every slot's loads
    per_fetch = tiling.a_slots * (4 if mode == "int8" else 1) + tiling.b_slots
    assert len(loads) == 2 * per_fetch
    loop = source[source.index("for (int k0"):]
    assert loop.index("const int kf = k0 + ") < loop.index("for (int kk")

def _check(report, tiling, mode):
    assert report.spill_stores == report.spill_loads == report.stack_bytes == 0, report
    assert report.registers <= H100["registers_per_thread"]
    assert report.registers * tiling.threads <= H100["registers_per_sm"]
    assert report.shared_bytes == tiling.schedule.shared_bytes(mode)
    assert report.shared_bytes <= H100["static_shared_bytes"]


@needs_nvcc
@pytest.mark.parametrize("name", sorted(RESNET_LAYERS), ids=str)
@pytest.mark.slow
def test_resnet_kernels_compile_for_sm90a_and_fit(name):
    source, tiling = _source(RESNET_LAYERS[name])
    _check(compile_cubin(source), tiling, "int8")


@needs_nvcc
@pytest.mark.parametrize("op", ODD_SHAPES, ids=describe)
def test_odd_kernels_compile_for_sm90a_and_fit(op):
    source, tiling = _source(op)
    _check(compile_cubin(source), tiling, "int8")


@needs_nvcc
@pytest.mark.parametrize("op", [RESNET_LAYERS["C2/b1"], ODD_SHAPES[2], ODD_SHAPES[8]],
                         ids=describe)
@pytest.mark.parametrize("mode", ["fp16", "fp32"])
def test_float_kernels_compile_for_sm90a_and_fit(op, mode):
    source, tiling = _source(op, mode)
    _check(compile_cubin(source), tiling, mode)


@needs_nvcc
def test_nvcc_errors_carry_its_message():
    with pytest.raises(NvccError, match=r"nvcc failed \(exit \d+.*\n(.|\n)*undefined_name"):
        compile_cubin('extern "C" __global__ void k() { undefined_name = 1; }')
