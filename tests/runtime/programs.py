"""A hand-built dense layer `Program` (no compiler) and its numpy reference.

``out = clip((data @ weight.T + bias) >> shift, 0, 127)`` as int8, laid out with
`runtime.layout` and scheduled by hand: load everything, one GEMM over all
blocks, an ALU epilogue, one store. Small enough for the ``tiny`` config.
"""

from __future__ import annotations

import numpy as np

from vdla.hw.config import HwConfig
from vdla.hw.isa import Alu, AluOp, Finish, Gemm, Load, MemType, Store, Uop
from vdla.runtime.layout import packed_nbytes
from vdla.runtime.program import Program, TensorRegion


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def dense_program(config: HwConfig, m: int, k: int, n: int, bias: bool = True,
                  shift: int = 4) -> Program:
    """A dense layer of ``m`` rows, ``k`` inputs and ``n`` outputs for ``config``."""
    rows, k_blocks, n_blocks = _ceil(m, config.batch), _ceil(k, config.block_in), \
        _ceil(n, config.block_out)
    align = config.dram_alignment
    plan, cursor = {}, 0

    def allocate(name, nbytes):
        nonlocal cursor
        cursor = _ceil(cursor, align) * align
        plan[name] = cursor
        cursor += nbytes

    uops = [Uop(dst=0, src=kb, wgt=kb) for kb in range(k_blocks)] + [Uop(dst=0)]
    tensors = [("data", "input", "dense_data", (m, k)),
               ("weight", "input", "dense_weight", (n, k)),
               ("out", "output", "dense_output", (m, n))]
    if bias:
        tensors.insert(2, ("bias", "input", "bias", (n,)))
    for name, _, layout, shape in tensors:
        allocate(name, packed_nbytes(layout, shape, config))
    allocate("uops", 4 * len(uops))

    def element(name, kind):
        return plan[name] // config.element_bytes(kind)

    loops = dict(iter_out=rows, iter_in=n_blocks, dst_factor_out=n_blocks, dst_factor_in=1,
                 src_factor_out=k_blocks, wgt_factor_in=k_blocks)
    one = dict(uop_begin=k_blocks, uop_end=k_blocks + 1, iter_out=rows * n_blocks,
               dst_factor_out=1)
    instructions = [
        Load(memory_type=MemType.INP, dram_base=element("data", "inp"), y_size=1,
             x_size=rows * k_blocks, x_stride=rows * k_blocks),
        Load(memory_type=MemType.WGT, dram_base=element("weight", "wgt"), y_size=1,
             x_size=n_blocks * k_blocks, x_stride=n_blocks * k_blocks, push_next=True),
        Load(memory_type=MemType.UOP, dram_base=element("uops", "uop"), y_size=1,
             x_size=len(uops), x_stride=len(uops)),
    ]
    if bias:
        # the same bias row for every output row: a stride of 0
        instructions.append(Load(memory_type=MemType.ACC, dram_base=element("bias", "acc"),
                                 y_size=rows, x_size=n_blocks, x_stride=0))
    else:
        instructions.append(Gemm(reset=True, **dict(loops, uop_begin=k_blocks,
                                                    uop_end=k_blocks + 1)))
    instructions += [
        Gemm(pop_prev=True, uop_begin=0, uop_end=k_blocks, **loops),
        Alu(alu_op=AluOp.SHR, use_imm=True, imm=shift, **one),
        Alu(alu_op=AluOp.MAX, use_imm=True, imm=0, **one),
        Alu(alu_op=AluOp.MIN, use_imm=True, imm=127, push_next=True, **one),
        Store(pop_prev=True, dram_base=element("out", "out"), y_size=1,
              x_size=rows * n_blocks, x_stride=rows * n_blocks, push_prev=True),
        Finish(pop_next=True),
    ]
    cursor = _ceil(cursor, align) * align
    insn_offset = cursor
    cursor += 16 * len(instructions)
    return Program(
        config=config, instructions=instructions, uops=uops,
        tensors=[TensorRegion(name, role, layout, shape, plan[name])
                 for name, role, layout, shape in tensors],
        insn_offset=insn_offset, uop_offset=plan["uops"], dram_bytes=cursor,
        metadata={"layer": "dense", "m": m, "k": k, "n": n, "shift": shift, "bias": bias})


def dense_inputs(rng: np.random.Generator, m: int, k: int, n: int, bias: bool = True):
    inputs = {"data": rng.integers(-128, 128, (m, k), dtype=np.int8),
              "weight": rng.integers(-128, 128, (n, k), dtype=np.int8)}
    if bias:
        inputs["bias"] = rng.integers(-5000, 5000, (n,), dtype=np.int32)
    return inputs


def dense_reference(inputs, shift: int = 4) -> np.ndarray:
    acc = inputs["data"].astype(np.int64) @ inputs["weight"].astype(np.int64).T
    if "bias" in inputs:
        acc += inputs["bias"]
    return np.clip(acc >> shift, 0, 127).astype(np.int8)
