"""The reset on the GEMM unit (`compiler.accel.passes.gemm_reset`): the split of a GEMM
nest into its reduction's first step and the rest, the cost model's choice, and layers
with and without it bit-exact against the numpy reference."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from vdla.compiler import Conv2d, compile_op
from vdla.compiler.accel import ir
from vdla.compiler.accel.cost import estimate, reset_on_gemm
from vdla.compiler.accel.driver import compile_function
from vdla.compiler.accel.ir import Access, Affine, Buffer
from vdla.compiler.accel.passes import gemm_reset as gemm_reset_pass
from vdla.compiler.accel.passes.gemm_reset import first_step_split
from vdla.hw import isa
from vdla.hw.config import PRESETS
from vdla.runtime.runner import AccelRunner

TINY, DEFAULT = PRESETS["tiny"], PRESETS["default"]


def _micro_ops(stmt) -> list[tuple[int, int, int, bool]]:
    """Every (dst, src, wgt, overwrite) a nest runs, by walking its loops in Python."""
    loops, leaf = ir.loop_nest(stmt)
    result = []

    def walk(depth, env):
        if depth == len(loops):
            result.append((leaf.dst.index.evaluate(env), leaf.src.index.evaluate(env),
                           leaf.wgt.index.evaluate(env), leaf.overwrite))
            return
        for value in range(loops[depth].extent):
            walk(depth + 1, env | {loops[depth].var: value})
    walk(0, {})
    return result


def _conv_nest(nk, nh, nc, kh, kw):
    acc, inp, wgt = Buffer("acc", "acc", 512), Buffer("inp", "inp", 512), Buffer("wgt", "wgt", 512)
    k, oh, c, y, x = (Affine.var(v) for v in ("k", "oh", "c", "kh", "kw"))
    gemm = ir.Gemm(Access(acc, k * nh + oh), Access(inp, (c * (nh + kh) + oh + y) * kw + x),
                   Access(wgt, ((k * nc + c) * kh + y) * kw + x))
    return ir.nest([("k", nk), ("oh", nh), ("c", nc), ("kh", kh), ("kw", kw)], gemm)


@pytest.mark.parametrize("extents", [(2, 3, 4, 3, 2), (3, 2, 2, 1, 1), (2, 2, 1, 3, 3),
                                     (2, 3, 1, 1, 1)])
def test_split_runs_every_micro_op_once_and_overwrites_each_entry_first(extents):
    nest = _conv_nest(*extents)
    whole = _micro_ops(nest)
    nests = first_step_split(nest)
    reductions = sum(extent > 1 for extent in extents[2:])
    assert len(nests) == 1 + reductions
    parts = [_micro_ops(part) for part in nests]
    # Together: the same micro-ops as the nest, each once.
    assert collections.Counter((d, s, w) for part in parts for d, s, w, _ in part) == \
        collections.Counter((d, s, w) for d, s, w, _ in whole)
    # The first nest overwrites every entry exactly once, at the reduction's origin; the
    # rest accumulate.
    first = parts[0]
    assert all(flag for *_, flag in first) and not any(flag for part in parts[1:]
                                                       for *_, flag in part)
    nk, nh = extents[:2]
    assert sorted(d for d, *_ in first) == list(range(nk * nh))
    origin = {d: (s, w) for d, s, w, _ in whole[::-1]}    # each entry's first micro-op
    assert all(origin[d] == (s, w) for d, s, w, _ in first)


def _run(op, config, inputs):
    program = compile_op(op, config)
    result = AccelRunner(config).run(program, inputs)
    np.testing.assert_array_equal(result.outputs["out"], op.reference(**inputs))
    return program


def _counts(program):
    overwrite = sum(isinstance(i, isa.Gemm) and i.overwrite for i in program.instructions)
    resets = sum(isinstance(i, isa.Alu) and i.reset for i in program.instructions)
    return overwrite, resets


def _pointwise_stride2(config, channels=64):
    op = Conv2d(1, channels, 2 * channels, 28, 28, kernel=1, stride=2, shift=9, bias=True,
                relu=True)
    return op, op.random_inputs(np.random.default_rng(3))


@pytest.mark.parametrize("config", [TINY, DEFAULT], ids=lambda c: c.name)
def test_pointwise_stride2_layer_resets_on_the_gemm_bit_exact(config):
    """A 1x1 stride-2 layer is ALU-bound with the reset on the ALU: the cost model moves
    it to the GEMMs, and the program has no ALU reset left."""
    op, inputs = _pointwise_stride2(config)
    function = compile_function(op, config)
    assert reset_on_gemm(function.plan)
    assert (estimate(function.plan, gemm_reset=True)[0]
            < estimate(function.plan, gemm_reset=False)[0])
    program = _run(op, config, inputs)
    overwrite, resets = _counts(program)
    assert overwrite > 0 and resets == 0
    assert program.metadata["stats"]["gemm_reset"]["tiles"] > 0


@pytest.mark.parametrize("forced", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_layers_with_and_without_it_are_bit_exact(monkeypatch, forced, seed):
    """Random convs (3x3 and 1x1, padding, several chunks, residuals) with the reset
    forced onto the GEMMs or kept on the ALU: the same outputs as numpy."""
    monkeypatch.setattr(gemm_reset_pass, "reset_on_gemm", lambda plan: forced)
    rng = np.random.default_rng(40 + seed)
    kernel = int(rng.choice([1, 3]))
    residual = int(rng.integers(0, 9)) if seed % 3 == 2 else None
    op = Conv2d(int(rng.integers(1, 3)), int(rng.integers(1, 40)), int(rng.integers(1, 30)),
                int(rng.integers(3, 10)), int(rng.integers(3, 10)), kernel=kernel,
                stride=int(rng.integers(1, 3)), padding=int(rng.integers(0, kernel)),
                bias=bool(seed % 2), relu=bool(rng.integers(2)), shift=int(rng.integers(4, 9)),
                residual_shift=residual)
    inputs = op.random_inputs(rng)
    program = _run(op, TINY, inputs)
    overwrite, resets = _counts(program)
    assert (overwrite > 0, resets == 0) == (forced, forced)


def test_without_it_the_program_is_the_alu_reset_one(monkeypatch):
    """Switched off, the pass leaves the program as it was: every GEMM accumulates."""
    op, inputs = _pointwise_stride2(TINY, channels=16)
    monkeypatch.setattr(gemm_reset_pass, "reset_on_gemm", lambda plan: False)
    kept = compile_op(op, TINY)
    assert kept.metadata["stats"]["gemm_reset"] == {"tiles": 0, "kept": 0}
    assert _counts(kept)[0] == 0 and _counts(kept)[1] > 0
    monkeypatch.setattr(gemm_reset_pass, "reset_on_gemm", lambda plan: True)
    folded = compile_op(op, TINY)
    # The same GEMM work, one ALU reset instruction per tile less.
    gemm_uops = [sum(i.micro_ops for i in p.instructions if isinstance(i, isa.Gemm))
                 for p in (kept, folded)]
    assert gemm_uops[0] == gemm_uops[1]
    tiles = folded.metadata["stats"]["gemm_reset"]["tiles"]
    alu = [sum(isinstance(i, isa.Alu) for i in p.instructions) for p in (kept, folded)]
    assert tiles > 0 and alu[0] - alu[1] >= tiles


def test_gemm_bound_3x3_layer_keeps_the_alu_reset():
    """Where the ALU hides beside the GEMMs, the split's extra GEMM instructions only
    cost: the cost model keeps the reset on the ALU."""
    op = Conv2d(1, 64, 64, 28, 28, kernel=3, padding=1, shift=9)
    function = compile_function(op, DEFAULT)
    assert not reset_on_gemm(function.plan)
    assert function.stats["gemm_reset"] == {"tiles": 0, "kept": 0}
