"""The RTL and board-sim model caches verify their entries and heal: a damaged library is
rebuilt before anything loads it, and tool caches follow ``VDLA_CACHE_DIR``. Damage is done
to the files' contents, so this holds for every user, root included."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from tests.foreign_library import foreign_library
from vdla.cache import cache_root, entry_problem, tool_cache_environment
from vdla.sim.rtl import RtlModel
from vdla.sim.rtl.build import RtlBuildError, build_model

pytestmark = pytest.mark.rtl


def _truncate(library, foreign):
    library.write_bytes(library.read_bytes()[:4096])


def _zero(library, foreign):   # same size, all zeros
    library.write_bytes(bytes(library.stat().st_size))


def _replace(library, foreign):   # another valid library, with code in its constructor
    library.write_bytes(foreign.read_bytes())


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory, tiny, standin_verilog_tiny):
    """A cache root holding the stand-in model, built once; each test damages a copy."""
    root = tmp_path_factory.mktemp("built-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VDLA_CACHE_DIR", str(root))
        build_model(tiny, verilog=standin_verilog_tiny)
    return root


# The generic damage cases (a lost file or manifest, ...) are tested once in
# tests/test_cache.py; these are the ones that crashed or ran foreign code.
@pytest.mark.parametrize("damage, problem", [
    (_truncate, r"libvdla_rtl.so has 4096 bytes, \d+ were built"),
    (_zero, r"libvdla_rtl.so does not match the checksum recorded at build time"),
    (_replace, r"libvdla_rtl.so has \d+ bytes, \d+ were built"),
], ids=["truncate", "zero", "replace"])
def test_a_damaged_model_is_found_and_rebuilt(tmp_path, monkeypatch, built_cache, tiny,
                                              standin_verilog_tiny, damage, problem):
    shutil.copytree(built_cache, tmp_path / "cache", symlinks=True)
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path / "cache"))
    foreign, marker = foreign_library(tmp_path)
    first = build_model(tiny, verilog=standin_verilog_tiny)
    assert first.cached
    assert entry_problem(first.directory) is None
    damage(first.library, foreign)
    assert re.search(problem, entry_problem(first.directory))
    with pytest.raises(RtlBuildError, match=rf"the RTL model {re.escape(str(first.directory))} "
                                            rf"changed after it was built \({problem}\); "
                                            rf"build_model builds it again"):
        RtlModel(first)   # a ModelBuild from before the damage is checked again at load
    told = []
    healed = build_model(tiny, verilog=standin_verilog_tiny, progress=told.append)
    assert not healed.cached and healed.directory == first.directory
    assert entry_problem(healed.directory) is None
    assert re.fullmatch(rf"the cached RTL model {re.escape(str(first.directory))} is damaged "
                        rf"\({problem}\); rebuilding it", told[0])
    with RtlModel(healed) as model:   # loads, rather than SIGBUS, a loader error or other code
        assert model.bus_bytes == tiny.dram_bus_bytes
    assert not marker.exists()
    assert not list((tmp_path / "cache" / "rtl").glob(".discard-*"))


BOARD_STANDIN = """module vdla_board(input clk, input rst, input uart_rx, output uart_tx);
  assign uart_tx = uart_rx;   // a loopback: the host reads back what it writes
endmodule
"""


def test_a_damaged_board_model_is_rebuilt(tmp_path, monkeypatch, capsys, tiny):
    """The board simulation's library (a loopback stand-in for the board top) is rebuilt
    when replaced by another library, whose code never runs."""
    from vdla.hw.boards import top as board_top
    from vdla.sim.board_sim import SimulatedBoard, build_board_model
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(board_top, "board_verilog", lambda *args: BOARD_STANDIN)
    foreign, marker = foreign_library(tmp_path)
    library = build_board_model(tiny, 4096, 4)
    _replace(library, foreign)
    board = SimulatedBoard(tiny, 4096, clocks_per_bit=4, timeout_cycles=10_000)
    assert "is damaged (libvdla_board.so" in capsys.readouterr().err
    board.write(b"vdla")
    assert board.read(4) == b"vdla"
    board.close()
    assert not marker.exists()


def test_tool_caches_follow_vdla_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/else")
    with tool_cache_environment():
        assert os.environ["XDG_CACHE_HOME"] == str(tmp_path / "c" / "tools")
    assert os.environ["XDG_CACHE_HOME"] == "/somewhere/else"


def test_an_unusable_home_cache_gets_a_writable_default(tmp_path, monkeypatch):
    # ``~/.cache`` is a file, not a folder: no user, root included, can create the cache in it.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cache").write_text("not a folder")
    monkeypatch.delenv("VDLA_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    root = cache_root()
    assert not str(root).startswith(str(home)) and root.name == f"vdla-cache-{os.getuid()}"
    with tool_cache_environment():
        assert os.environ["XDG_CACHE_HOME"] == str(root / "tools")
