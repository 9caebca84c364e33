"""The reset on the GEMM unit: a tile's first GEMMs overwrite its accumulators.

`compiler.accel.lower` gives each tile a reset stage that zeroes its
accumulators on the ALU before the first reduction chunk adds into them. Beside
a REQUANT that reads the bias, that reset is a third of the ALU's work per
accumulator entry, and a layer with little reduction per entry (a 1x1 conv
over few channel blocks) is then ALU-bound. GEMM_OVERWRITE (`hw.isa`) writes
``acc = product`` instead of adding, so where the tile's first write to every
entry is such a GEMM the reset is dead. Where `compiler.accel.cost.reset_on_gemm`
estimates that this saves cycles, this pass, per tile:

* with a residual, makes the residual GEMM (``acc = r << j``, every entry once,
  already the first write) GEMM_OVERWRITE;
* otherwise splits the first chunk's GEMM nest at its reduction loops (those
  the acc index does not depend on: channel blocks, kernel rows and columns)
  into the first step, every reduction variable 0, as GEMM_OVERWRITE, then the
  rest as boxes: for reduction loop ``r_i``, the earlier ones at 0, ``r_i`` from 1
  and the later ones whole (one more nest per reduction loop longer than 1);

and drops the ALU reset. The sums are integer and wrap, so the new order gives
the same accumulators. A tile whose first GEMMs do not write exactly the
entries its reset zeroes, each once per step, keeps its reset.

It runs after the thread pass (whose rebuilt statements it reads) and before
uop folding, which emits GEMM_OVERWRITE for an `ir.Gemm` with ``overwrite``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vdla.compiler.accel import ir
from vdla.compiler.accel.cost import reset_on_gemm

__all__ = ["gemm_reset", "first_step_split"]


def gemm_reset(function: ir.Function, enabled: bool | None = None) -> ir.Function:
    """Fold each tile's ALU reset into its first GEMMs (in place; see the module doc).

    ``enabled``: None asks the cost model (`compiler.accel.cost.reset_on_gemm`);
    True or False forces the choice. Records ``{"tiles", "kept"}`` in
    ``function.stats["gemm_reset"]``.
    """
    if enabled is None:
        enabled = reset_on_gemm(function.plan)
    stats = {"tiles": 0, "kept": 0}
    function.stats["gemm_reset"] = stats
    if not enabled:
        return function
    memo: dict[int, tuple] = {}
    for tile in function.tiles:
        if tile.reset is None or not tile.steps:
            continue
        if _fold(tile, memo):
            stats["tiles"] += 1
        else:
            stats["kept"] += 1
    return function


def _fold(tile: ir.Tile, memo: dict) -> bool:
    """Fold one tile's reset; False (the tile unchanged) where its GEMMs cannot take it."""
    reset, *rest = tile.reset.body
    if not _is_reset(reset):
        return False
    zeroed = _entries(reset)
    if rest:    # a residual's GEMM (and shift) follow the reset: the GEMM writes first
        gemm = rest[0]
        loops, leaf = ir.loop_nest(gemm)
        if not isinstance(leaf, ir.Gemm) or leaf.reset or not _writes_once(gemm, zeroed):
            return False
        tile.reset.body = [_cached(memo, gemm, lambda: [_overwriting(gemm)])[0]] + rest[1:]
        return True
    compute = tile.steps[0][1]
    if len(compute.body) != 1:
        return False
    nest = compute.body[0]
    loops, leaf = ir.loop_nest(nest)
    if not isinstance(leaf, ir.Gemm) or leaf.reset:
        return False
    split = _cached(memo, nest, lambda: first_step_split(nest))
    if not _writes_once(split[0], zeroed):
        return False
    compute.body = list(split)
    tile.reset.body = []
    return True


def _cached(memo: dict, stmt, build):
    # Tiles share identical nests; each shared nest is rewritten once.
    if id(stmt) not in memo:
        memo[id(stmt)] = (stmt, build())
    return memo[id(stmt)][1]


def _is_reset(stmt) -> bool:
    _, leaf = ir.loop_nest(stmt)
    return isinstance(leaf, ir.Alu) and leaf.reset


def _entries(stmt) -> np.ndarray:
    """The acc indices a nest's leaf writes, in iteration order."""
    loops, leaf = ir.loop_nest(stmt)
    return ir.enumerate_affine(leaf.dst.index, [(loop.var, loop.extent) for loop in loops]
                               ).reshape(-1)


def _writes_once(stmt, zeroed: np.ndarray) -> bool:
    """Whether a nest writes each entry ``zeroed`` holds exactly once, and no other."""
    written = _entries(stmt)
    return (len(written) == len(zeroed) == len(np.unique(written))
            and np.array_equal(np.sort(written), np.sort(zeroed)))


def _overwriting(stmt):
    loops, leaf = ir.loop_nest(stmt)
    return ir.nest([(loop.var, loop.extent) for loop in loops],
                   dataclasses.replace(leaf, overwrite=True))


def first_step_split(stmt) -> list:
    """A GEMM nest as its reduction's first step (GEMM_OVERWRITE) and the rest (GEMMs).

    The reduction loops are those the acc index does not depend on. Returns the
    first-step nest (every reduction loop of extent 1, at 0) followed by one nest
    per reduction loop ``r`` longer than 1: the reduction loops before ``r`` at 0,
    ``r`` over ``1 .. extent - 1`` (its indices advanced by one step), those after it
    whole. Together they run every micro-op of ``stmt`` once.
    """
    loops, leaf = ir.loop_nest(stmt)
    reduction = [loop.var for loop in loops if loop.extent > 1 and not leaf.dst.index.coef(loop.var)]
    extents = [(loop.var, 1 if loop.var in reduction else loop.extent) for loop in loops]
    nests = [ir.nest(extents, dataclasses.replace(leaf, overwrite=True))]
    for position, var in enumerate(reduction):
        shape = []
        for loop in loops:
            if loop.var in reduction[:position]:
                shape.append((loop.var, 1))
            elif loop.var == var:
                shape.append((loop.var, loop.extent - 1))
            else:
                shape.append((loop.var, loop.extent))
        step = dataclasses.replace(
            leaf, src=_advance(leaf.src, var), wgt=_advance(leaf.wgt, var))
        nests.append(ir.nest(shape, step))
    return nests


def _advance(access: ir.Access, var: str) -> ir.Access:
    """``access`` with ``var`` one step on (``var`` then counts from 1)."""
    return dataclasses.replace(access, index=access.index + access.index.coef(var))
