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

A resident operand (``Schedule.resident_input`` / ``resident_weights``) is one
buffer shared by every tile and thread, holding each chunk's (each
output-channel tile's and chunk's) block at its own offset in that layout; the
DMA pass then elides every reload.

A layer with a residual (`compiler.ops.Epilogue.residual_shift` ``d``) starts each
tile's first reduction chunk, right after the reset, with its residual: the
chunk's load stage also loads the tile's residual (the output tile's blocks
of the ``residual`` tensor, laid out as acc) into a buffer ``res_tile`` of
its own (inp entries: on a square block an output element is an input
element) and the identity block ``2^j * I`` (``j = min(d, 6)``, a constant
region) into a one-entry wgt buffer ``identity`` that stays resident, and the
tile's reset stage, after zeroing the accumulators, GEMMs one into the other
(``acc = r << j``) and, when ``d > 6``, shifts the accumulator left by
``d - j`` on the ALU (in the reset stage, `passes.overlap.hoist_resets` moves
them beside the other thread's GEMMs with the reset). The chunks then
accumulate on top, and the usual epilogue requantises ``acc + bias``: one
rounding. (A reduction step of its own for the residual cost more: on the
RTL at ``default``, 2,044,425 cycles against 2,030,979 over the seven layer
shapes ResNet-18 fuses, when the GEMM and SHL still ran in the first chunk's
compute stage.)
"""

from __future__ import annotations

import itertools

from vdla.compiler.accel import ir
from vdla.compiler.accel.ir import Access, Affine, Buffer, Copy, Mac, Stage, Tile, nest
from vdla.compiler.ops import IDENTITY_SHIFT
from vdla.compiler.accel.passes.dma import lower_copy
from vdla.compiler.accel.schedule import TilePlan, group_blocks
from vdla.hw import isa
from vdla.ints import ceil_div

__all__ = ["lower", "tile_ranges", "chunk_loads", "residual_loads"]


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
    config, blocks, tile = plan.config, plan.blocks, plan.tile
    slot = plan.slot_entries()
    resident_inp, resident_wgt = plan.schedule.resident_input, plan.schedule.resident_weights
    usage = plan.usage()
    inp = (Buffer("inp_resident", "inp", usage["inp"]) if resident_inp
           else Buffer("inp_tile", "inp", slot["inp"]))
    wgt = (Buffer("wgt_resident", "wgt", usage["wgt"]) if resident_wgt
           else Buffer("wgt_tile", "wgt", slot["wgt"]))
    acc = Buffer("acc_tile", "acc", slot["acc"])
    buffers = [inp, wgt, acc]
    if plan.bias_entries:
        buffers.append(Buffer("bias", "acc", plan.bias_entries))
    residual = None
    if plan.geometry.epilogue.residual_shift is not None:
        residual = (Buffer("res_tile", "inp", plan.residual_entries()["inp"]),
                    Buffer("identity", "wgt", 1))
        buffers += residual
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
        rows, cols = plan.window(nh, 0), plan.window(nw, 1)
        steps = []
        for chunk, (c0, nc) in enumerate(ranges["c"]):
            offsets = (chunk * slot["inp"] if resident_inp else 0,
                       (k0 // tile["k"] * len(ranges["c"]) + chunk) * slot["wgt"]
                       if resident_wgt else 0)
            copies = _load_copies(
                plan, inp, wgt, dict(b=b0, k=k0, h=h0, w=w0, c=c0),
                dict(b=nb, k=nk, h=nh, w=nw, c=nc), offsets)
            if residual is not None and chunk == 0:
                # The residual's LOAD rides with the first chunk's (the pipeline has no
                # short step); its GEMM and SHL join the tile's reset, below.
                copies = _residual_copies(plan, *residual, (b0, k0, h0, w0),
                                          (nb, nk, nh, nw)) + copies
            load = Stage("load", index, copies, chunk=chunk)
            key = ("mac", nb, nk, nh, nw, nc, offsets)
            if key not in nests:
                nests[key] = _mac_nest(config, inp, wgt, acc, (nb, nk, nh, nw, nc), (rows, cols),
                                       plan, offsets)
            steps.append((load, Stage("compute", index, [nests[key]], chunk=chunk,
                                      role="gemm")))
        key = ("reset", nb, nk, nh, nw)
        if key not in nests:
            nests[key] = _reset(acc, nb, nk, nh, nw)
        prologue = [nests[key]]
        if residual is not None:
            # The residual's GEMM and SHL start the tile with its reset, so that
            # `passes.overlap.hoist_resets` moves all three beside the other thread's GEMMs.
            key = ("residual", nb, nk, nh, nw)
            if key not in nests:
                nests[key] = _residual_nests(config, acc, *residual, (nb, nk, nh, nw),
                                             plan.geometry.epilogue.residual_shift)
            prologue += nests[key]
        reset = Stage("compute", index, prologue, role="reset")
        epilogue = Stage("compute", index, [ir.Epilogue(acc, nb, nk, nh * nw, k0)],
                         role="epilogue")
        store = Stage("store", index, [
            Copy("store", "out", (blocks["b"], blocks["k"], blocks["h"], blocks["w"]),
                 (b0, k0, h0, w0), (nb, nk, nh, nw), "out", acc)])
        tiles.append(Tile(index, steps, epilogue, store, reset=reset))
    return ir.Function(name, config, plan, buffers, tiles)


def chunk_loads(plan: TilePlan) -> dict[str, list[isa.Load]]:
    """The LOADs of one reduction chunk of a typical tile: ``{"inp": [...], "wgt": [...]}``.

    The instructions the DMA pass emits for the copies `lower` builds, for the
    tile second along each axis cut into three or more tiles and first along
    the others (an inner tile where there is one: edge tiles are smaller or
    padded), with a full chunk. The cost model counts DRAM time from these, so
    it sees how the DMA merges a box's rows and planes into few transfers.
    """
    slot = plan.slot_entries()
    first, counts = _typical_tile(plan)
    copies = _load_copies(plan, Buffer("inp_tile", "inp", slot["inp"]),
                          Buffer("wgt_tile", "wgt", slot["wgt"]), first, counts, (0, 0))
    return {copy.memory: [insn.instruction for insn in lower_copy(copy)] for copy in copies}


def residual_loads(plan: TilePlan) -> list[isa.Load]:
    """The LOADs of the typical tile's residual (`chunk_loads`' tile), none without one."""
    if plan.geometry.epilogue.residual_shift is None:
        return []
    first, counts = _typical_tile(plan)
    residual = _residual_copies(plan, Buffer("res_tile", "inp", plan.residual_entries()["inp"]),
                                Buffer("identity", "wgt", 1),
                                [first[a] for a in "bkhw"], [counts[a] for a in "bkhw"])[0]
    return [insn.instruction for insn in lower_copy(residual)]


def _typical_tile(plan: TilePlan) -> tuple[dict[str, int], dict[str, int]]:
    """``(first, counts)`` block of the tile `chunk_loads` describes, per axis."""
    blocks, tile = plan.blocks, plan.tile
    first = {axis: tile[axis] if plan.counts[axis] > 2 and axis != "c" else 0
             for axis in "bkhwc"}
    return first, {axis: min(tile[axis], blocks[axis] - first[axis]) for axis in "bkhwc"}


def _load_copies(plan: TilePlan, inp: Buffer, wgt: Buffer, first: dict, counts: dict,
                 offsets: tuple[int, int]) -> list[Copy]:
    """One chunk's LOAD copies, its input window and its weight block: ``first`` and
    ``counts`` map the axes (b, k, h, w, c) to the chunk's first block and extent."""
    geometry, blocks = plan.geometry, plan.blocks
    kh, kw = geometry.kernel
    # A grouped layer's chunk reads its output channels' group of input blocks
    # (groups that tile a block's diagonal: the block of its outputs' inputs).
    group_k, group_c = group_blocks(geometry, plan.config)
    data = (blocks["b"], ceil_div(geometry.in_channels, plan.config.block_in), geometry.height,
            geometry.width)
    c0 = first["k"] // group_k * group_c + first["c"]
    return [_input_copy(plan, data, inp, (first["b"], c0, first["h"], first["w"]),
                        (counts["b"], counts["c"], counts["h"], counts["w"]), offsets[0]),
            Copy("load", "weight", (blocks["k"], blocks["c"], kh, kw),
                 (first["k"], first["c"], 0, 0), (counts["k"], counts["c"], kh, kw), "wgt", wgt,
                 offsets[1])]


def _input_copy(plan: TilePlan, grid, inp: Buffer, first, counts, offset: int = 0) -> Copy:
    """The copy of one tile's input window: ``first``/``counts`` are (b, c, out row, out col).

    It lands ``offset`` entries into ``inp``.

    A compacted axis (see `schedule.compact_axes`) becomes two: one step per
    output (DRAM stride ``stride``) and the ``kernel`` neighbours it reads.
    """
    geometry = plan.geometry
    (b0, c0, h0, w0), (nb, nc, nh, nw) = first, counts
    kh, kw = geometry.kernel
    sh, sw = geometry.stride
    ph, pw = geometry.padding[:2]     # top and left: the DMA pass pads the rest
    compact_rows, compact_cols = plan.compact
    if not (compact_rows or compact_cols):
        return Copy("load", "data", grid, (b0, c0, h0 * sh - ph, w0 * sw - pw),
                    (nb, nc, plan.window(nh, 0), plan.window(nw, 1)), "inp", inp, offset)
    height, width = grid[2], grid[3]
    view_grid, strides, start, extent = [grid[0], grid[1]], [grid[1] * height * width,
                                                              height * width], [b0, c0], [nb, nc]
    for axis, (compact, first_out, outs, kernel, stride, size, step) in enumerate((
            (compact_rows, h0, nh, kh, sh, height, width), (compact_cols, w0, nw, kw, sw, width, 1))):
        if compact:
            # Unpadded: every output's window lies inside the tensor.
            view_grid += [(size - kernel) // stride + 1, kernel]
            strides += [stride * step, step]
            start += [first_out, 0]
            extent += [outs, kernel]
        else:
            view_grid.append(size)
            strides.append(step)
            start.append(first_out * stride)
            extent.append(plan.window(outs, axis))
    return Copy("load", "data", tuple(view_grid), tuple(start), tuple(extent), "inp", inp,
                offset, strides=tuple(strides))


def _residual_copies(plan: TilePlan, res: Buffer, identity: Buffer, first, counts) -> list[Copy]:
    """The LOADs of a tile's residual step: its residual blocks (``first``/``counts``:
    (b, k, out row, out col)) into ``res``, laid out as the tile's acc, and the identity."""
    blocks = plan.blocks
    return [Copy("load", "residual", (blocks["b"], blocks["k"], blocks["h"], blocks["w"]),
                 tuple(first), tuple(counts), "inp", res),
            Copy("load", "identity", (1,), (0,), (1,), "wgt", identity)]


def _residual_nests(config, acc: Buffer, res: Buffer, identity: Buffer, extents,
                    shift: int) -> list:
    """``acc += res @ (2^j I)`` as scalar MACs over lanes (tensorize makes it one GEMM per
    entry), then ``acc <<= d - j`` on the ALU where the identity holds less than ``d``."""
    nb, nk, nh, nw = extents
    b, k, oh, ow = (Affine.var(v) for v in ("b", "k", "oh", "ow"))
    entry = ((b * nk + k) * nh + oh) * nw + ow
    mac = Mac(Access(acc, entry, ("eb", "eo")), Access(res, entry, ("eb", "ei")),
              Access(identity, Affine(), ("eo", "ei")))
    tile = [("b", nb), ("k", nk), ("oh", nh), ("ow", nw)]
    nests = [nest(tile + [("eb", config.batch), ("eo", config.block_out),
                          ("ei", config.block_in)], mac)]
    rest = shift - min(shift, IDENTITY_SHIFT)
    if rest:
        nests.append(nest(tile, ir.Alu(isa.AluOp.SHL, Access(acc, entry), imm=rest)))
    return nests


def _reset(acc: Buffer, nb: int, nk: int, nh: int, nw: int):
    """Zero the tile's accumulators before the first reduction chunk.

    An ALU reset, so that it can run on the ALU beside another tile's GEMMs.
    """
    b, k, oh, ow = (Affine.var(v) for v in ("b", "k", "oh", "ow"))
    dst = ((b * nk + k) * nh + oh) * nw + ow
    return nest([("b", nb), ("k", nk), ("oh", nh), ("ow", nw)],
                ir.Alu(isa.AluOp.ADD, Access(acc, dst), imm=0, reset=True))


def _mac_nest(config, inp: Buffer, wgt: Buffer, acc: Buffer, extents, window, plan: TilePlan,
              offsets: tuple[int, int] = (0, 0)):
    """The convolution of one tile and chunk as scalar MACs over element lanes.

    ``offsets`` are where the chunk's input and weights start in their buffers.

    The three innermost loops walk the lanes of one GEMM block (batch,
    out-channel, in-channel); tensorize turns them into one GEMM micro-op.
    """
    nb, nk, nh, nw, nc = extents
    rows, cols = window
    geometry = plan.geometry
    kh, kw = geometry.kernel
    # A compacted axis holds each output's kernel window back to back.
    step_h, step_w = (kernel if compact else stride for compact, kernel, stride
                      in zip(plan.compact, geometry.kernel, geometry.stride))
    dh, dw = geometry.dilation
    b, k, oh, ow, c, y, x = (Affine.var(v) for v in ("b", "k", "oh", "ow", "c", "kh", "kw"))
    dst = ((b * nk + k) * nh + oh) * nw + ow
    src = ((b * nc + c) * rows + oh * step_h + y * dh) * cols + ow * step_w + x * dw + offsets[0]
    weight = ((k * nc + c) * kh + y) * kw + x + offsets[1]
    mac = Mac(Access(acc, dst, ("eb", "eo")), Access(inp, src, ("eb", "ei")),
              Access(wgt, weight, ("eo", "ei")))
    loops = [("b", nb), ("k", nk), ("oh", nh), ("ow", nw), ("c", nc), ("kh", kh), ("kw", kw),
             ("eb", config.batch), ("eo", config.block_out), ("ei", config.block_in)]
    return nest(loops, mac)
