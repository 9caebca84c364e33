"""`hw.alu`'s ALU variants under the Amaranth simulator against `vdla.testing.oracles.alu`."""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw import isa
from vdla.hw.alu import RegisteredTwoCycleAlu, TwoCycleAlu, VectorAlu, alu_variant
from vdla.testing.oracles import alu, pack, unpack_signed
from tests.hw.amaranth_sim import TINY, run
from tests.hw.unelaborated import built


@pytest.mark.parametrize("op", isa.REQUANT_OPS, ids=lambda op: op.name)
def test_requant_reference_agrees_with_fsim(op):
    """The test's REQUANT models and the functional simulator's are the same functions
    (random sums, and sums whose low bits are zero: ties of every shift)."""
    from vdla.sim.fsim import _alu_apply
    rng = np.random.default_rng(11)
    a = np.concatenate([rng.integers(-2**31, 2**31, 2000),
                        rng.integers(-2**20, 2**20, 2000) << rng.integers(0, 12, 2000)])
    b = np.concatenate([rng.integers(-2**31, 2**31, 2000), np.zeros(2000, np.int64)])
    for imm in (0, 1, 7, 31, 32, 39, 63, 64 + 5, -1, -32, -2**15, 2**15 - 1):
        want = alu(op, a, b, imm)
        got = _alu_apply(op, a, b, imm)
        np.testing.assert_array_equal((got & 0xFFFFFFFF).astype(np.uint32).view(np.int32), want,
                                      err_msg=f"imm {imm}")


ALU_EDGES = np.array([0, 1, -1, 2**31 - 1, -2**31, 31, 32, 33, -31, -32, 127, 128, -128, -129,
                      255, 256, 0x12345678, -0x789ABCDF], dtype=np.int64)
# REQUANT immediates: every shift with and without relu, and bits above 5 that must be ignored.
REQUANT_IMMS = [0, 1, 8, 31, 32, 33, 40, 63, 64, 64 + 32 + 3, 0x7FC0 | 9, -1, -32, -64 + 4,
                -2**15, 2**15 - 1]


@pytest.mark.parametrize("config", [
    TINY, TINY.replace(two_cycle_alu=1, name="tiny-two-cycle"),
    TINY.replace(two_cycle_alu=1, registered_control=1, name="tiny-two-cycle-registered")],
    ids=lambda c: c.name)
@pytest.mark.parametrize("op", list(isa.AluOp), ids=lambda op: op.name)
def test_alu_matches_numpy(config, op):
    """One cycle: the result follows the inputs at once; two cycles (`two_cycle_alu`):
    it is read after one clock edge with the inputs held."""
    lanes = config.batch * config.block_out
    dut = alu_variant(config)(config)
    rng = np.random.default_rng(int(op))
    edges = ALU_EDGES
    cases = [(rng.choice(edges, lanes), rng.choice(edges, lanes)) for _ in range(20)]
    cases += [(rng.integers(-2**31, 2**31, lanes), rng.integers(-2**31, 2**31, lanes))
              for _ in range(20)]
    cases += [(rng.integers(-2**31, 2**31, lanes), rng.integers(-64, 64, lanes)) for _ in range(10)]
    if op in isa.REQUANT_OPS:
        # Small sums (every clip branch), sums that wrap, sums near the clip bounds.
        cases += [(rng.integers(-5000, 5000, lanes), rng.integers(-5000, 5000, lanes))
                  for _ in range(10)]
        # Ties of every shift up to 9 (sums whose low bits are zero), negative ones
        # included, and the ties at the clip bounds and around zero.
        cases += [(rng.integers(-300, 300, lanes) << rng.integers(0, 10, lanes),
                   np.zeros(lanes, np.int64)) for _ in range(10)]
        cases.append((np.array([255 << 8, -257 << 8, -1 << 8, 1 << 8][:lanes]),
                      np.array([1 << 7, 1 << 7, 1 << 7, -(1 << 7)][:lanes])))
        cases.append((np.array([2**31 - 1, -2**31, 2**31 - 100, -2**31 + 3][:lanes]),
                      np.array([1, -1, 200, -7][:lanes])))
        imms = REQUANT_IMMS
    else:
        imms = [0, -1]  # other ops ignore the immediate port

    async def testbench(ctx):
        ctx.set(dut.op, op)
        for imm in imms:
            ctx.set(dut.imm, imm & 0xFFFF)
            for a, b in cases:
                ctx.set(dut.a, pack(a, 32))
                ctx.set(dut.b, pack(b, 32))
                if config.two_cycle_alu:
                    await ctx.tick()
                got = unpack_signed(ctx.get(dut.result), 32, lanes)
                np.testing.assert_array_equal(got, alu(op, a, b, imm),
                                              err_msg=f"{op.name} imm {imm} {a} {b}")

    run(dut, testbench)


def test_alu_variant_is_chosen_by_the_config():
    """One class per variant, chosen once by the switches; a class that the config's
    switches do not choose is refused (the unit pipeline paces by the switches)."""
    two = TINY.replace(two_cycle_alu=1, name="two")
    registered = two.replace(registered_control=1, name="two-registered")
    assert [alu_variant(c) for c in (TINY, two, registered)] == [
        VectorAlu, TwoCycleAlu, RegisteredTwoCycleAlu]
    with pytest.raises(ValueError, match=r"^VectorAlu: config two needs TwoCycleAlu "
                                         r"\(two_cycle_alu 1, registered_control 0\)$"):
        built(VectorAlu, two)
