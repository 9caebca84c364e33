"""The benchmarks' coverage of the presets: a new preset cannot be left out of them unnoticed."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


from vdla.hw.boards.table import BOARDS
from vdla.hw.config import PRESETS

REPO = Path(__file__).resolve().parent.parent


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark",
                                                  REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # worker processes find its functions by module name
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


def test_gate_programs_in_worker_processes_report_what_one_process_does(monkeypatch):
    """`run_all` (``--jobs``): the same failing seeds in 1 and 3 processes, with fsim
    standing in for the gates; a wrong final image is a failure of its seed, and only then."""
    from vdla.sim.backends import get_backend
    netlist = _script("netlist")
    config, bad = PRESETS["tiny"], {3, 7}

    class Gates:
        """fsim, but the final DRAM image of the seeds in ``bad`` has one byte flipped."""
        seed = None

        def __init__(self):
            self.fsim = get_backend("fsim", config)

        def run(self, image, offset, count):
            result = self.fsim.run(image, offset, count)
            image[0] ^= Gates.seed in bad
            return result

    def generate(config, seed):   # tells the fake gates which seed they run
        Gates.seed = seed
        return real_generate(config, seed)
    real_generate = netlist.generate
    monkeypatch.setattr(netlist, "get_backend", lambda kind, config, **options:
                        get_backend("fsim", config) if kind == "fsim" else Gates())
    monkeypatch.setattr(netlist, "generate", generate)
    monkeypatch.setattr(netlist, "CHUNK", 2)
    monkeypatch.setattr(netlist, "_BACKENDS", {})
    build = types.SimpleNamespace(key="fake")
    progress = []
    one = netlist.run_all(config, build, range(1, 10), jobs=1,
                          on_progress=lambda failures, cycles, run: progress.append(
                              (run, [failure["seed"] for failure in failures])))
    assert progress == [(2, []), (4, [3]), (6, [3]), (8, [3, 7]), (9, [3, 7])]
    assert [failure["seed"] for failure in one[0]] == sorted(bad)
    assert all(failure["difference"].startswith("1 byte(s) differ") for failure in one[0])
    assert netlist.run_all(config, build, range(1, 10), jobs=3) == one
    assert netlist.run_all(config, build, range(8, 12), jobs=2)[0] == []
