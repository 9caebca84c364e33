"""`graph.ops.table`: docs/operators.md is the registry's table, and lists every operator."""

from pathlib import Path

from vdla.graph.ops import OPS, ONNX
from vdla.graph.ops.table import main, markdown

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operators.md"


def test_docs_operators_md_is_generated_from_the_registry():
    assert DOCS.read_text() == markdown(), \
        "docs/operators.md is stale: run `python -m vdla.graph.ops.table -o docs/operators.md`"


def test_every_onnx_and_integer_operator_has_a_row():
    rows = [line.split(" | ")[0].strip("| `") for line in markdown().splitlines()
            if line.startswith("| ") and not line.startswith("| ONNX") and
            not line.startswith("| vdla")]
    integer = [name for name, op in OPS.items() if op.place in ("layer", "host")]
    assert sorted(rows) == sorted([*ONNX, *integer])


def test_the_table_is_written_to_a_file(tmp_path, capsys):
    target = tmp_path / "operators.md"
    assert main(["-o", str(target)]) == 0
    assert target.read_text() == markdown()
    assert capsys.readouterr().out == f"wrote {target}\n"
