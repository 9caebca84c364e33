"""Independent interpreters used by the pass tests.

`run_nest` executes an IR loop nest (scalar MACs lane by lane, or GEMM/ALU
intrinsics) directly from its affine indices; `run_instructions` executes
folded GEMM/ALU instructions from the ISA's loop semantics and their kernels.
Comparing the two checks a pass without going through codegen or the fsim.
"""

from __future__ import annotations

import itertools

import numpy as np

from vdla.compiler.accel import ir
from vdla.hw.isa import REQUANT_OPS
from vdla.testing.oracles import alu


def new_sram(config, rng=None):
    """Random int8 inp/wgt and zero acc SRAMs, shaped (entries, *element)."""
    rng = rng or np.random.default_rng(0)
    def shape(kind):
        return (config.depth(kind), *config.element_shape(kind))
    return {"inp": rng.integers(-128, 128, size=shape("inp")).astype(np.int64),
            "wgt": rng.integers(-128, 128, size=shape("wgt")).astype(np.int64),
            "acc": np.zeros(shape("acc"), dtype=np.int64)}


def run_nest(stmt, sram) -> None:
    """Execute one perfect loop nest in place, iteration by iteration."""
    loops, leaf = ir.loop_nest(stmt) if isinstance(stmt, ir.Loop) else ([], stmt)
    names = [loop.var for loop in loops]
    for values in itertools.product(*(range(loop.extent) for loop in loops)):
        env = dict(zip(names, values))
        def at(access, env=env):
            return access.buffer.base + access.index.evaluate(env)
        if isinstance(leaf, ir.Mac):
            lanes = {**env}
            acc = sram["acc"][at(leaf.acc)]
            inp = sram["inp"][at(leaf.inp)]
            wgt = sram["wgt"][at(leaf.wgt)]
            acc[lanes[leaf.acc.lanes[0]], lanes[leaf.acc.lanes[1]]] += (
                inp[lanes[leaf.inp.lanes[0]], lanes[leaf.inp.lanes[1]]]
                * wgt[lanes[leaf.wgt.lanes[0]], lanes[leaf.wgt.lanes[1]]])
        elif isinstance(leaf, ir.Gemm):
            if leaf.reset:
                sram["acc"][at(leaf.dst)] = 0
            else:
                sram["acc"][at(leaf.dst)] += sram["inp"][at(leaf.src)] @ sram["wgt"][at(leaf.wgt)].T
        elif isinstance(leaf, ir.Alu) and leaf.reset:
            sram["acc"][at(leaf.dst)] = 0
        elif isinstance(leaf, ir.Alu):
            if leaf.src is not None:
                operand = sram["acc"][at(leaf.src)]
            else:
                operand = 0 if leaf.op in REQUANT_OPS else leaf.imm
            sram["acc"][at(leaf.dst)] = alu(leaf.op, sram["acc"][at(leaf.dst)], operand,
                                            leaf.imm or 0)
        else:
            raise TypeError(leaf)


def run_instructions(insns, sram) -> None:
    """Execute GEMM/ALU `ir.Insn`s (with kernels) by the ISA's loop semantics."""
    for insn in insns:
        i = insn.instruction
        dst, src, wgt = insn.kernel
        for outer in range(i.iter_out):
            for inner in range(i.iter_in):
                for u in range(len(dst)):
                    d = dst[u] + outer * i.dst_factor_out + inner * i.dst_factor_in
                    s = src[u] + outer * i.src_factor_out + inner * i.src_factor_in
                    if type(i).__name__ == "Gemm":
                        if i.reset:
                            sram["acc"][d] = 0
                            continue
                        w = wgt[u] + outer * i.wgt_factor_out + inner * i.wgt_factor_in
                        sram["acc"][d] += sram["inp"][s] @ sram["wgt"][w].T
                    elif i.reset:
                        sram["acc"][d] = 0
                    else:
                        if i.use_imm:
                            operand = 0 if i.alu_op in REQUANT_OPS else i.imm
                        else:
                            operand = sram["acc"][s]
                        sram["acc"][d] = alu(i.alu_op, sram["acc"][d], operand, i.imm)
