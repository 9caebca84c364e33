"""``vdla inspect``: the text and JSON views of a program file, and damaged files."""

from __future__ import annotations

import json

import pytest

from vdla.cli.inspect import command as inspect_command
from vdla.compiler.ops import Dense
from vdla.hw.config import PRESETS
from vdla.hw.isa import Uop
from vdla.runtime.program_file import save
from tests.cli.click_runner import invoke
from tests.runtime.programs import dense_program

TINY = PRESETS["tiny"]


def test_inspect_text(layer):
    path, *_ = layer
    result = invoke(inspect_command, [path])
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "config: tiny" in out
    assert "instructions: 10 (load 2, compute 7, store 1)" in out
    assert "push:next" in out and "LOAD   wgt" in out
    assert "pop:prev push:prev           STORE  out" in out
    assert "load->compute   pushes      1  pops      1" in out
    assert "UNBALANCED" not in out
    assert "micro-ops: 3" in out
    assert "dense_output  3x4" in out
    assert 'layer: "dense"' in out


def test_inspect_json_and_long_uop_tables(tmp_path):
    program = dense_program(TINY, 3, 8, 4)
    program.uops = [Uop(dst=i % 256, src=(3 * i) % 256, wgt=i % 128) for i in range(40)]
    program.instructions[1] = program.instructions[1].replace(push_next=False)
    path = save(program, tmp_path / "long.vdla")
    text = invoke(inspect_command, [path]).stdout
    assert "... 24 more" in text
    # 40 micro-ops no longer fit their region: shown, and reported as failing verification.
    assert "DRAM plan verification: FAILED: DRAM plan: micro-ops at bytes" in text
    assert "load->compute   pushes      0  pops      1  UNBALANCED" in text
    result = invoke(inspect_command, [path, "--json"])
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["uops"] == [[u.dst, u.src, u.wgt] for u in program.uops]
    assert report["tokens"]["load->compute"] == {"pushes": 0, "pops": 1}
    assert report["instructions_per_module"] == {"load": 2, "compute": 7, "store": 1}
    assert [item["index"] for item in report["listing"]["store"]] == [8]
    assert report["listing"]["load"][0]["fields"]["memory_type"] == "INP"
    names = {region["name"] for region in report["dram"]["regions"]}
    assert names == {"instructions", "uops", "data", "weight", "bias", "out"}


def test_inspect_damaged_file(tmp_path):
    (tmp_path / "x.vdla").write_bytes(b"VDLAPROG" + bytes(20))
    result = invoke(inspect_command, [tmp_path / "x.vdla"])
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "Error: " in result.stderr


HOST_LAYER = Dense(3, 10, 7, bias=True, shift=4)


@pytest.mark.parametrize("target, mode, code", [("cpu", "int8", "vdla cpu kernel (int8)"),
                                                ("cpu", "fp32", "vdla cpu kernel (fp32)"),
                                                ("gpu", "int8", "__global__")])
def test_inspect_host_programs(tmp_path, target, mode, code):
    from vdla.compiler.cpu.program import compile_cpu
    from vdla.compiler.gpu.program import compile_gpu
    from vdla.compiler.host import host_spec
    program = (compile_cpu(HOST_LAYER, mode) if target == "cpu"
               else compile_gpu(HOST_LAYER, mode, check_with_nvcc=False))
    path = save(program, tmp_path / "host.vdla")
    result = invoke(inspect_command, [path])
    assert result.exit_code == 0, result.stderr
    dtype = "int8" if mode == "int8" else "float32"
    assert f"target: {target} (no instructions and no code" in result.stdout
    assert "header verification: ok" in result.stdout
    assert f"  weight   input   host_{dtype:<8} 7x10" in result.stdout
    assert f'"mode": "{mode}"' in result.stdout
    report = json.loads(invoke(inspect_command, [path, "--json"]).stdout)
    assert report["target"] == target and report["verification"] == "ok"
    assert report["metadata"] == program.metadata
    assert [t["shape"] for t in report["tensors"]] == [[3, 10], [7, 10], [7], [3, 7]]
    source = invoke(inspect_command, [path, "--source"]).stdout
    assert code in source and source == host_spec(program).source


def test_inspect_shows_a_host_header_that_fails_and_says_why(tmp_path):
    from vdla.compiler.cpu.program import compile_cpu
    program = compile_cpu(HOST_LAYER, "int8")
    program.metadata["cpu"]["schedule"]["unroll"] = 64
    path = save(program, tmp_path / "bad.vdla")
    result = invoke(inspect_command, [path])
    assert result.exit_code == 0, result.stderr
    assert ("header verification: FAILED: cpu program: schedule: unroll: at most 4 (the knob "
            "space's largest), got 64") in result.stdout
    result = invoke(inspect_command, [path, "--source"])
    assert result.exit_code != 0 and result.stderr.count("\n") == 1
    assert "--source: cpu program: schedule: unroll: at most 4" in result.stderr


def test_source_of_an_accelerator_program_is_refused(tmp_path):
    path = save(dense_program(TINY, 3, 8, 4), tmp_path / "accel.vdla")
    result = invoke(inspect_command, [path, "--source"])
    assert result.exit_code != 0
    assert "--source: an accelerator program holds instructions, not source code" in \
        result.stderr
