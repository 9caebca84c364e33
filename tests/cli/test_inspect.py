"""``vdla inspect``: the text and JSON views of a program file, and damaged files."""

from __future__ import annotations

import json
import re

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


@pytest.fixture(scope="module")
def network_path(tmp_path_factory):
    """A compiled network file: three accelerator layers, one cpu layer, host nodes."""
    from tests.graph.test_network_file import _compile
    from vdla.graph.network_file import save as save_network
    return save_network(_compile(), tmp_path_factory.mktemp("net") / "net.vdla")


def _table(stdout: str) -> dict[str, list[str]]:
    """The node table's rows by node name."""
    lines = stdout.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("est. ms"))
    return {line.split()[0]: line.split() for line in lines[2:end]}


def test_inspect_network_times_estimated_cycles_at_the_clock(network_path, monkeypatch):
    import vdla.hw.synth.clock as synth_clock
    from vdla.graph.network_file import load as load_network
    monkeypatch.setattr(synth_clock, "known_fmax", lambda config: None)
    estimates = load_network(network_path).metadata["estimated_cycles"]
    result = invoke(inspect_command, [network_path, "--clock-mhz", 80])
    assert result.exit_code == 0, result.stderr
    rows = _table(result.stdout)
    for name, cycles in estimates.items():
        assert rows[name][-2:] == [f"{cycles:,}", f"{cycles / 80e3:.3f}"]
    assert rows["pool1"][-2:] == ["-", "-"] and rows["fc"][-3:] == ["cpu", "-", "-"]
    assert "est. ms at 80 MHz (--clock-mhz)" in result.stdout.splitlines()
    report = json.loads(invoke(inspect_command, [network_path, "--clock-mhz", 80, "--json"])
                        .stdout)
    assert (report["clock_mhz"], report["clock"]) == (80.0, "--clock-mhz")
    assert {row["name"]: row["estimated_ms"] for row in report["nodes"]
            if row["estimated_ms"] is not None} == {
        name: round(cycles / 80e3, 6) for name, cycles in estimates.items()}
    # Without a clock the column stays empty and the report says why.
    result = invoke(inspect_command, [network_path])
    assert all(row[-1] == "-" for row in _table(result.stdout).values())
    assert ("est. ms: none without a clock (pass --clock-mhz; no Fmax is known for config "
            "'tiny', vdla hw synth finds it)") in result.stdout.splitlines()
    assert json.loads(invoke(inspect_command, [network_path, "--json"]).stdout)["clock"] is None


@pytest.mark.parametrize("flag, message", [
    ("--source", r"--source: .*net\.vdla is a network file; --source applies to a single "
                 r"program \(the C or CUDA C of a cpu or gpu program\)$"),
    ("--all-uops", r"--all-uops: .*net\.vdla is a network file; --all-uops applies to a single "
                   r"program \(the micro-ops of an accelerator program\)$"),
])
def test_single_program_options_on_a_network_are_refused(network_path, flag, message):
    result = invoke(inspect_command, [network_path, flag])
    assert result.exit_code == 1 and result.stdout == ""
    assert re.fullmatch(f"Error: {message}", result.stderr.strip())


def test_a_clock_for_a_single_program_is_refused(layer):
    path, *_ = layer
    result = invoke(inspect_command, [path, "--clock-mhz", 100])
    assert result.exit_code == 1
    assert re.fullmatch(r"Error: --clock-mhz: .*dense\.vdla is a single program, whose "
                        r"inspection shows no cycles; the clock turns a network file's "
                        r"estimated cycles into time", result.stderr.strip())


def test_text_from_a_program_file_reaches_the_terminal_escaped(tmp_path):
    """A name, role or metadata key holding escape sequences and newlines is shown, escaped,
    on its own line; nothing the terminal would obey gets through."""
    import dataclasses
    program = dense_program(TINY, 3, 8, 4)
    program.tensors[-1] = dataclasses.replace(program.tensors[-1], name="out\x1b]0;owned\x07\nX",
                                              role="output\x1b[2J")
    program.metadata["key\x1b[31m\n"] = "value\x1b"
    path = save(program, tmp_path / "evil.vdla")
    result = invoke(inspect_command, [path])
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    lines = result.stdout.splitlines()
    assert any(line.split()[3:5] == ["out\\x1b]0;owned\\x07\\nX", "output\\x1b[2J"]
               for line in lines)
    assert '  key\\x1b[31m\\n: "value\\u001b"' in lines


def test_a_network_with_a_control_character_in_a_name_is_refused_in_one_line(network_path,
                                                                              tmp_path):
    from tests.graph.test_network_file import _rename_node, _resign
    hostile = tmp_path / "hostile.vdla"
    hostile.write_bytes(_resign(network_path.read_bytes(),
                                lambda h: _rename_node(h, "pool1", "p\x1b]0;owned\x07\nX")))
    result = invoke(inspect_command, [hostile])
    assert result.exit_code == 1 and result.stdout == ""
    assert re.fullmatch(r"Error: .*hostile\.vdla: node name 'p\\x1b\]0;owned\\x07\\nX' is not "
                        r"a name \(a non-empty string of printable characters\)",
                        result.stderr.strip())
