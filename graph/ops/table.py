"""The supported-operator table (``docs/operators.md``), generated from the registry.

Usage::

    python -m vdla.graph.ops.table [-o docs/operators.md]

Two tables, both read from `graph.ops.OPS`: each ONNX operator vdla imports,
with the graph operator it becomes and where that runs; and each integer
operator a network program holds (what quantisation makes), with where it
runs and why. How many of ONNX's own node cases each ONNX operator passes is
in ``docs/onnx_conformance.md``.
"""

from __future__ import annotations

import argparse
import sys

from vdla.graph.ops import OPS, ONNX

__all__ = ["markdown", "main"]

# What each place means to a reader of the table.
_WHERE = {"layer": "accelerator (or the cpu target's C)", "host": "host (numpy)",
          "float": "replaced by quantisation", "import": "folded at import"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """The tables of ``docs/operators.md``, one row per ONNX operator and per integer operator."""
    lines = ["# Supported operators", "",
             "Generated from the operator registry (`graph/ops/`) by "
             "`python -m vdla.graph.ops.table -o docs/operators.md`; a test checks it is current.",
             "How many of ONNX's own node test cases each operator passes, and why the others "
             "are refused, is in [onnx_conformance.md](onnx_conformance.md). A layer the "
             "accelerator refuses (its shape or limits) runs as the cpu target's C instead "
             "(`vdla inspect` says which and why; `vdla compile --no-cpu-fallback` refuses).", "",
             "## ONNX operators", "",
             "The vdla operator is the one that declares the import; its converter may "
             "write more nodes (ConvTranspose: an `insert_zeros`, then a conv layer on the "
             "accelerator).", "",
             "| ONNX operator | vdla operator | runs | why |", "|---|---|---|---|"]
    for name in sorted(ONNX, key=str.lower):
        op = ONNX[name][0]
        lines.append(f"| {name} | `{op.name}` | {_WHERE[op.place]} | {_cell(op.why)} |")
    lines += ["", "## Operators of an integer network", "",
              "What a network program holds after quantisation (`vdla inspect` lists them).", "",
              "| vdla operator | runs | why |", "|---|---|---|"]
    for op in sorted(OPS.values(), key=lambda op: op.name):
        if op.place in ("layer", "host"):
            lines.append(f"| `{op.name}` | {_WHERE[op.place]} | {_cell(op.why)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vdla.graph.ops.table",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", help="write the table to this file")
    args = parser.parse_args(argv)
    text = markdown()
    if args.output:
        from vdla.files import write_atomic
        write_atomic(args.output, lambda handle: handle.write(text.encode()))
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
