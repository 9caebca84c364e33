"""The DRAM image a program occupies and the DRAM traffic a run makes are named apart."""

from __future__ import annotations

import json

from click.testing import CliRunner

from vdla.cli.main import cli
from vdla.runtime.program_file import load


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_compile_and_inspect_name_the_image(tmp_path):
    path = tmp_path / "fc.vdla"
    args = ["compile", "dense", "--batch", 3, "--in-features", 37, "--out-features", 19,
            "--bias", "--config", "tiny", "-o", path]
    text = invoke(*args)
    assert text.exit_code == 0, text.output
    program = load(path)
    # Instructions, micro-ops and the packed tensors, each region aligned: the plan's end.
    last = max(program.tensors, key=lambda region: region.dram_offset)
    assert program.dram_bytes >= last.dram_offset + last.nbytes(program.config)
    assert (f"DRAM image: {program.dram_bytes:,} bytes (the memory plan, not traffic)"
            in text.stdout)
    summary = json.loads(invoke(*args, "--json").stdout)
    assert summary["dram_image_bytes"] == program.dram_bytes and "dram_bytes" not in summary
    inspected = invoke("inspect", path)
    assert f"DRAM plan: a {program.dram_bytes:,}-byte image (what the program occupies, not " \
           "its traffic)" in inspected.stdout
