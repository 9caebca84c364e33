"""Hand-built programs for the compute module's two units, with numpy references.

`overlap_program` is the shape a compiler gives a layer's epilogue once it uses
``overlap``: GEMM tiles into two acc buffers, each tile's requantising
epilogue (ALU ADD, REQUANT with a bias or an immediate, relu or not) running
on the ALU unit while the GEMM unit computes the next tile, a store per tile.
It is race-free by construction: the ALU epilogue of tile ``t - 1``
(``overlap``) runs beside the GEMMs of tile ``t`` on the other buffer; the
first GEMM of tile ``t + 1``, which rewrites buffer ``(t + 1) % 2``, has
``overlap`` clear, so it waits for that epilogue. Each tile's GEMM is one
instruction per reduction step, all on the same rows (read-after-write
across instruction boundaries inside a unit), and the program holds empty
instructions of both units. At the end a long GEMM on rows of its own is
followed by a short ALU instruction that pushes the token the last store waits
for: the push must wait for the long GEMM too (pushes retire in program order).

With ``overlap=False`` the same program has every overlap bit clear: same
results, more cycles.
"""

from __future__ import annotations

import numpy as np

from vdla.hw.config import HwConfig
from vdla.hw.isa import Alu, AluOp, Finish, Gemm, Load, MemType, Store, Uop
from vdla.testing.programs.handbuilt import BuiltProgram, ImageBuilder
from vdla.testing.oracles import requant

__all__ = ["overlap_program", "chained_overlap_program"]


def overlap_program(config: HwConfig, tiles: int = 4, m: int = 2, n: int = 2, k: int = 3,
                    reps: int = 8, overlap: bool = True, seed: int = 3) -> BuiltProgram:
    """GEMM tiles with their epilogues on the ALU unit beside the next tile's GEMMs."""
    rng = np.random.default_rng(seed)
    b, bi, bo = config.batch, config.block_in, config.block_out
    mn = m * n
    inp = rng.integers(-128, 128, (tiles, m, k, b, bi)).astype(np.int8)
    wgt = rng.integers(-128, 128, (n, k, bo, bi)).astype(np.int8)
    bias = rng.integers(-3000, 3000, (n, b, bo)).astype(np.int32)
    # Rows by acc bank (the units may run side by side only on different banks):
    # the two tile buffers in banks 0 and 1, the bias and the ALU's own rows in
    # bank 2, the long GEMM's row in bank 3.
    bank = config.acc_bank_rows
    assert config.acc_banks == 4 and bank >= max(mn, n + 2)
    bias_row, short_row, chain_row, long_row = 2 * bank, 2 * bank + n, 2 * bank + n + 1, 3 * bank
    builder = ImageBuilder(config, max_instructions=tiles * (k + 8) + 16)
    _, inp_base = builder.place("inp", inp)
    _, wgt_base = builder.place("wgt", wgt)
    _, bias_base = builder.place("acc", bias)

    uops: list[Uop] = []

    def add_uops(new):
        uops.extend(new)
        return len(uops) - len(new)

    tile_uops = [add_uops([Uop(dst=(t % 2) * bank, src=t * m * k + kk, wgt=kk) for kk in range(k)])
                 for t in range(tiles)]
    buffer_uops = [add_uops([Uop(dst=buffer * bank, src=bias_row)]) for buffer in range(2)]
    long_uops = add_uops([Uop(dst=long_row, src=kk, wgt=kk) for kk in range(k)])
    long_reset = add_uops([Uop(dst=long_row)])
    short_uop = add_uops([Uop(dst=short_row)])
    chain_uop = add_uops([Uop(dst=chain_row, src=0, wgt=0)])
    uop_base = builder.uops(uops)
    out_offset, out_base = builder.place("out", None, elements=tiles * mn + 3)

    tile_loops = dict(iter_out=m, iter_in=n, dst_factor_out=n, dst_factor_in=1)
    adds = [int(v) for v in rng.integers(-60, 60, tiles)]
    # REQUANT immediates: shift 6..9, relu on odd tiles, garbage above bit 5 on some.
    requant_imms = [(6 + t % 4) | (32 if t % 2 else 0) | (0x1C0 if t % 3 == 2 else 0)
                    for t in range(tiles)]
    with_bias = [t % 2 == 0 for t in range(tiles)]

    def gemms(t):
        buffer = t % 2
        first = Gemm(reset=True, uop_begin=buffer_uops[buffer], uop_end=buffer_uops[buffer] + 1,
                     pop_prev=t == 0, pop_next=t >= 2, overlap=overlap and t == 0, **tile_loops)
        steps = [Gemm(uop_begin=tile_uops[t] + kk, uop_end=tile_uops[t] + kk + 1,
                      src_factor_out=k, wgt_factor_in=k, overlap=overlap, **tile_loops)
                 for kk in range(k)]
        empty = Gemm(uop_begin=0, uop_end=1, iter_out=0, overlap=overlap)
        return [first, *steps[:1], empty, *steps[1:]]

    def epilogue(t, wait=False):
        buffer = t % 2
        loops = dict(uop_begin=buffer_uops[buffer], uop_end=buffer_uops[buffer] + 1,
                     src_factor_out=0, src_factor_in=1, **tile_loops)
        return [
            Alu(alu_op=AluOp.ADD, use_imm=True, imm=adds[t], overlap=overlap and not wait,
                **loops),
            Alu(alu_op=AluOp.MAX, use_imm=True, imm=0, iter_in=0, overlap=overlap),  # empty
            Alu(alu_op=AluOp.REQUANT, use_imm=not with_bias[t], imm=requant_imms[t],
                push_next=True, overlap=overlap, **loops),
            Store(pop_prev=True, push_prev=t + 2 < tiles, memory_type=MemType.OUT,
                  sram_base=buffer * bank, dram_base=out_base + t * mn, y_size=1, x_size=mn,
                  x_stride=mn),
        ]

    program = [
        Load(memory_type=MemType.UOP, sram_base=0, dram_base=uop_base, y_size=1,
             x_size=len(uops), x_stride=len(uops)),
        Load(memory_type=MemType.ACC, sram_base=bias_row, dram_base=bias_base, y_size=1,
             x_size=n, x_stride=n),
        Load(memory_type=MemType.WGT, sram_base=0, dram_base=wgt_base, y_size=1, x_size=n * k,
             x_stride=n * k),
        Load(memory_type=MemType.INP, sram_base=0, dram_base=inp_base, y_size=1,
             x_size=tiles * m * k, x_stride=tiles * m * k, push_next=True),
    ]
    for t in range(tiles):
        program += gemms(t)
        if t:
            program += epilogue(t - 1)
    program += [
        # Nothing follows the last tile's GEMMs: its epilogue waits for them.
        *epilogue(tiles - 1, wait=True),
        Gemm(reset=True, uop_begin=long_reset, uop_end=long_reset + 1, overlap=overlap),
        Gemm(uop_begin=long_uops, uop_end=long_uops + k, iter_out=reps, overlap=overlap),
        Alu(alu_op=AluOp.MIN, use_imm=True, imm=0, reset=True, uop_begin=short_uop,
            uop_end=short_uop + 1, overlap=overlap),
        Alu(alu_op=AluOp.ADD, use_imm=True, imm=5, uop_begin=short_uop, uop_end=short_uop + 1,
            overlap=overlap, push_next=True),
        Store(pop_prev=True, memory_type=MemType.OUT, sram_base=long_row,
              dram_base=out_base + tiles * mn, y_size=1, x_size=1, x_stride=1),
        Store(memory_type=MemType.OUT, sram_base=short_row,
              dram_base=out_base + tiles * mn + 1, y_size=1, x_size=1, x_stride=1),
        # A GEMM without overlap accumulating onto a row the ALU unit is still
        # adding to (one micro-op per cycle on one row): it must wait for the ALU.
        Alu(alu_op=AluOp.MIN, use_imm=True, imm=0, reset=True, uop_begin=chain_uop,
            uop_end=chain_uop + 1, overlap=overlap),
        Alu(alu_op=AluOp.ADD, use_imm=True, imm=3, uop_begin=chain_uop, uop_end=chain_uop + 1,
            iter_out=reps, overlap=overlap),
        Gemm(uop_begin=chain_uop, uop_end=chain_uop + 1, push_next=True),
        Store(pop_prev=True, memory_type=MemType.OUT, sram_base=chain_row,
              dram_base=out_base + tiles * mn + 2, y_size=1, x_size=1, x_stride=1),
        Finish(),
    ]
    dram, count = builder.image(program)

    # numpy reference, straight from the ISA's semantics.
    products = np.einsum("tmkbi,nkoi->tmnbo", inp.astype(np.int64), wgt.astype(np.int64))
    out = np.zeros((tiles * mn + 3, b, bo), dtype=np.int64)
    for t in range(tiles):
        acc = products[t] + adds[t]
        operand = bias.astype(np.int64)[None] if with_bias[t] else 0
        out[t * mn:(t + 1) * mn] = requant(acc, operand, requant_imms[t]).reshape(mn, b, bo)
    out[tiles * mn] = reps * np.einsum("kbi,koi->bo", inp[0, 0].astype(np.int64),
                                       wgt[0].astype(np.int64))
    out[tiles * mn + 1] = 5
    out[tiles * mn + 2] = 3 * reps + inp[0, 0, 0].astype(np.int64) @ wgt[0, 0].astype(np.int64).T
    expected = (out & 0xFF).astype(np.uint8).view(np.int8).reshape(-1)
    name = "overlap" if overlap else "overlap_cleared"
    return BuiltProgram(name, dram, 0, count, program, out_offset, expected)


def chained_overlap_program(config: HwConfig, first_unit: str = "gemm", middle_overlap: bool = True,
                            with_middle: bool = True, rows: int = 12, seed: int = 5) -> BuiltProgram:
    """An ``overlap`` instruction ordered after the other unit's *older* instruction.

    ``A`` (``first_unit``, ``overlap``) writes acc rows ``0 .. rows - 1``, one
    micro-op per row, the last one last; ``B`` (the same unit, ``overlap`` when
    ``middle_overlap``) works on a row of another bank; ``C`` (the other unit,
    ``overlap``) reads row ``rows - 1`` -- a GEMM accumulates onto it, an ALU
    ADD adds it to row ``rows``. Nothing but ``B`` orders ``C`` after ``A``: B
    starts once its own unit's earlier ``A`` has completed, and C starts after
    B (program order), so the program is legal and C must see A's last write,
    however the hardware pipelines ``A`` and ``B`` on their unit. Without ``B``
    (``with_middle=False``) the program races: A and C may run side by side.
    """
    rng = np.random.default_rng(seed)
    b, bi, bo = config.batch, config.block_in, config.block_out
    bank = config.acc_bank_rows
    assert config.acc_banks >= 2 and bank > rows, "needs two banks of more than `rows` rows"
    inp = rng.integers(-128, 128, (rows, b, bi)).astype(np.int8)
    wgt = rng.integers(-128, 128, (1, bo, bi)).astype(np.int8)
    acc = rng.integers(-5000, 5000, (rows + 1, b, bo)).astype(np.int32)
    b_row_acc = rng.integers(-5000, 5000, (1, b, bo)).astype(np.int32)
    imm_a, imm_b = 77, -9
    builder = ImageBuilder(config, max_instructions=16)
    _, inp_base = builder.place("inp", inp)
    _, wgt_base = builder.place("wgt", wgt)
    _, acc_base = builder.place("acc", acc)
    _, b_row_base = builder.place("acc", b_row_acc)
    uops = [Uop(dst=0, src=0, wgt=0),                   # A: row i (+ inp[i] on GEMM)
            Uop(dst=bank, src=0, wgt=0),                # B: its row, in bank 1
            Uop(dst=rows - 1, src=0, wgt=0),            # C as GEMM: onto A's last row
            Uop(dst=rows, src=rows - 1)]                # C as ALU: row rows += row rows - 1
    uop_base = builder.uops(uops)
    out_offset, out_base = builder.place("out", None, elements=rows + 2)

    a_loops = dict(iter_out=rows, dst_factor_out=1, src_factor_out=1)
    if first_unit == "gemm":
        first = Gemm(uop_begin=0, uop_end=1, overlap=True, **a_loops)
        middle = Gemm(uop_begin=1, uop_end=2, overlap=middle_overlap)
        last = Alu(alu_op=AluOp.ADD, uop_begin=3, uop_end=4, overlap=True, push_next=True)
    else:
        first = Alu(alu_op=AluOp.ADD, use_imm=True, imm=imm_a, uop_begin=0, uop_end=1,
                    overlap=True, **a_loops)
        middle = Alu(alu_op=AluOp.ADD, use_imm=True, imm=imm_b, uop_begin=1, uop_end=2,
                     overlap=middle_overlap)
        last = Gemm(uop_begin=2, uop_end=3, overlap=True, push_next=True)
    program = [
        Load(memory_type=MemType.INP, sram_base=0, dram_base=inp_base, y_size=1, x_size=rows,
             x_stride=rows),
        Load(memory_type=MemType.WGT, sram_base=0, dram_base=wgt_base, y_size=1, x_size=1,
             x_stride=1, push_next=True),
        Load(memory_type=MemType.UOP, sram_base=0, dram_base=uop_base, y_size=1,
             x_size=len(uops), x_stride=len(uops), pop_prev=True),
        Load(memory_type=MemType.ACC, sram_base=0, dram_base=acc_base, y_size=1, x_size=rows + 1,
             x_stride=rows + 1),
        Load(memory_type=MemType.ACC, sram_base=bank, dram_base=b_row_base, y_size=1, x_size=1,
             x_stride=1),
        first, *([middle] if with_middle else []), last,
        Store(pop_prev=True, memory_type=MemType.OUT, sram_base=0, dram_base=out_base,
              y_size=1, x_size=rows + 1, x_stride=rows + 1),
        Store(memory_type=MemType.OUT, sram_base=bank, dram_base=out_base + rows + 1, y_size=1,
              x_size=1, x_stride=1),
        Finish(),
    ]
    dram, count = builder.image(program)

    # numpy reference, straight from the ISA's semantics (program order).
    result = np.concatenate([acc, b_row_acc]).astype(np.int64)
    product = np.einsum("rbi,oi->rbo", inp.astype(np.int64), wgt[0].astype(np.int64))
    if first_unit == "gemm":
        result[:rows] += product                          # A
        result[rows + 1] += product[0] * with_middle      # B
        result[rows] += result[rows - 1]                  # C
    else:
        result[:rows] += imm_a                            # A
        result[rows + 1] += imm_b * with_middle           # B
        result[rows - 1] += product[0]                    # C
    expected = (result & 0xFF).astype(np.uint8).view(np.int8).reshape(-1)
    return BuiltProgram(f"chained_overlap_{first_unit}", dram, 0, count, program, out_offset,
                        expected)
