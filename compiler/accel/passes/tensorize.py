"""Tensorization: the innermost GEMM block of a MAC nest becomes one GEMM intrinsic.

A lowered convolution ends in three lane loops around a scalar `ir.Mac`::

    for eb in batch: for eo in block_out: for ei in block_in:
        acc[dst][eb, eo] += inp[src][eb, ei] * wgt[w][eo, ei]

which is exactly one ``batch x block_in`` by ``block_in x block_out`` product
on whole SRAM entries. The pass checks that pattern (lane extents equal the
config's block sizes, entry indices independent of the lanes, lanes used in the
roles the GEMM core wires them) and replaces the three loops and the MAC by
``ir.Gemm(dst, src, w)``. A MAC nest that does not match is an error: the
accelerator has no scalar path.
"""

from __future__ import annotations

from vdla.compiler.accel import ir
from vdla.compiler.errors import CompileError

__all__ = ["tensorize", "tensorize_stmt"]


def tensorize(function: ir.Function) -> ir.Function:
    """Tensorize every MAC nest of every compute stage (in place)."""
    count = 0
    done = {}       # id(nest) -> (nest, tensorized): tiles share identical nests
    for stage in function.all_stages():
        for position, stmt in enumerate(stage.body):
            if _has_mac(stmt):
                if id(stmt) not in done:
                    done[id(stmt)] = (stmt, tensorize_stmt(stmt, function.config))
                stage.body[position] = done[id(stmt)][1]
                count += 1
    function.stats["tensorize"] = {"gemm_nests": count}
    return function


def _has_mac(stmt) -> bool:
    while isinstance(stmt, ir.Loop):
        if len(stmt.body) != 1:
            return any(_has_mac(s) for s in stmt.body)
        stmt = stmt.body[0]
    return isinstance(stmt, ir.Mac)


def tensorize_stmt(stmt, config):
    """Tensorize one perfect MAC nest; returns the nest with a `ir.Gemm` leaf.

    Raises
    ------
    CompileError
        If the innermost loops are not one GEMM block of ``config``.
    """
    loops, leaf = ir.loop_nest(stmt)
    if not isinstance(leaf, ir.Mac):
        raise CompileError(f"tensorize: expected a MAC leaf, found {type(leaf).__name__}")
    if len(loops) < 3:
        raise CompileError("tensorize: a MAC nest needs three lane loops")
    lane_loops = loops[-3:]
    batch_lane, out_lane = leaf.acc.lanes
    if leaf.inp.lanes[0] != batch_lane or leaf.wgt.lanes[0] != out_lane \
            or leaf.inp.lanes[1] != leaf.wgt.lanes[1]:
        raise CompileError("tensorize: lanes are not used as acc[b, o] += inp[b, i] * wgt[o, i]")
    in_lane = leaf.inp.lanes[1]
    expected = {batch_lane: config.batch, out_lane: config.block_out, in_lane: config.block_in}
    found = {loop.var: loop.extent for loop in lane_loops}
    if found != expected:
        raise CompileError(f"tensorize: innermost loops {found} are not the GEMM block "
                           f"{expected} of config {config.name!r}")
    for access in (leaf.acc, leaf.inp, leaf.wgt):
        if any(access.index.coef(lane) for lane in expected):
            raise CompileError(f"tensorize: entry index {access.index} of {access.buffer.name} "
                               "depends on a lane variable")
    gemm = ir.Gemm(ir.Access(leaf.acc.buffer, leaf.acc.index),
                   ir.Access(leaf.inp.buffer, leaf.inp.index),
                   ir.Access(leaf.wgt.buffer, leaf.wgt.index))
    return ir.nest([(loop.var, loop.extent) for loop in loops[:-3]], gemm)
