"""`hw.sequencer.LoopSequencer` alone, in Amaranth's simulator, against the ISA's loop nest."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from vdla.hw.config import PRESETS
from vdla.hw.sequencer import LoopSequencer, ends_variant, index_kinds, loop_layout

TINY = PRESETS["tiny"]
# The same walk, taking each instruction only once idle (`HwConfig.sequencer_gap`), and
# with the loop ends in registers (`HwConfig.registered_control`).
CONFIGS = [TINY, TINY.replace(sequencer_gap=1, name="tiny-gap"),
           TINY.replace(registered_control=1, name="tiny-registered"),
           TINY.replace(sequencer_gap=1, registered_control=1, name="tiny-gap-registered")]


def reference(insn: dict, kinds) -> list[tuple]:
    """The micro-ops of one instruction in execution order, as `hw/isa.py` defines them."""
    emitted = []
    for i in range(insn["iter_out"]):
        for j in range(insn["iter_in"]):
            for u in range(insn["uop_begin"], insn["uop_end"]):
                emitted.append((u,) + tuple(i * insn[f"{k}_factor_out"] + j * insn[f"{k}_factor_in"]
                                            for k in kinds))
    return emitted


def random_instruction(rng, config, kinds) -> dict:
    fields = loop_layout(config, "wgt" in kinds)
    begin = int(rng.integers(0, 6))
    insn = {"uop_begin": begin, "uop_end": begin + int(rng.integers(0, 4)),
            "iter_out": int(rng.integers(0, 4)), "iter_in": int(rng.integers(0, 4))}
    for k in kinds:
        for side in ("out", "in"):
            bits = fields.members[f"{k}_factor_{side}"]
            insn[f"{k}_factor_{side}"] = int(rng.integers(0, min(1 << bits, 50)))
    return insn


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("with_wgt", [True, False], ids=["gemm", "alu"])
@pytest.mark.parametrize("paced", [False, True], ids=["full_rate", "paced"])
def test_sequencer_walks_back_to_back_loop_nests(config, with_wgt, paced):
    kinds = index_kinds(with_wgt)
    dut = LoopSequencer(config, with_wgt)
    rng = np.random.default_rng(7 + with_wgt + 2 * paced)
    program = [random_instruction(rng, config, kinds) for _ in range(25)]
    program += [dict(program[0], iter_out=0), dict(program[1], uop_end=program[1]["uop_begin"])]
    expected = [reference(insn, kinds) for insn in program]
    emitted, lasts, cycles = [], [], {"busy": 0}

    async def testbench(ctx):
        index = 0
        current: list = []
        for _ in range(2000):
            if ctx.get(dut.valid):
                offsets = tuple(ctx.get(getattr(dut.offset, k)) for k in kinds)
                current.append((ctx.get(dut.u),) + offsets)
                cycles["busy"] += 1
            if ctx.get(dut.last):
                lasts.append(len(emitted))
                emitted.append(current)
                current = []
            begin = index < len(program) and ctx.get(dut.ready)
            ctx.set(dut.begin, begin)
            if begin:
                for name, value in program[index].items():
                    ctx.set(getattr(dut.insn, name), value)
                ctx.set(dut.paced, paced)
                index += 1
            await ctx.tick()
            if len(emitted) == len(program):
                break

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    assert emitted == expected
    micro_ops = sum(len(e) for e in expected)
    assert cycles["busy"] == micro_ops


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_sequencer_paces_and_chains_without_bubbles(config):
    """Full rate: one micro-op every cycle across instructions (with ``sequencer_gap``,
    one idle cycle between them); paced: every other cycle."""
    kinds = index_kinds(True)
    insn = {"uop_begin": 0, "uop_end": 3, "iter_out": 2, "iter_in": 1}
    insn.update({f"{k}_factor_{side}": 1 for k in kinds for side in ("out", "in")})
    for paced, spacing in ((False, 1), (True, 2)):
        dut = LoopSequencer(config, True)
        valid_cycles = []

        async def testbench(ctx, dut=dut, paced=paced, valid_cycles=valid_cycles):
            given = 0
            for cycle in range(40):
                if ctx.get(dut.valid):
                    valid_cycles.append(cycle)
                begin = given < 2 and ctx.get(dut.ready)
                ctx.set(dut.begin, begin)
                if begin:
                    for name, value in insn.items():
                        ctx.set(getattr(dut.insn, name), value)
                    ctx.set(dut.paced, paced)
                    given += 1
                await ctx.tick()

        sim = Simulator(dut)
        sim.add_clock(1e-6)
        sim.add_testbench(testbench)
        sim.run()
        assert len(valid_cycles) == 12
        boundary = spacing + 1 if config.sequencer_gap and not paced else spacing
        assert np.diff(valid_cycles).tolist() == [spacing] * 5 + [boundary] + [spacing] * 5, (
            paced, valid_cycles)


def test_ends_variant_is_chosen_once_by_the_config():
    from vdla.hw.sequencer import ComparedEnds, RegisteredEnds
    assert [ends_variant(config) for config in CONFIGS] == [
        RegisteredEnds if config.registered_control else ComparedEnds for config in CONFIGS]
    assert {ends_variant(config) for config in CONFIGS} == {
        ComparedEnds, RegisteredEnds}
