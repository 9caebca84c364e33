"""`hw.unit_pipeline`'s units alone, in Amaranth's simulator, against the ISA's semantics.

Each test wires one unit (GEMM or ALU) to plain memories, issues random
instructions back to back whenever the unit is ready (so micro-ops of
consecutive instructions follow each other and hit the same acc rows: the
forwarding paths are exercised), then compares acc and out with a sequential
numpy execution of the same instructions (references from `vdla.testing.oracles`).
It also checks the rate: one micro-op per cycle, one every two cycles for ALU
micro-ops that read acc[src] (every ALU micro-op with ``two_cycle_alu``); on
`tiny` and on `tiny` with the switches that lengthen the pipeline.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import memory
from amaranth.lib.wiring import connect
from amaranth.sim import Simulator

from vdla.hw import isa
from vdla.hw.isa import REQUANT_OPS, Alu, AluOp, Gemm, Uop
from vdla.hw.unit_pipeline import AluUnit, GemmUnit, TwoCycleAluUnit, unit_variant
from vdla.testing.oracles import alu, pack, to_int8, unpack_signed, wrap32
from tests.hw.amaranth_sim import TINY, TINY_PIPELINED
from tests.hw.unelaborated import built

ACC_ROWS = 6   # few rows: consecutive micro-ops often touch the same one


def _harness(config, unit, uops, acc, inp, wgt):
    m = Module()
    m.submodules.dut = dut = unit_variant(config, unit)(config)
    mems = {
        "uop": memory.Memory(shape=32, depth=config.depth("uop"), init=[int(w) for w in uops]),
        "acc": memory.Memory(shape=config.element_bytes("acc") * 8, depth=config.depth("acc"),
                             init=[pack(row, 32) for row in acc]),
        "out": memory.Memory(shape=config.element_bytes("out") * 8, depth=config.depth("acc"),
                             init=[]),
        "inp": memory.Memory(shape=config.element_bytes("inp") * 8, depth=config.depth("inp"),
                             init=[pack(e.reshape(-1), 8) for e in inp]),
        "wgt": memory.Memory(shape=config.element_bytes("wgt") * 8, depth=config.depth("wgt"),
                             init=[pack(e.reshape(-1), 8) for e in wgt]),
    }
    for name, mem in mems.items():
        m.submodules[name] = mem
    connect(m, dut.uop_read, mems["uop"].read_port(transparent_for=()))
    connect(m, dut.acc_read, mems["acc"].read_port(transparent_for=()))
    connect(m, dut.acc_write, mems["acc"].write_port())
    connect(m, dut.out_write, mems["out"].write_port())
    if unit == "gemm":
        connect(m, dut.inp_read, mems["inp"].read_port(transparent_for=()))
        connect(m, dut.wgt_read, mems["wgt"].read_port(transparent_for=()))
    else:
        connect(m, dut.acc_src_read, mems["acc"].read_port(transparent_for=()))
    return m, dut, mems


def _reference(config, program, uops, acc, inp, wgt):
    """Sequential execution of the loop nests (hw/isa.py)."""
    acc = acc.astype(np.int64).copy()
    micro_ops = 0
    for insn in program:
        for i in range(insn.iter_out):
            for j in range(insn.iter_in):
                for u in range(insn.uop_begin, insn.uop_end):
                    micro_ops += 1
                    dst = uops[u].dst + i * insn.dst_factor_out + j * insn.dst_factor_in
                    src = uops[u].src + i * insn.src_factor_out + j * insn.src_factor_in
                    if insn.reset:
                        acc[dst] = 0
                    elif isinstance(insn, Gemm):
                        w = uops[u].wgt + i * insn.wgt_factor_out + j * insn.wgt_factor_in
                        product = inp[src].astype(np.int64) @ wgt[w].astype(np.int64).T
                        before = 0 if insn.overwrite else acc[dst]
                        acc[dst] = wrap32(before + product.reshape(-1))
                    else:
                        operand = (np.int64(0 if insn.alu_op in REQUANT_OPS else insn.imm)
                                   if insn.use_imm else acc[src].copy())
                        acc[dst] = alu(insn.alu_op, acc[dst], operand, insn.imm)
    return acc, micro_ops


def _random_program(rng, unit, uop_count):
    program = []
    for _ in range(16):
        begin = int(rng.integers(0, uop_count))
        fields = dict(uop_begin=begin, uop_end=int(rng.integers(begin, uop_count + 1)),
                      iter_out=int(rng.choice(4, p=[0.1, 0.3, 0.3, 0.3])),
                      iter_in=int(rng.integers(1, 3)),
                      dst_factor_out=int(rng.integers(0, 2)), dst_factor_in=int(rng.integers(0, 2)),
                      src_factor_out=int(rng.integers(0, 2)), src_factor_in=int(rng.integers(0, 2)),
                      reset=bool(rng.random() < 0.15))
        if unit == "gemm":
            program.append(Gemm(wgt_factor_out=int(rng.integers(0, 2)),
                                wgt_factor_in=int(rng.integers(0, 2)),
                                overwrite=bool(rng.random() < 0.3), **fields))
        else:
            op = AluOp(int(rng.integers(0, len(AluOp))))
            use_imm = bool(rng.random() < 0.5)
            imm = int(rng.integers(0, 64)) if op in REQUANT_OPS else int(rng.integers(-40, 40))
            program.append(Alu(alu_op=op, use_imm=use_imm, imm=imm, **fields))
    return program


@pytest.mark.parametrize("config", [TINY, TINY_PIPELINED], ids=lambda config: config.name)
@pytest.mark.parametrize("unit", ["gemm", "alu"])
@pytest.mark.parametrize("seed", range(4))
def test_unit_pipeline_matches_sequential_execution(config, unit, seed):
    rng = np.random.default_rng(seed)
    lanes = config.batch * config.block_out
    uop_count = 5
    uops = [Uop(dst=int(rng.integers(0, ACC_ROWS - 2)), src=int(rng.integers(0, ACC_ROWS - 2)),
                wgt=int(rng.integers(0, 4))) for _ in range(uop_count)]
    acc = rng.integers(-3000, 3000, (config.depth("acc"), lanes))
    inp = rng.integers(-128, 128, (8, config.batch, config.block_in))
    wgt = rng.integers(-128, 128, (8, config.block_out, config.block_in))
    program = _random_program(rng, unit, uop_count)
    expected, micro_ops = _reference(config, program, uops, acc, inp, wgt)
    m, dut, mems = _harness(config, unit, isa.encode_uops(uops, config), acc, inp, wgt)
    paced = sum(insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_begin)
                for insn in program if isinstance(insn, Alu)
                and (config.two_cycle_alu or not (insn.reset or insn.use_imm)))
    counts = {"cycles": 0, "executes": 0, "completes": 0}

    async def testbench(ctx):
        index = 0
        while counts["completes"] < len(program):
            begin = index < len(program) and ctx.get(dut.ready)
            ctx.set(dut.begin, begin)
            if begin:
                ctx.set(dut.insn, isa.encode(program[index], config))
                index += 1
            counts["executes"] += ctx.get(dut.executes)
            counts["completes"] += ctx.get(dut.completes)
            if index:
                counts["cycles"] += 1
            await ctx.tick()
            assert counts["cycles"] < 10 * micro_ops + 100
        await ctx.tick()   # the last micro-op's write lands the cycle after it completes
        assert not ctx.get(dut.acc_write.en)
        for row in range(config.depth("acc")):
            got = unpack_signed(ctx.get(mems["acc"].data[row]), 32, lanes)
            np.testing.assert_array_equal(got, expected[row], err_msg=f"acc[{row}]")
            if not np.array_equal(expected[row], acc[row]):   # written: out mirrors it
                out = unpack_signed(ctx.get(mems["out"].data[row]), 8, lanes)
                np.testing.assert_array_equal(out, to_int8(expected[row]),
                                              err_msg=f"out[{row}]")

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    assert counts["executes"] == micro_ops
    # Full rate but for the paced micro-ops, plus the pipeline's fill and a cycle
    # per empty instruction at most.
    assert counts["cycles"] <= micro_ops + paced + len(program) + 8


def test_unit_variant_is_chosen_by_the_config():
    """One class per unit variant, chosen once by the switches; another is refused."""
    assert [unit_variant(c, unit) for c in (TINY, TINY_PIPELINED) for unit in ("gemm", "alu")] \
        == [GemmUnit, AluUnit, GemmUnit, TwoCycleAluUnit]
    with pytest.raises(ValueError, match=r"^AluUnit: config tiny-pipelined needs TwoCycleAluUnit "
                                         r"\(two_cycle_alu 1\)$"):
        built(AluUnit, TINY_PIPELINED)
    with pytest.raises(ValueError, match=r"^unit must be one of \('gemm', 'alu'\), got 'fpu'$"):
        unit_variant(TINY, "fpu")
