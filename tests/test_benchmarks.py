"""The benchmarks' coverage of the presets: a new preset cannot be left out of them unnoticed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from vdla.hw.board_table import BOARDS
from vdla.hw.config import PRESETS

REPO = Path(__file__).resolve().parent.parent


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark",
                                                  REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gate_level_plan_covers_every_shipped_preset_on_its_family():
    """benchmarks/netlist.py (issue 21): every preset is gate-checked or named as not shipped,
    and every board's preset on its board's family."""
    netlist = _script("netlist")
    planned = [name for name, _ in netlist.PLAN]
    assert len(planned) == len(set(planned))
    assert set(planned) | set(netlist.NOT_SHIPPED) == set(PRESETS)
    assert not set(planned) & set(netlist.NOT_SHIPPED)
    assert not {(board.preset, board.target) for board in BOARDS.values()} - set(netlist.PLAN)
    assert {target for _, target in netlist.PLAN} <= {"ice40", "ecp5"}
