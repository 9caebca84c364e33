"""How fast fsim runs a whole ResNet-18 C2 layer (56x56, 64->64, 3x3), hand scheduled.

The program is built by hand (no compiler): row tiles of 4 output rows, all
channels, micro-ops covering (row, column, kx) so each GEMM instruction runs
3 x 4 x 672 micro-ops, i.e. 451,584 GEMM micro-op executions for the layer. The
result is checked against a numpy convolution. Run::

    python -m benchmarks.fsim_speed [--repeat N] [--no-races]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vdla.hw import isa
from vdla.hw.config import PRESETS
from vdla.hw.isa import Alu, AluOp, Finish, Gemm, Load, MemType, Store, Uop
from vdla.runtime import AccelRunner, Program, TensorRegion, packed_nbytes

SIZE, CHANNELS, TILE_ROWS, SHIFT = 56, 64, 4, 10


def c2_program(config=PRESETS["default"]) -> Program:
    blocks = CHANNELS // config.block_in
    width, padded = SIZE, SIZE + 2
    rows_in = TILE_ROWS + 2
    inp_per_block = rows_in * padded
    acc_per_block = TILE_ROWS * width
    tensors, cursor = {}, 0
    align = config.dram_alignment
    for name, role, layout, shape in (
            ("data", "input", "activation", (1, CHANNELS, SIZE, SIZE)),
            ("weight", "input", "weight", (CHANNELS, CHANNELS, 3, 3)),
            ("bias", "input", "bias", (CHANNELS,)),
            ("out", "output", "output", (1, CHANNELS, SIZE, SIZE))):
        tensors[name] = TensorRegion(name, role, layout, shape, cursor)
        cursor += -(-packed_nbytes(layout, shape, config) // align) * align

    def element(name, kind):
        return tensors[name].dram_offset // config.element_bytes(kind)

    # micro-ops: one set per input-channel block; fields (row, column, kx)
    uops = []
    for cb in range(blocks):
        for r in range(TILE_ROWS):
            for x in range(width):
                for kx in range(3):
                    uops.append(Uop(dst=r * width + x,
                                    src=cb * inp_per_block + r * padded + x + kx,
                                    wgt=cb * 9 + kx))
    per_set = TILE_ROWS * width * 3
    epilogue_uop = len(uops)
    uops.append(Uop(dst=0, src=0))
    bias_uop = len(uops)  # acc entry `blocks * acc_per_block + ob` holds bias block ob
    uops.append(Uop(dst=0, src=blocks * acc_per_block))
    uop_offset = cursor
    cursor += isa.UOP_BYTES * len(uops)

    program = [
        Load(memory_type=MemType.UOP, dram_base=uop_offset // isa.UOP_BYTES, y_size=1, x_size=len(uops),
             x_stride=len(uops)),
        Load(memory_type=MemType.ACC, sram_base=blocks * acc_per_block,
             dram_base=element("bias", "acc"), y_size=1, x_size=blocks, x_stride=blocks),
        Load(memory_type=MemType.WGT, dram_base=element("weight", "wgt"), y_size=1,
             x_size=blocks * blocks * 9, x_stride=blocks * blocks * 9, push_next=True),
        Gemm(pop_prev=True, uop_begin=0, uop_end=0),  # weights in
    ]
    tiles = SIZE // TILE_ROWS
    for tile in range(tiles):
        y0 = tile * TILE_ROWS
        top = 1 if tile == 0 else 0
        bottom = 1 if tile == tiles - 1 else 0
        first_row = y0 - 1 + top
        y_size = rows_in - top - bottom
        for cb in range(blocks):
            program.append(Load(
                memory_type=MemType.INP, sram_base=cb * inp_per_block,
                dram_base=element("data", "inp") + cb * SIZE * SIZE + first_row * SIZE,
                y_size=y_size, x_size=SIZE, x_stride=SIZE, y_pad_top=top, y_pad_bottom=bottom,
                x_pad_left=1, x_pad_right=1,
                pop_next=(tile > 0 and cb == 0), push_next=(cb == blocks - 1)))
        # bias into every accumulator (waits for the previous tile's store)
        program.append(Gemm(reset=True, uop_begin=epilogue_uop, uop_end=epilogue_uop + 1,
                            iter_out=blocks * acc_per_block, dst_factor_out=1,
                            pop_next=tile > 0))
        program.append(Alu(alu_op=AluOp.ADD, uop_begin=bias_uop, uop_end=bias_uop + 1,
                           iter_out=blocks, iter_in=acc_per_block, dst_factor_out=acc_per_block,
                           dst_factor_in=1, src_factor_out=1))
        for cb in range(blocks):
            program.append(Gemm(
                uop_begin=cb * per_set, uop_end=(cb + 1) * per_set,
                iter_out=blocks, iter_in=3, dst_factor_out=acc_per_block,
                wgt_factor_out=blocks * 9, src_factor_in=padded, wgt_factor_in=3,
                pop_prev=cb == 0, push_prev=(cb == blocks - 1 and tile < tiles - 1)))
        for op, imm in ((AluOp.SHR, SHIFT), (AluOp.MAX, 0), (AluOp.MIN, 127)):
            program.append(Alu(alu_op=op, use_imm=True, imm=imm, uop_begin=epilogue_uop,
                               uop_end=epilogue_uop + 1, iter_out=blocks * acc_per_block,
                               dst_factor_out=1, push_next=op == AluOp.MIN))
        for ob in range(blocks):
            program.append(Store(
                sram_base=ob * acc_per_block,
                dram_base=element("out", "out") + ob * SIZE * SIZE + y0 * SIZE,
                y_size=TILE_ROWS, x_size=SIZE, x_stride=SIZE, pop_prev=ob == 0,
                push_prev=ob == blocks - 1))
    program.append(Finish(pop_next=True))
    insn_offset = -(-cursor // align) * align
    return Program(config=config, instructions=program, uops=uops,
                   tensors=list(tensors.values()), insn_offset=insn_offset,
                   uop_offset=uop_offset, dram_bytes=insn_offset + isa.INSN_BYTES * len(program),
                   metadata={"layer": "C2", "hand_scheduled": True})


def reference(data, weight, bias):
    padded = np.pad(data[0].astype(np.int64), ((0, 0), (1, 1), (1, 1)))
    acc = np.zeros((CHANNELS, SIZE, SIZE), np.int64) + bias[:, None, None]
    for ky in range(3):
        for kx in range(3):
            window = padded[:, ky:ky + SIZE, kx:kx + SIZE]
            acc += np.einsum("chw,kc->khw", window, weight[:, :, ky, kx].astype(np.int64))
    return np.clip(acc >> SHIFT, 0, 127).astype(np.int8)[None]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-races", action="store_true", help="turn race checking off")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    inputs = {"data": rng.integers(-128, 128, (1, CHANNELS, SIZE, SIZE), dtype=np.int8),
              "weight": rng.integers(-128, 128, (CHANNELS, CHANNELS, 3, 3), dtype=np.int8),
              "bias": rng.integers(-20000, 20000, (CHANNELS,), dtype=np.int32)}
    program = c2_program()
    device = AccelRunner(program.config, check_races=not args.no_races)
    expected = reference(inputs["data"], inputs["weight"], inputs["bias"])
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = device.run(program, inputs)
        elapsed = time.perf_counter() - start
        assert np.array_equal(result.outputs["out"], expected), "fsim output differs from numpy"
        print(f"C2 on fsim: {elapsed:.3f} s, {len(program.instructions)} instructions, "
              f"{result.counters['gemm_uops']} GEMM micro-ops "
              f"({result.counters['gemm_uops'] / elapsed / 1e6:.2f} M/s), "
              f"{result.counters['gemm_macs'] / elapsed / 1e9:.2f} GMAC/s, output matches numpy")


if __name__ == "__main__":
    main()
