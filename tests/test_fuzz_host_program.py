"""cpu and gpu program headers mutated at random (hypothesis), re-signed so the digest
holds: each mutant is refused in one line (no output written) or computes exactly what
numpy computes for the original layer. Never a traceback, a crash, uninitialised memory
or a wrong answer: the kernel is built from the checked header alone (`compiler.host`).

The cpu target runs through ``vdla run``; the gpu target through
``GpuRunner(emulate=True)`` (its CUDA C on this CPU), there being no GPU here.
"""

from __future__ import annotations

import copy
import json
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from vdla.compiler.cpu.program import compile_cpu
from vdla.compiler.gpu.program import compile_gpu
from vdla.compiler.ops import Conv2d, Dense
from vdla.compiler.gpu.runner import GpuRunner
from vdla.runtime.program_file import dumps, load
from tests.fuzz_helpers import (ODD_VALUES, assert_one_line_error, get_at, json_paths, set_at,
                                sign, split, vdla)

CPU_OP = Conv2d(1, 5, 6, 6, 5, kernel=3, padding=1, bias=True, shift=3, relu=True)
GPU_OP = Dense(3, 10, 7, bias=True, shift=4)
# Strings a header holds somewhere: valid in one field, wrong in another.
WORDS = ["int8", "fp32", "fp16", "cpu", "gpu", "accel", "host_int8", "host_int32",
         "host_float32", "input", "output", "rows", "both", "kernel_block", "conv2d", "dense",
         "data", "weight", "bias", "out"]
FUZZ = settings(max_examples=250, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def _near(value) -> list:
    """Edits close to ``value``: what a careless hand (or a targeted one) writes."""
    if isinstance(value, bool):
        return [not value, int(value)]
    if isinstance(value, int):
        return [value - 1, value + 1, value * 2, value // 2, -value, value + 2**32]
    if isinstance(value, list) and value:
        return [value[:-1], value + value[-1:], value[::-1]]
    if isinstance(value, dict) and value:
        return [dict(list(value.items())[1:])]
    return []


@st.composite
def mutants(draw, header: dict) -> tuple[dict, str]:
    """A copy of ``header`` with one to three fields replaced; and what was done."""
    crafted, done = copy.deepcopy(header), []
    for _ in range(draw(st.integers(1, 3))):
        # The config's own fields are the accelerator verifier's (tests/test_fuzz_program_file);
        # here the config is one field among the host program's.
        path = draw(st.sampled_from([p for p in json_paths(crafted)
                                     if p and (p[0] != "config" or len(p) == 1)]))
        near = _near(get_at(crafted, path))
        pools = [near, near, WORDS, ODD_VALUES] if near else [WORDS, ODD_VALUES]
        value = draw(st.sampled_from(draw(st.sampled_from(pools))))
        set_at(crafted, path, value)
        done.append(f"{'/'.join(map(str, path))}={value!r:.40}")
    return crafted, "; ".join(done)


def _file(header: dict, rest: bytes) -> bytes:
    return sign(json.dumps(header).encode(), rest)   # NaN and Infinity too, as a hand may


CPU_HEADER, CPU_REST = split(dumps(compile_cpu(CPU_OP, "int8")))


@pytest.fixture(scope="module")
def cpu_inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    arrays = CPU_OP.random_inputs(np.random.default_rng(3))
    args = []
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", array)
        args += ["--input", f"{name}={folder / f'{name}.npy'}"]
    return args, CPU_OP.reference(**arrays)


@FUZZ
@given(mutant=mutants(CPU_HEADER))
def test_cpu_headers_mutated_at_random(monkeypatch, capsys, tmp_path, cpu_inputs, mutant):
    header, what = mutant
    path, out = tmp_path / "mutant.vdla", tmp_path / "out.npy"
    path.write_bytes(_file(header, CPU_REST))
    out.unlink(missing_ok=True)
    args, expected = cpu_inputs
    code, _, err = vdla(monkeypatch, capsys, "run", path, "--target", "cpu", *args,
                        "--output", out)
    if code == 0:
        np.testing.assert_array_equal(np.load(out), expected, err_msg=what)
    else:
        assert code == 1, f"{what}: exit {code}: {err}"
        assert_one_line_error(code, err)
        assert not out.exists(), what


GPU_HEADER, GPU_REST = split(dumps(compile_gpu(GPU_OP, "int8", check_with_nvcc=False)))
GPU_INPUTS = GPU_OP.random_inputs(np.random.default_rng(4))


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="no C++ compiler to build the gpu emulation")
@FUZZ
@given(mutant=mutants(GPU_HEADER))
def test_gpu_headers_mutated_at_random(tmp_path, mutant):
    header, what = mutant
    path = tmp_path / "mutant.vdla"
    path.write_bytes(_file(header, GPU_REST))
    try:
        out = GpuRunner(emulate=True).run(load(path), GPU_INPUTS).outputs["out"]
    except ValueError as error:   # ProgramFileError, ProgramError, InputError: one line each
        assert "\n" not in str(error) and str(error), what
        return
    np.testing.assert_array_equal(out, GPU_OP.reference(**GPU_INPUTS), err_msg=what)
