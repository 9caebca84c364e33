"""fsim GEMM and ALU semantics against independent loop references (Python ints / int64)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from vdla.hw.isa import REQUANT_OPS, Alu, AluOp, Gemm, Uop, requant_imm
from vdla.testing.oracles import alu, requant, to_int8, wrap32
from tests.sim.image import CONFIGS, TINY, Image, random_elements

CONFIG_IDS = [c.name for c in CONFIGS]


def loop_nest(insn):
    for i in range(insn.iter_out):
        for j in range(insn.iter_in):
            for u in range(insn.uop_begin, insn.uop_end):
                yield i, j, u


def preloaded(config, rng, acc_low=None, acc_high=None):
    """An image whose program starts by filling inp, wgt and acc with random data."""
    image = Image(config)
    state = {kind: random_elements(rng, config, kind, config.depth(kind), acc_low, acc_high)
             if kind == "acc" else random_elements(rng, config, kind, config.depth(kind))
             for kind in ("inp", "wgt", "acc")}
    program = [image.load_all("inp", state["inp"]),
               image.load_all("wgt", state["wgt"], push_next=True),
               image.load_all("acc", state["acc"])]
    return image, state, program


@st.composite
def loops(draw, config, fields):
    """Loop extents, factors and micro-ops whose indices stay inside every buffer."""
    iter_out = draw(st.integers(1, 3))
    iter_in = draw(st.integers(1, 3))
    count = draw(st.integers(1, 4))
    first = draw(st.integers(0, 5))
    factors, bounds = {}, {}
    for field, buffer in fields.items():
        prefix = {"dst": "dst", "src": "src", "wgt": "wgt"}[field]
        outer, inner = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        factors[f"{prefix}_factor_out"], factors[f"{prefix}_factor_in"] = outer, inner
        bounds[field] = config.depth(buffer) - 1 - (iter_out - 1) * outer - (iter_in - 1) * inner
    # A narrow range makes repeated and overlapping indices likely.
    span = draw(st.sampled_from([4, 16, 1 << 16]))
    uops = [Uop(**{field: draw(st.integers(0, min(bound, span))) for field, bound in bounds.items()})
            for _ in range(count)]
    return dict(iter_out=iter_out, iter_in=iter_in, uop_begin=first, uop_end=first + count,
                **factors), uops


# ------------------------------------------------------------------ GEMM
def gemm_reference(state, insn, uops):
    acc = state["acc"].astype(np.int64)
    if insn.reset:
        for i, j, u in loop_nest(insn):
            acc[uops[u - insn.uop_begin].dst + i * insn.dst_factor_out + j * insn.dst_factor_in] = 0
        return wrap32(acc).astype(np.int32)
    inp, wgt = state["inp"].astype(np.int64), state["wgt"].astype(np.int64)
    for i, j, u in loop_nest(insn):
        uop = uops[u - insn.uop_begin]
        dst = uop.dst + i * insn.dst_factor_out + j * insn.dst_factor_in
        src = uop.src + i * insn.src_factor_out + j * insn.src_factor_in
        w = uop.wgt + i * insn.wgt_factor_out + j * insn.wgt_factor_in
        if insn.overwrite:
            acc[dst] = inp[src] @ wgt[w].T
        else:
            acc[dst] += inp[src] @ wgt[w].T
    return wrap32(acc).astype(np.int32)


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@settings(max_examples=30, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), reset=st.booleans(),
       overwrite=st.booleans())
def test_gemm_matches_loop_reference(config, data, seed, reset, overwrite):
    """Also GEMM_OVERWRITE: repeated destinations (a narrow index span) keep the last
    micro-op's product, the old value ignored; with reset, zero."""
    rng = np.random.default_rng(seed)
    image, state, program = preloaded(config, rng)
    fields, uops = data.draw(loops(config, {"dst": "acc", "src": "inp", "wgt": "wgt"}))
    insn = Gemm(pop_prev=True, reset=reset, overwrite=overwrite, **fields)
    program += [image.load_uops(uops, sram_base=insn.uop_begin), insn]
    result = image.run(program, dump_sram=True)
    expected = gemm_reference(state, insn, uops)
    sram = result.details["sram"]
    np.testing.assert_array_equal(sram["acc"].reshape(expected.shape), expected)
    np.testing.assert_array_equal(sram["out"].reshape(expected.shape), to_int8(expected))
    executions = insn.iter_out * insn.iter_in * len(uops)
    assert result.counters["gemm_uops"] == executions
    assert result.counters["gemm_macs"] == (0 if reset else executions * config.macs_per_cycle)


def test_gemm_accumulation_wraps_around():
    """Large accumulators overflow int32 exactly as two's complement."""
    config = TINY
    image = Image(config)
    inp = np.full((1, 1, 4), -128, np.int8)
    wgt = np.full((1, 4, 4), -128, np.int8)  # each product +16384, each dot product 65536
    acc = np.full((1, 1, 4), 2**31 - 65536 * 3, np.int32)
    uops = [Uop(0, 0, 0)]
    program = [image.load_all("inp", inp), image.load_all("wgt", wgt, push_next=True),
               image.load_all("acc", acc), image.load_uops(uops),
               Gemm(pop_prev=True, uop_end=1, iter_out=5, iter_in=7)]
    result = image.run(program, dump_sram=True)
    expected = wrap32(int(acc[0, 0, 0]) + 35 * 65536)
    assert expected < 0  # the case is only interesting if it wraps
    np.testing.assert_array_equal(result.details["sram"]["acc"][0], np.full((1, 4), expected))


def test_gemm_overwrite_ignores_the_accumulator_then_gemm_adds():
    """A reduction split as GEMM_OVERWRITE (first step) then GEMM (the rest) equals the
    whole sum, whatever acc held; the overwrite GEMM reads two entries twice."""
    config = TINY
    rng = np.random.default_rng(5)
    image = Image(config)
    inp = random_elements(rng, config, "inp", 6)
    wgt = random_elements(rng, config, "wgt", 6)
    acc = random_elements(rng, config, "acc", 4)
    # then dst d (0..3) += inp[d + i] @ wgt[i].T, i = 0, 1
    uops = [Uop(dst=d, src=d, wgt=0) for d in range(4)] + [Uop(dst=1, src=0, wgt=1)]
    program = [image.load_all("inp", inp), image.load_all("wgt", wgt, push_next=True),
               image.load_all("acc", acc), image.load_uops(uops),
               Gemm(pop_prev=True, uop_begin=0, uop_end=5, overwrite=True),
               Gemm(uop_begin=0, uop_end=4, iter_out=2, src_factor_out=1, wgt_factor_out=1,
                    dst_factor_out=0)]
    result = image.run(program, dump_sram=True)
    inp64, wgt64 = inp.astype(np.int64), wgt.astype(np.int64)
    # entry 1's first write (d=1) is overwritten by the fifth micro-op (inp[0] @ wgt[1])
    first = [inp64[d] @ wgt64[0].T for d in range(4)]
    first[1] = inp64[0] @ wgt64[1].T
    expected = np.stack([first[d] + inp64[d] @ wgt64[0].T + inp64[d + 1] @ wgt64[1].T
                         for d in range(4)]).reshape(4, -1)
    np.testing.assert_array_equal(result.details["sram"]["acc"][:4].reshape(4, -1),
                                  wrap32(expected))


def test_gemm_with_empty_loop_does_nothing():
    image = Image(TINY)
    acc = random_elements(np.random.default_rng(1), TINY, "acc", 4)
    program = [image.load_all("acc", acc), Gemm(uop_begin=0, uop_end=1, iter_out=0)]
    result = image.run(program, dump_sram=True)
    np.testing.assert_array_equal(result.details["sram"]["acc"][:4], acc)
    assert result.counters["gemm_uops"] == 0


# ------------------------------------------------------------------ ALU
def alu_reference(acc: np.ndarray, insn: Alu, uops) -> np.ndarray:
    rows = [[int(v) for v in row.reshape(-1)] for row in acc]
    for i, j, u in loop_nest(insn):
        uop = uops[u - insn.uop_begin]
        dst = uop.dst + i * insn.dst_factor_out + j * insn.dst_factor_in
        if insn.reset:
            rows[dst] = [0] * len(rows[dst])
            continue
        if insn.use_imm:
            # REQUANT takes its shift from imm and adds no bias with use_imm.
            operand = [0 if insn.alu_op in REQUANT_OPS else insn.imm] * len(rows[dst])
        else:
            operand = list(rows[uop.src + i * insn.src_factor_out + j * insn.src_factor_in])
        rows[dst] = [int(v) for v in alu(insn.alu_op, rows[dst], operand, insn.imm)]
    return np.array(rows, dtype=np.int64).astype(np.int32).reshape(acc.shape)


def run_alu(config, acc, insn, uops):
    image = Image(config)
    program = [image.load_all("acc", acc), image.load_uops(uops, sram_base=insn.uop_begin), insn]
    return image.run(program, dump_sram=True)


# Values at the int32 edges, shift amounts beyond 31 and negative ones.
EDGE_VALUES = [0, 1, -1, 7, -7, 127, 128, -129, 255, 31, 32, 33, -33,
               2**31 - 1, -2**31, 2**30, -2**30 + 3, 65535, -65536]


@pytest.mark.parametrize("op", list(AluOp), ids=[op.name for op in AluOp])
@pytest.mark.parametrize("use_imm", [False, True], ids=["register", "imm"])
@pytest.mark.parametrize("imm", [-32768, -5, -1, 0, 3, 31, 33, 32767])
def test_alu_op_on_edge_values(op, use_imm, imm):
    config = TINY
    width = config.batch * config.block_out
    values = np.array(EDGE_VALUES + EDGE_VALUES[::-1] + EDGE_VALUES[3:] + EDGE_VALUES[:3],
                      dtype=np.int64)
    count = len(values) // width
    # rows [0, count) are the destinations, [count, 2 count) the register operands
    dst_rows = values[:count * width].reshape(count, config.batch, config.block_out)
    src_rows = np.roll(values, 5)[:count * width].reshape(dst_rows.shape)
    acc = np.concatenate([dst_rows, src_rows]).astype(np.int32)
    insn = Alu(alu_op=op, use_imm=use_imm, imm=imm, uop_end=1, iter_out=count,
               dst_factor_out=1, src_factor_out=1)
    uops = [Uop(dst=0, src=count)]
    result = run_alu(config, acc, insn, uops)
    expected = alu_reference(acc, insn, uops)
    np.testing.assert_array_equal(result.details["sram"]["acc"][:2 * count], expected)
    np.testing.assert_array_equal(result.details["sram"]["out"][:2 * count], to_int8(expected))
    assert result.counters["alu_uops"] == count


@pytest.mark.parametrize("op, a, b, expected", [
    (AluOp.SHR, -7, 1, -4),            # arithmetic, rounds toward -inf
    (AluOp.SHR, -7, 33, -4),           # amount is b & 31
    (AluOp.SHR, 1 << 30, -1, 0),       # -1 & 31 = 31
    (AluOp.SHL, 1, 31, -2**31),
    (AluOp.SHL, 3, 32, 3),             # 32 & 31 = 0
    (AluOp.ADD, 2**31 - 1, 1, -2**31),
    (AluOp.MUL, 65536, 65536, 0),
    (AluOp.REQUANT, 100, 24, 124),        # imm 0: no shift, no relu
    (AluOp.REQUANT, 1000, 24, 127),
    (AluOp.REQUANT, -1000, -24, -128),
    (AluOp.MUL, -2**31, -1, -2**31),
    (AluOp.MIN, -2**31, 2**31 - 1, -2**31),
    (AluOp.MAX, -1, -2, -1),
])
def test_alu_known_answers(op, a, b, expected):
    """Hand-computed results, independent of the reference function above."""
    config = TINY
    acc = np.zeros((2, config.batch, config.block_out), np.int32)
    acc[0], acc[1] = a, b
    result = run_alu(config, acc, Alu(alu_op=op, uop_end=1), [Uop(dst=0, src=1)])
    assert (result.details["sram"]["acc"][0] == expected).all()


@pytest.mark.parametrize("a, b, imm, expected", [
    (-1000, 24, 5, -31),           # -976 >> 5 = -30.5 floors to -31
    (-1000, 24, 5 | 32, 0),        # relu
    (4000, 96, 5 | 32, 127),       # 4096 >> 5 = 128 saturates
    (2**31 - 1, 1, 24, -128),      # the add wraps before the shift
    (77, 3, 32 + 64, 80),          # imm bits above relu are ignored
])
def test_requant_known_answers(a, b, imm, expected):
    config = TINY
    acc = np.zeros((2, config.batch, config.block_out), np.int32)
    acc[0], acc[1] = a, b
    result = run_alu(config, acc, Alu(alu_op=AluOp.REQUANT, imm=imm, uop_end=1),
                     [Uop(dst=0, src=1)])
    assert (result.details["sram"]["acc"][0] == expected).all()
    no_bias = run_alu(config, acc, Alu(alu_op=AluOp.REQUANT, use_imm=True, imm=imm, uop_end=1),
                      [Uop(dst=0, src=1)])
    assert (no_bias.details["sram"]["acc"][0] == requant(a, 0, imm)).all()


# v / 2**s with the half 2**(s-1) folded into the bias, as the compiler does: REQUANT
# rounds a tie half up, REQUANT_EVEN to the even neighbour (numpy's and onnxruntime's).
@pytest.mark.parametrize("v, shift, half_up, half_even", [
    (5, 1, 3, 2),                  # 2.5
    (3, 1, 2, 2),                  # 1.5
    (1, 1, 1, 0),                  # 0.5
    (-1, 1, 0, 0),                 # -0.5
    (-3, 1, -1, -2),               # -1.5
    (-5, 1, -2, -2),               # -2.5
    (6, 2, 2, 2),                  # 1.5
    (10, 2, 3, 2),                 # 2.5
    (11, 2, 3, 3),                 # 2.75: no tie
    (-10, 2, -2, -2),              # -2.5
    (-11, 2, -3, -3),              # -2.75
    (253 << 7, 8, 127, 126),       # 126.5
    (255 << 7, 8, 127, 127),       # 127.5: 128 saturates
    (-255 << 7, 8, -127, -128),    # -127.5
    (-257 << 7, 8, -128, -128),    # -128.5
    (-(1 << 29) - (1 << 30), 31, -1, -1),  # -0.75: no tie at the largest shift
    (-(1 << 30), 31, 0, 0),        # -0.5
    (1 << 29, 30, 1, 0),           # 0.5
    (7, 0, 7, 7),                  # no shift: nothing to round
])
@pytest.mark.parametrize("relu", [False, True])
def test_requant_even_known_answers(v, shift, half_up, half_even, relu):
    """Ties at every position, negative ones, at the clip bounds and the largest shift."""
    config = TINY
    acc = np.zeros((2, config.batch, config.block_out), np.int32)
    half = 1 << shift >> 1
    acc[0], acc[1] = v - 1000, 1000 + half
    for op, expected in ((AluOp.REQUANT, half_up), (AluOp.REQUANT_EVEN, half_even)):
        result = run_alu(config, acc, Alu(alu_op=op, imm=requant_imm(shift, relu), uop_end=1),
                         [Uop(dst=0, src=1)])
        assert (result.details["sram"]["acc"][0] == max(expected, 0 if relu else -128)).all(), op


def test_alu_imm_is_sign_extended():
    config = TINY
    acc = np.zeros((1, config.batch, config.block_out), np.int32)
    result = run_alu(config, acc, Alu(alu_op=AluOp.ADD, use_imm=True, imm=-1, uop_end=1),
                     [Uop(dst=0)])
    assert (result.details["sram"]["acc"][0] == -1).all()


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@settings(max_examples=60, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), op=st.sampled_from(list(AluOp)),
       use_imm=st.booleans(), imm=st.integers(-32768, 32767), reset=st.booleans())
def test_alu_matches_sequential_reference(config, data, seed, op, use_imm, imm, reset):
    """Random loop nests, including repeated destinations and sources that an
    earlier micro-op of the same instruction wrote (the order-sensitive cases)."""
    rng = np.random.default_rng(seed)
    acc = random_elements(rng, config, "acc", config.depth("acc"))
    acc[rng.random(len(acc)) < 0.3] = rng.integers(-40, 40, dtype=np.int32)
    fields, uops = data.draw(loops(config, {"dst": "acc", "src": "acc"}))
    insn = Alu(alu_op=op, use_imm=use_imm, imm=imm, reset=reset and data.draw(st.booleans()),
               **fields)
    result = run_alu(config, acc, insn, uops)
    expected = alu_reference(acc, insn, uops)
    np.testing.assert_array_equal(result.details["sram"]["acc"], expected)
    np.testing.assert_array_equal(result.details["sram"]["out"], to_int8(expected))


@pytest.mark.parametrize("op", [AluOp.MAX, AluOp.MIN, AluOp.ADD, AluOp.SHR, AluOp.MUL],
                         ids=lambda op: op.name)
def test_alu_repeated_destination_applies_every_micro_op(op):
    """Max pooling shape: several sources reduce into one destination."""
    config = TINY
    rng = np.random.default_rng(7)
    acc = rng.integers(-1000, 1000, (10, config.batch, config.block_out)).astype(np.int32)
    acc[1:] = np.abs(acc[1:]) % 5 if op == AluOp.SHR else acc[1:]
    insn = Alu(alu_op=op, uop_end=1, iter_in=9, src_factor_in=1)
    uops = [Uop(dst=0, src=1)]
    result = run_alu(config, acc, insn, uops)
    np.testing.assert_array_equal(result.details["sram"]["acc"][:len(acc)],
                                  alu_reference(acc, insn, uops))
