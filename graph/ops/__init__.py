"""The operator registry: every graph operator declared once (`Op`), one module per family.

Each module lists its operators (``OPS``): their ONNX import and attribute
checks, numpy semantics (float and int8), quantisation rule, where they run
and why, network-file attributes and shape rule, and QDQ export. The tables
the rest of vdla reads are views of this one:

- `vdla.frontend.onnx.CONVERTERS` (the ONNX operators imported) is `ONNX`;
- `graph.kernels.KERNELS` (numpy semantics) maps each operator to ``kernel``;
- `graph.quantize` runs each float node's ``quantize`` rule;
- `graph.placement.LAYER_OPS` are the ``layer`` operators, the rest run on the host;
- `graph.network_file.NODE_ATTRS`, ``NODE_VARIANTS`` and ``HOST_SHAPES``
  come from ``attrs``, ``variants``, ``arity``, ``shape`` and ``dtype``;
- `graph.layout` asks ``blocked``, `graph.export` calls ``export``.

Adding an operator is adding an `Op` to a module here (docs/architecture.md,
"How to add an operator").
"""

from __future__ import annotations

from typing import Callable

from vdla.graph.ops import activations, add, arith, batchnorm, constant, layers, movement, pool
from vdla.graph.ops import elementwise
from vdla.graph.ops import conv_transpose
from vdla.graph.ops import im2col, qdq, shapes, slicing, softmax
from vdla.graph.ops import lrn, reduce, resize
from vdla.graph.ops import matmul, transformer
from vdla.graph.ops import recurrent
from vdla.graph.ops.base import PLACES, Op

__all__ = ["Op", "OPS", "ONNX", "PLACES", "layer_ops"]

_MODULES = (layers, batchnorm, add, arith, activations, pool, movement, slicing, softmax, qdq,
            constant, shapes, elementwise, conv_transpose, reduce, resize, lrn, im2col,
            recurrent, matmul, transformer)


def _collect() -> tuple[dict[str, Op], dict[str, tuple[Op, Callable]]]:
    ops: dict[str, Op] = {}
    onnx: dict[str, tuple[Op, Callable]] = {}
    for module in _MODULES:
        for op in module.OPS:
            if op.name in ops:
                raise ValueError(f"operator {op.name!r} is declared twice")
            ops[op.name] = op
            for name, convert in op.onnx.items():
                if name in onnx:
                    raise ValueError(f"ONNX operator {name} is imported by both "
                                     f"{onnx[name][0].name!r} and {op.name!r}")
                onnx[name] = (op, convert)
    return ops, onnx


# Every operator by name; every ONNX operator imported, with its operator and converter.
OPS, ONNX = _collect()


def layer_ops() -> tuple[str, ...]:
    """The operators that are layers (the accelerator's, or the cpu target's C)."""
    return tuple(name for name, op in OPS.items() if op.place == "layer")
