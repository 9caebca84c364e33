"""``vdla config``: presets listed, configs printed as the JSON ``--config`` reads."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vdla.cli.main import cli
from vdla.hw.config import PRESETS, HwConfig


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_list_names_every_preset_with_its_shape():
    result = invoke("config", "list")
    assert result.exit_code == 0, result.output
    for name, config in PRESETS.items():
        shape = f"{config.batch}x{config.block_in}x{config.block_out} GEMM"
        line = next(line for line in result.stdout.splitlines() if line.startswith(name + " "))
        assert shape in line and f"{config.dram_bus_bits}-bit DRAM port" in line


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_show_prints_a_file_that_reads_back_as_the_preset(name, tmp_path):
    result = invoke("config", "show", name)
    assert result.exit_code == 0, result.output
    path = tmp_path / f"{name}.json"
    path.write_text(result.stdout)
    assert HwConfig.from_json(path.read_text()) == PRESETS[name]
    # ... and that file is accepted wherever --config is.
    shown = invoke("config", "show", path)
    assert json.loads(shown.stdout) == json.loads(result.stdout)


def test_a_partial_file_is_completed_with_the_defaults(tmp_path):
    path = tmp_path / "fast.json"
    path.write_text(json.dumps({"dram_read_latency": 12, "dram_bus_bits": 128, "name": "fast"}))
    result = invoke("config", "show", path)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    # `memory` left out is the field's default, the idealised port (`default` names axi4).
    assert shown == dict(PRESETS["default"].to_dict(), dram_read_latency=12, dram_bus_bits=128,
                         memory="ideal", name="fast")


def test_derived_figures(tmp_path):
    result = invoke("config", "show", "odd", "--derived")
    assert result.exit_code == 0, result.output
    derived = json.loads(result.stdout)["derived"]
    odd = PRESETS["odd"]
    # batch 2 x block_in 8 int8 = 16-byte input rows; 4 x 8 int8 weights = 32 bytes.
    assert derived["sram_depth"]["inp"] == odd.inp_buffer_bytes // 16
    assert derived["sram_depth"]["wgt"] == odd.wgt_buffer_bytes // 32
    assert derived["sram_depth"]["acc"] == odd.acc_buffer_bytes // (2 * 4 * 4)
    assert derived["macs_per_cycle"] == 2 * 8 * 4
    assert derived["hash"] == odd.hash


@pytest.mark.parametrize("content, message", [
    ("{", "config {path}: config is not valid JSON"),
    ('{"block_in": 12}', "config {path}: block_in: must be a power of two, got 12"),
    ('{"blocks": 2}', "config {path}: unknown config field(s): blocks"),
    ("[1, 2]", "config {path}: a config must be a JSON object, got list"),
])
def test_bad_files_are_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = invoke("config", "show", path)
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message.format(path=path) in lines[0], result.stderr


def test_unknown_preset_names_the_presets():
    result = invoke("config", "show", "huge")
    assert result.exit_code != 0
    assert f"config huge: no such preset ({', '.join(PRESETS)}) or file" in result.stderr
