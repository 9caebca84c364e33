"""Micro-op folding and the uop cache."""

import numpy as np
import pytest

from vdla.compiler import Conv2d, Dense, Schedule, compile_function, compile_op
from vdla.compiler.accel import ir
from vdla.compiler.accel.ir import Access, Affine
from vdla.compiler.accel.lower import lower
from vdla.compiler.accel.passes.tensorize import tensorize
from vdla.compiler.accel.passes.uop_folding import MAX_ITER, fold_nest
from vdla.hw import isa
from vdla.hw.config import PRESETS
from vdla.runtime.runner import AccelRunner
from tests.compiler.accel.ir_interpreter import new_sram, run_instructions, run_nest

TINY = PRESETS["tiny"]


def _gemm_nests(op, schedule, config=TINY):
    function = lower(schedule.check(op.geometry(), config))
    tensorize(function)
    return [s for st in function.all_stages() if st.kind == "compute" for s in st.body
            if isinstance(s, ir.Loop)]


@pytest.mark.parametrize("op, schedule", [
    (Conv2d(1, 8, 8, 6, 6, kernel=3, padding=1), Schedule(tile_h=3, tile_w=6, tile_k=2, tile_c=2)),
    (Conv2d(2, 4, 8, 7, 5, kernel=(1, 3), stride=2), Schedule(tile_b=2, tile_h=2, tile_w=2, tile_k=2)),
    (Dense(6, 12, 8), Schedule(tile_b=6, tile_k=2, tile_c=3)),
])
def test_folding_preserves_semantics_and_reduces_instructions(op, schedule):
    for nest in _gemm_nests(op, schedule):
        folded, _ = fold_nest(nest, TINY, max_folds=2, max_kernel=128)
        unfolded, _ = fold_nest(nest, TINY, max_folds=0, max_kernel=1)
        expected, got, got_unfolded = new_sram(TINY), new_sram(TINY), new_sram(TINY)
        run_nest(nest, expected)
        run_instructions(folded, got)
        run_instructions(unfolded, got_unfolded)
        assert np.array_equal(got["acc"], expected["acc"])
        assert np.array_equal(got_unfolded["acc"], expected["acc"])
        if len(unfolded) > 1:
            assert len(folded) < len(unfolded)
        # Folding never changes how much work is done.
        assert sum(i.instruction.micro_ops for i in folded) == \
            sum(i.instruction.micro_ops for i in unfolded)


def test_contiguous_alu_nest_fuses_to_one_uop():
    acc = ir.Buffer("acc", "acc", 4 * 6 * 7, base=10)
    b, k, p = (Affine.var(v) for v in "bkp")
    nest = ir.nest([("b", 4), ("k", 6), ("p", 7)],
                   ir.Alu(isa.AluOp.MIN, Access(acc, (b * 6 + k) * 7 + p), imm=127))
    (insn,), fusions = fold_nest(nest, TINY)
    assert fusions == 2
    assert len(insn.kernel[0]) == 1 and insn.kernel[0][0] == 10
    assert insn.instruction.iter_out * insn.instruction.iter_in == 4 * 6 * 7


def test_trip_counts_above_the_iter_field_are_split():
    acc = ir.Buffer("acc", "acc", 40000)
    nest = ir.nest([("p", 40000)], ir.Alu(isa.AluOp.MIN, Access(acc, Affine.var("p")), imm=1))
    instructions, _ = fold_nest(nest, PRESETS["default"], max_kernel=2048)
    for insn in instructions:
        assert insn.instruction.iter_out <= MAX_ITER and insn.instruction.iter_in <= MAX_ITER
    # Together the pieces still visit every acc entry exactly once.
    dst = sorted(int(d) + o * i.instruction.dst_factor_out + n * i.instruction.dst_factor_in
                 for i in instructions for d in i.kernel[0]
                 for o in range(i.instruction.iter_out) for n in range(i.instruction.iter_in))
    assert dst == list(range(40000))
    assert sum(i.instruction.micro_ops for i in instructions) == 40000


def test_identical_kernels_are_loaded_once():
    op = Conv2d(1, 16, 16, 16, 16, kernel=3, padding=1, bias=True)
    function = compile_function(op, PRESETS["default"],
                                Schedule(tile_h=2, tile_w=16, tile_k=1, tile_c=1))
    stats = function.stats["uop_cache"]
    uop_loads = [i for i in function.instructions
                 if isinstance(i.instruction, isa.Load) and i.instruction.memory_type == isa.MemType.UOP]
    # Every kernel fits the uop buffer: one LOAD before the first compute brings them all.
    assert stats["preloaded"]
    assert len(uop_loads) == stats["uop_loads"] == 1
    assert uop_loads[0].instruction.x_size == len(function.uop_words) == stats["uops_loaded"]
    computes = [i for i in function.instructions if isinstance(i.instruction, (isa.Gemm, isa.Alu))]
    assert stats["cache_hits"] == len(computes) > 5 * stats["kernels"]
    first_compute = next(i for i, insn in enumerate(function.instructions)
                         if isinstance(insn.instruction, (isa.Gemm, isa.Alu)))
    assert function.instructions[first_compute - 1] is uop_loads[0]


def test_small_uop_buffer_flushes_and_stays_correct():
    config = TINY.replace(uop_buffer_bytes=64, name="tiny-uop16")
    op = Conv2d(1, 8, 8, 6, 6, kernel=3, padding=1, bias=True, shift=3)
    program = compile_op(op, config, Schedule(tile_h=2, tile_w=6, tile_k=1, tile_c=2,
                                              virtual_threads=2))
    stats = program.metadata["stats"]["uop_cache"]
    assert stats["flushes"] > 0
    for instruction in program.instructions:
        if isinstance(instruction, (isa.Gemm, isa.Alu)):
            assert instruction.uop_end <= config.depth("uop")
    inputs = op.random_inputs(np.random.default_rng(3))
    result = AccelRunner(config).run(program, inputs)
    assert np.array_equal(result.outputs["out"], op.reference(**inputs))
