"""Lowering: an operator and its resolved schedule become the loop-level IR.

The tile loops (in the schedule's loop order) are unrolled here, because edge
tiles differ in size and padding; everything inside a tile stays a loop nest
with affine indices. Each tile is a list of reduction steps (a load stage with
the input and weight copies, a compute stage with the scalar MAC nest), an
epilogue stage and a store stage. Each tile's SRAM buffers are laid out
row-major over the tile's own extents:

* inp: ``[batch block][channel block][input row][input column]`` (halo included)
* wgt: ``[out-channel block][channel block][kernel row][kernel column]``
* acc (and out): ``[batch block][out-channel block][output row][output column]``
"""

from __future__ import annotations

import itertools

from compiler import ir
from compiler.ir import Access, Affine, Buffer, Copy, Gemm, Mac, Stage, Tile, nest
from compiler.schedule import TilePlan

__all__ = ["lower", "tile_ranges"]


def tile_ranges(extent: int, size: int) -> list[tuple[int, int]]:
    """``(start, length)`` of each tile cutting ``extent`` into ``size`` pieces."""
    return [(start, min(size, extent - start)) for start in range(0, extent, size)]


def lower(plan: TilePlan, name: str = "layer") -> ir.Function:
    """Build the IR of a layer from its `TilePlan`.

    Parameters
    ----------
    plan : TilePlan
        A checked schedule resolved against the layer (`Schedule.check`).
    name : str
        Label of the function.
    """
    geometry, config = plan.geometry, plan.config
    blocks, tile = plan.blocks, plan.tile
    kh, kw = geometry.kernel
    sh, sw = geometry.stride
    ph, pw = geometry.padding
    slot = plan.slot_entries()
    inp = Buffer("inp_tile", "inp", slot["inp"])
    wgt = Buffer("wgt_tile", "wgt", slot["wgt"])
    acc = Buffer("acc_tile", "acc", slot["acc"])
    buffers = [inp, wgt, acc]
    if plan.bias_entries:
        buffers.append(Buffer("bias", "acc", plan.bias_entries))
    grids = {"data": (blocks["b"], blocks["c"], geometry.height, geometry.width),
             "weight": (blocks["k"], blocks["c"], kh, kw),
             "out": (blocks["b"], blocks["k"], blocks["h"], blocks["w"])}
    ranges = {axis: tile_ranges(blocks[axis], tile[axis]) for axis in "bkhwc"}
    order = plan.schedule.loop_order
    # Tiles of equal shape share their (immutable) compute nests: passes
    # rebuild statements rather than mutate them, so sharing is safe and keeps
    # lowering fast for layers with thousands of tiles.
    nests = {}
    tiles = []
    for index, choice in enumerate(itertools.product(*(ranges[a] for a in order))):
        bounds = dict(zip(order, choice))
        (b0, nb), (k0, nk), (h0, nh), (w0, nw) = (bounds[a] for a in "bkhw")
        rows, cols = (nh - 1) * sh + kh, (nw - 1) * sw + kw
        steps = []
        for chunk, (c0, nc) in enumerate(ranges["c"]):
            load = Stage("load", index, [
                Copy("load", "data", grids["data"], (b0, c0, h0 * sh - ph, w0 * sw - pw),
                     (nb, nc, rows, cols), "inp", inp),
                Copy("load", "weight", grids["weight"], (k0, c0, 0, 0), (nk, nc, kh, kw),
                     "wgt", wgt),
            ], chunk=chunk)
            body = []
            if chunk == 0:
                key = ("reset", nb, nk, nh, nw)
                if key not in nests:
                    nests[key] = _reset(acc, nb, nk, nh, nw)
                body.append(nests[key])
            key = ("mac", nb, nk, nh, nw, nc)
            if key not in nests:
                nests[key] = _mac_nest(config, inp, wgt, acc, (nb, nk, nh, nw, nc), (rows, cols),
                                       geometry)
            body.append(nests[key])
            steps.append((load, Stage("compute", index, body, chunk=chunk)))
        epilogue = Stage("compute", index, [ir.Epilogue(acc, nb, nk, nh * nw, k0)])
        store = Stage("store", index, [
            Copy("store", "out", grids["out"], (b0, k0, h0, w0), (nb, nk, nh, nw), "out", acc)])
        tiles.append(Tile(index, steps, epilogue, store))
    return ir.Function(name, config, plan, buffers, tiles)


def _reset(acc: Buffer, nb: int, nk: int, nh: int, nw: int):
    """Zero the tile's accumulators before the first reduction chunk."""
    b, k, oh, ow = (Affine.var(v) for v in ("b", "k", "oh", "ow"))
    dst = ((b * nk + k) * nh + oh) * nw + ow
    return nest([("b", nb), ("k", nk), ("oh", nh), ("ow", nw)],
                Gemm(Access(acc, dst), reset=True))


def _mac_nest(config, inp: Buffer, wgt: Buffer, acc: Buffer, extents, window, geometry):
    """The convolution of one tile and chunk as scalar MACs over element lanes.

    The three innermost loops walk the lanes of one GEMM block (batch,
    out-channel, in-channel); tensorize turns them into one GEMM micro-op.
    """
    nb, nk, nh, nw, nc = extents
    rows, cols = window
    kh, kw = geometry.kernel
    sh, sw = geometry.stride
    b, k, oh, ow, c, y, x = (Affine.var(v) for v in ("b", "k", "oh", "ow", "c", "kh", "kw"))
    dst = ((b * nk + k) * nh + oh) * nw + ow
    src = ((b * nc + c) * rows + oh * sh + y) * cols + ow * sw + x
    weight = ((k * nc + c) * kh + y) * kw + x
    mac = Mac(Access(acc, dst, ("eb", "eo")), Access(inp, src, ("eb", "ei")),
              Access(wgt, weight, ("eo", "ei")))
    loops = [("b", nb), ("k", nk), ("oh", nh), ("ow", nw), ("c", nc), ("kh", kh), ("kw", kw),
             ("eb", config.batch), ("eo", config.block_out), ("ei", config.block_in)]
    return nest(loops, mac)
