"""`compiler.accel.pipeline`: the declared pass pipeline, its documented names, a dump after each."""

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from vdla.cli.main import cli
from vdla.compiler import Conv2d, Schedule, compile_op
from vdla.compiler.accel.dump import dump_function
from vdla.compiler.accel.pipeline import PASS_NAMES, PIPELINE
from vdla.hw.config import PRESETS

ARCHITECTURE = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"
# Two threads and two chunks: every pass has something to change.
OP = Conv2d(2, 9, 4, 5, 5, kernel=(2, 3), padding=(1, 1), shift=5, relu=True)
SCHEDULE = Schedule(tile_h=3, tile_w=5, tile_k=1, tile_c=1, virtual_threads=2)
LAYER = ["conv2d", "--batch", "2", "--in-channels", "9", "--out-channels", "4", "--height", "5",
         "--width", "5", "--kernel", "2x3", "--pad", "1", "--shift", "5", "--relu",
         "--config", "tiny"]


def documented_passes() -> list[str]:
    text = ARCHITECTURE.read_text()
    match = re.search(r"In order\s+\(`compiler\.accel\.pipeline\.PIPELINE`\):(.*?)\.\s", text, re.S)
    assert match, "docs/architecture.md no longer lists the pass pipeline"
    return re.findall(r"`(\w+)`", match.group(1))


def test_the_pipeline_is_the_documented_one():
    assert list(PASS_NAMES) == documented_passes()
    assert PASS_NAMES == tuple(step.name for step in PIPELINE)
    assert len(set(PASS_NAMES)) == len(PASS_NAMES)


def dumps(**options) -> tuple[dict[str, str], object]:
    texts = {}
    program = compile_op(OP, PRESETS["tiny"], SCHEDULE,
                         dump=lambda name, function: texts.setdefault(
                             name, dump_function(function, name)), **options)
    return texts, program


def test_every_pass_is_dumped_after_it_runs_and_changes_the_ir():
    texts, program = dumps()
    assert list(texts) == list(PASS_NAMES)
    previous = None
    for name, text in texts.items():
        assert text.splitlines()[0] == f"# {OP.describe()} after {name}"
        assert text != previous, f"the dump after {name} equals the one before it"
        previous = text
    # Scalar MACs before tensorize's GEMMs, instructions from dma on, one stream at the end.
    assert "gemm " in texts["tensorize"] and "mac " not in texts["tensorize"]
    assert "LOAD INP" in texts["dma"] and "copy load" not in texts["dma"]
    final = texts["mark_overlap"]
    assert f"# {len(program.instructions)} instructions" in final
    assert final.count("FINISH") == 1
    assert "overlap=1" in final and "overlap=1" not in texts["latency_hiding"]


def test_a_serialised_compile_marks_no_overlap():
    texts, program = dumps(latency_hiding=False)
    assert texts["mark_overlap"].replace("after mark_overlap", "after latency_hiding") == \
        texts["latency_hiding"]
    assert not any(getattr(insn, "overlap", False) for insn in program.instructions)


@pytest.mark.parametrize("name", PASS_NAMES)
def test_vdla_compile_dumps_after_each_pass(tmp_path, name):
    dump = tmp_path / "ir.txt"
    result = CliRunner().invoke(cli, ["compile", *LAYER, "--dump", str(dump), "--dump-after",
                                      name, "-o", str(tmp_path / "x.vdla")])
    assert result.exit_code == 0, result.output
    assert dump.read_text().splitlines()[0] == f"# {OP.describe()} after {name}"


@pytest.mark.parametrize("extra, message", [
    ([], "Error: --dump-after dma: pass --dump FILE too (where the IR is written)"),
    (["--dump", "d.txt", "--target", "cpu"],
     "Error: --dump-after names an accelerator pass; --target cpu runs none"),
])
def test_dump_after_errors_are_one_line(tmp_path, extra, message):
    result = CliRunner().invoke(cli, ["compile", *LAYER, "--dump-after", "dma", *extra,
                                      "-o", str(tmp_path / "x.vdla")])
    assert result.exit_code != 0
    assert result.output.strip().splitlines()[-1] == message


def test_an_unknown_pass_name_lists_the_pipeline(tmp_path):
    result = CliRunner().invoke(cli, ["compile", *LAYER, "--dump-after", "folding",
                                      "-o", str(tmp_path / "x.vdla")])
    assert result.exit_code != 0
    assert "'folding' is not one of 'tensorize', 'epilogue'," in result.output
