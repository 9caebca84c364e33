"""``vdla inspect``: the text and JSON views of a program file, and damaged files."""

from __future__ import annotations

import json

from vdla.cli.inspect import command as inspect_command
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
