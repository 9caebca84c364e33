"""``vdla hw model``: the built model lands in a directory with its Verilog and manifest."""

from __future__ import annotations

import ctypes
import json

import pytest
from click.testing import CliRunner

from vdla.cli.main import cli

pytestmark = pytest.mark.rtl


def test_hw_model_writes_library_verilog_manifest(tmp_path, tiny, chip_build):
    out = tmp_path / "model"
    result = CliRunner().invoke(cli, ["hw", "model", "--config", "tiny", "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["cached"] is True  # the session fixture built it already
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config_hash"] == tiny.hash and manifest["model_key"] == chip_build.key
    # the Verilog the model was built from, not just any text
    assert (out / manifest["verilog"]).read_text() == chip_build.verilog.read_text()
    library = ctypes.CDLL(str(out / manifest["library"]))
    library.vdla_bus_bits.restype = ctypes.c_uint32
    assert library.vdla_bus_bits() == tiny.dram_bus_bits
    for name in manifest["c_abi"]:
        assert hasattr(library, name), name


def test_hw_model_rejects_unknown_config(tmp_path):
    result = CliRunner().invoke(cli, ["hw", "model", "--config", "nosuch", "-o", str(tmp_path)])
    assert result.exit_code != 0 and "nosuch" in result.output
