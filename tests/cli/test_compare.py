"""``vdla compare``: its options' errors (the measuring itself: tests/bench/test_compare.py)."""

from __future__ import annotations

from click.testing import CliRunner

from vdla.cli.compare import command as compare_command


def test_cli_rejects_unknown_targets():
    result = CliRunner().invoke(compare_command, ["resnet18", "--targets", "accel,tpu"])
    assert result.exit_code != 0
    assert "--targets 'accel,tpu': expected a comma-separated list of accel, cpu, gpu" in result.output
