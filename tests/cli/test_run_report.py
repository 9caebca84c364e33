"""``vdla run`` and ``vdla inspect``: --config, named cycle counts, utilization, per-module counts."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.cli.main import cli
from vdla.compiler import Conv2d, compile_op
from vdla.hw import isa
from vdla.hw.config import PRESETS
from vdla.runtime.program_file import save

TINY = PRESETS["tiny"]
# Channels 5 and 6 on a 4x4 block: 8x8 lanes computed, 30 of 64 of them padding.
PADDED = Conv2d(1, 5, 6, 6, 6, kernel=3, padding=1, bias=True, shift=4, relu=True)


@pytest.fixture(scope="module")
def chip_build():
    """The tiny accelerator's Verilator model (cached across runs under ~/.cache/vdla)."""
    from vdla.sim.rtl.build import build_model
    return build_model(TINY)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def padded(tmp_path):
    """The padded layer compiled for tiny, its inputs on disk, and its run arguments."""
    program = compile_op(PADDED, TINY)
    path = save(program, tmp_path / "padded.vdla")
    inputs = PADDED.random_inputs(np.random.default_rng(4))
    args = []
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / name}.npy"]
    return program, path, args, PADDED.reference(**inputs)


def run_json(path, args, *more):
    result = invoke("run", path, *args, "--json", *more)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1]), result


def test_fsim_counts_instructions_per_module(padded):
    program, path, args, _ = padded
    report, _ = run_json(path, args)
    per_module = {module: report["counters"][f"{module}_insns"] for module in isa.MODULES}
    assert report["instructions_per_module"] == per_module
    assert sum(per_module.values()) == len(program.instructions)
    assert report["cycles"] is None and report["gemm_utilization"] is None
    assert report["useful_macs"] == 5 * 6 * 6 * 6 * 9


@pytest.mark.parametrize("command", ["run", "inspect"])
def test_config_must_name_the_programs_hardware(padded, tmp_path, command):
    _, path, args, _ = padded
    extra = args if command == "run" else []
    result = invoke(command, path, *extra, "--config", "default")
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert (f"{path}: compiled for hardware 'tiny' (config hash {TINY.hash}), not for 'default'"
            in lines[0])
    # The same hardware under another name is the same program's hardware.
    renamed = tmp_path / "renamed.json"
    renamed.write_text(TINY.replace(name="mine").to_json())
    for config in ("tiny", renamed):
        assert invoke(command, path, *extra, "--config", config).exit_code == 0


@pytest.mark.rtl
def test_rtl_names_both_cycle_counts_and_reports_real_utilization(padded, chip_build):
    program, path, args, expected = padded
    fsim, _ = run_json(path, args)
    report, _ = run_json(path, args, "--sim", "rtl", "--output", path.with_suffix(".npy"))
    np.testing.assert_array_equal(np.load(path.with_suffix(".npy")), expected)
    cycles = report["cycles"]
    # The host counts from start; the chip's counter from when its modules run.
    assert report["chip_cycle_counter"] == report["counters"]["cycles"] == cycles - 2
    assert report["instructions_per_module"] == fsim["instructions_per_module"]
    assert report["gemm_utilization"] == pytest.approx(PADDED.macs / (cycles * 16))
    uops = sum(i.micro_ops for i in program.instructions if isinstance(i, isa.Gemm) and not i.reset)
    assert report["gemm_uops_per_cycle"] == pytest.approx(uops / cycles)
    assert report["gemm_utilization"] < 0.5 * report["gemm_uops_per_cycle"]
    text = invoke("run", path, *args, "--sim", "rtl").stdout
    assert f"cycles: {cycles:,} (from start to done, as the host counts them); the chip's " \
           f"cycle counter reads {cycles - 2:,}" in text
    assert f"GEMM utilization: {100 * report['gemm_utilization']:.1f}% ({PADDED.macs:,} useful " \
           f"MACs / ({cycles:,} cycles x 16 MACs))" in text
    assert "(zero-padded lanes included)" in text


@pytest.mark.rtl
def test_rtl_announces_a_model_build(padded, chip_build, monkeypatch):
    from vdla.sim.rtl import backend

    def build(config, progress=None, **options):  # a cold build, as far as `run` can tell
        progress(f"building the RTL model of config {config.name!r}")
        return chip_build
    monkeypatch.setattr(backend, "build_model", build)
    _, path, args, _ = padded
    result = invoke("run", path, *args, "--sim", "rtl")
    assert result.exit_code == 0, result.output
    assert "building the RTL model of config 'tiny' (first run for this hardware only, " \
           "about a minute)" in result.stderr


def test_a_cpu_program_is_reported_by_what_applies_to_it(tmp_path):
    """No config, cycles, instructions or counters: the cpu target has none of them."""
    from vdla.compiler.cpu.program import compile_cpu
    path = save(compile_cpu(PADDED, "int8"), tmp_path / "cpu.vdla")
    inputs = PADDED.random_inputs(np.random.default_rng(3))
    args = []
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / name}.npy"]
    result = invoke("run", path, *args, "--threads", 1, "--output", tmp_path / "out.npy")
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), PADDED.reference(**inputs))
    lines = result.stdout.splitlines()
    assert lines[0] == f"program: {path} ({PADDED.describe()}; for the cpu target)"
    assert lines[1] == f"output out: int8 (1, 6, 6, 6) -> {tmp_path / 'out.npy'}"
    assert re.fullmatch(r"time: \d+\.\d{3} ms \(1 threads, int8, [\w-]+\)", lines[2])
    assert len(lines) == 3
    report = json.loads(invoke("run", path, *args, "--json").stdout)
    assert sorted(report) == ["details", "op", "outputs", "program", "target"]
    assert report["target"] == "cpu" and report["details"]["threads"] == 2


@pytest.mark.rtl
def test_rtl_names_the_trace_it_wrote(padded, tmp_path):
    _, path, args, _ = padded
    trace = tmp_path / "wave.fst"
    result = invoke("run", path, *args, "--sim", "rtl", "--trace", trace)
    assert result.exit_code == 0, result.output
    assert f"trace: {trace}" in result.stdout.splitlines()
    assert trace.stat().st_size > 0


def test_text_from_the_program_file_is_shown_not_obeyed(tmp_path):
    from tests.runtime.programs import dense_inputs, dense_program
    program = dense_program(TINY, 3, 8, 4)
    program.metadata["op_description"] = "dense\x1b[2J\u202e"
    path = save(program, tmp_path / "dense.vdla")
    args = []
    for name, array in dense_inputs(np.random.default_rng(1), 3, 8, 4).items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / name}.npy"]
    result = invoke("run", path, *args)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (f"program: {path} (dense\\x1b[2J\\u202e; compiled "
                                             "for tiny)")
