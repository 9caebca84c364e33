"""A cpu or gpu program file cannot run code vdla did not generate (issue 20).

The hostile file is a valid program whose stored source has a C function with
``__attribute__((constructor))`` appended: built and loaded, it would write a
marker file before any kernel runs. Saved, loaded and run through the CLI and
the Python API, the marker is never written; the file is refused in one line
(its stored code is not what vdla generates), and even past that check (a spec
carrying the hostile text, as a tampered in-memory program would) the runner
builds the code regenerated from the op, mode and schedule and computes the
right answer. The gpu target runs here through its CPU emulation, whose host
compiler would build the constructor just as the cpu target's would.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import shutil

import numpy as np
import pytest

from vdla.compiler.cpu.kernel import CpuKernel
from vdla.compiler.cpu.program import compile_cpu
from vdla.compiler.gpu.host_emulation import EmulatedKernel
from vdla.compiler.gpu.kernel import GpuKernel
from vdla.compiler.gpu.program import compile_gpu
from vdla.compiler.host import host_spec
from vdla.compiler.ops import Conv2d, Dense
from vdla.compiler.cpu.runner import CpuRunner
from vdla.compiler.gpu.runner import GpuRunner
from vdla.runtime.errors import ProgramError
from vdla.runtime.program_file import ProgramFileError, load, loads, save
from tests.fuzz_helpers import assert_one_line_error, vdla

CPU_OP = Conv2d(1, 5, 6, 7, 6, kernel=3, padding=1, bias=True, shift=5, relu=True)
GPU_OP = Dense(3, 10, 7, bias=True, shift=4)

needs_cxx = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                               reason="no C++ compiler to build the gpu emulation")


def _payload(marker) -> str:
    """C (and C++) that writes ``marker`` when the library holding it is loaded."""
    return ("\n#include <stdio.h>\n__attribute__((constructor)) static void vdla_payload(void)"
            f" {{ FILE *f = fopen({json.dumps(str(marker))}, \"w\"); if (f) {{ fputs(\"ran\", f);"
            " fclose(f); } }\n")


@pytest.fixture(params=["cpu", "gpu"])
def hostile(request, tmp_path):
    """(target, the hostile file, the marker path, inputs, numpy's output)."""
    target = request.param
    if target == "cpu":
        op, program = CPU_OP, compile_cpu(CPU_OP, "int8")
    else:
        op, program = GPU_OP, compile_gpu(GPU_OP, "int8", check_with_nvcc=False)
    marker = tmp_path / "marker"
    program.metadata[target]["source"] = host_spec(program).source + _payload(marker)
    path = save(program, tmp_path / "evil.vdla")
    inputs = op.random_inputs(np.random.default_rng(4))
    return target, path, marker, inputs, op.reference(**inputs)


def test_the_cli_refuses_the_file_in_one_line_and_runs_nothing(hostile, monkeypatch, capsys):
    target, path, marker, inputs, _ = hostile
    args = []
    for name, array in inputs.items():
        np.save(path.parent / f"{name}.npy", array)
        args += ["--input", f"{name}={path.parent / f'{name}.npy'}"]
    out = path.parent / "out.npy"
    code, _, err = vdla(monkeypatch, capsys, "run", path, "--target", target, *args,
                        "--output", out)
    code_name = {"cpu": "C", "gpu": "CUDA C"}[target]
    assert_one_line_error(code, err, f"{target} program: its stored {code_name} is not the "
                                     f"{code_name} vdla generates")
    assert not out.exists() and not marker.exists()
    code, _, err = vdla(monkeypatch, capsys, "inspect", path, "--source")
    assert_one_line_error(code, err, "--source: ")
    assert not marker.exists()


def test_the_api_refuses_the_file_whether_loaded_checked_or_not(hostile):
    target, path, marker, inputs, _ = hostile
    with pytest.raises(ProgramFileError, match=f"evil.vdla: {target} program: its stored"):
        load(path)
    runner = CpuRunner() if target == "cpu" else GpuRunner(emulate=True)
    with pytest.raises(ProgramError, match=f"^{target} program: its stored"):
        runner.run(load(path, verify=False), inputs)
    assert not marker.exists()


@needs_cxx
def test_past_the_check_the_regenerated_code_runs_and_the_stored_one_never(hostile):
    """A spec whose ``source`` is the hostile text: the runner builds from op, mode and
    schedule only, so the answer is numpy's and the constructor never runs."""
    target, path, marker, inputs, reference = hostile
    program = load(path, verify=False)
    program.metadata[target].pop("source")
    spec = host_spec(program)
    tampered = dataclasses.replace(spec, source=spec.source + _payload(marker))
    runner = CpuRunner() if target == "cpu" else GpuRunner(emulate=True)
    result = runner.run_spec(tampered, inputs)
    np.testing.assert_array_equal(result.outputs["out"], reference)
    assert not marker.exists()


def test_no_kernel_takes_code_from_its_caller():
    for kernel in (CpuKernel, GpuKernel, EmulatedKernel):
        assert set(inspect.signature(kernel).parameters) <= {"op", "mode", "schedule", "flags"}


@needs_cxx
@pytest.mark.parametrize("mode", ["int8", "fp32"])
def test_a_gpu_program_file_runs_on_the_emulation_as_numpy_computes(tmp_path, mode):
    from vdla.compiler.cpu import reference_fp32
    path = save(compile_gpu(GPU_OP, mode, check_with_nvcc=False), tmp_path / "g.vdla")
    inputs = GPU_OP.random_inputs(np.random.default_rng(6))
    if mode == "fp32":
        inputs = {name: (array / 16).astype(np.float32) for name, array in inputs.items()}
    result = GpuRunner(emulate=True).run(load(path), inputs)
    if mode == "int8":
        np.testing.assert_array_equal(result.outputs["out"], GPU_OP.reference(**inputs))
    else:
        np.testing.assert_allclose(result.outputs["out"], reference_fp32(GPU_OP, **inputs),
                                   rtol=1e-5, atol=1e-4)
    assert result.details["device"].startswith("host emulation")
    assert result.details["grid"] and result.details["threads_per_block"] >= 32


def test_a_file_holding_the_generated_code_as_older_ones_did_runs(tmp_path):
    program = compile_cpu(CPU_OP, "int8")
    program.metadata["cpu"]["source"] = host_spec(program).source
    loaded = loads(save(program, tmp_path / "old.vdla").read_bytes())
    inputs = CPU_OP.random_inputs(np.random.default_rng(7))
    out = CpuRunner().run(loaded, inputs).outputs["out"]
    np.testing.assert_array_equal(out, CPU_OP.reference(**inputs))
