"""The compute module's two units (GEMM, ALU) under Verilator, against fsim and numpy.

`tests.hw.compute_programs.overlap_program` overlaps each tile's REQUANT
epilogue (ALU unit) with the next tile's GEMMs (GEMM unit), runs same-unit
instructions back to back on the same acc rows, and checks that pushes wait
for every earlier instruction of the other unit. The same program with every
overlap bit clear must give the same bytes in more cycles.
`chained_overlap_program` orders an ``overlap`` instruction after the other
unit's older instruction only through that unit's newest one (the differential
benchmark's mismatches, shrunk); a compiled dense layer has the same shape.
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.compiler import Dense, compile_op
from vdla.hw.config import PRESETS
from vdla.runtime.runner import AccelRunner
from vdla.sim.backends import get_backend
from vdla.sim.rtl import RtlSimulator, build_model
from vdla.sim.errors import RaceError
from tests.hw.compute_programs import chained_overlap_program, overlap_program

pytestmark = pytest.mark.rtl


def _run_both(config, rtl, program):
    expected, actual = program.dram.copy(), program.dram.copy()
    reference = get_backend("fsim", config).run(expected, program.insn_offset, program.insn_count)
    result = rtl.run(actual, program.insn_offset, program.insn_count)
    differ = np.flatnonzero(expected != actual)
    assert differ.size == 0, f"{differ.size} DRAM bytes differ from fsim, first at {differ[0]}"
    np.testing.assert_array_equal(program.out_bytes(actual), program.expected_out)
    for counter in ("gemm_uops", "alu_uops"):
        assert result.counters[counter] == reference.counters[counter], counter
    return result


@pytest.mark.parametrize("preset", ["tiny", "default"])
@pytest.mark.parametrize("m, n, k, tiles", [(1, 1, 4, 6), (2, 1, 3, 5), (4, 4, 8, 8)])
def test_overlapped_epilogues_match_fsim_and_numpy(preset, m, n, k, tiles):
    config = PRESETS[preset]
    rtl = RtlSimulator(config, build=build_model(config))
    results = {overlap: _run_both(config, rtl, overlap_program(config, tiles=tiles, m=m, n=n,
                                                                k=k, overlap=overlap))
               for overlap in (True, False)}
    assert results[True].cycles < results[False].cycles
    for result in results.values():
        counters = result.counters
        assert max(counters["gemm_busy"], counters["alu_busy"]) <= counters["compute_busy"]


@pytest.mark.parametrize("preset", ["tiny", "default"])
@pytest.mark.parametrize("first_unit", ["gemm", "alu"])
@pytest.mark.parametrize("middle_overlap", [True, False])
def test_overlap_after_other_units_newest_sees_its_older_writes(preset, first_unit,
                                                                middle_overlap):
    config = PRESETS[preset]
    program = chained_overlap_program(config, first_unit, middle_overlap)
    _run_both(config, RtlSimulator(config, build=build_model(config)), program)
    # Only the middle instruction orders the last one after the first.
    racy = chained_overlap_program(config, first_unit, middle_overlap, with_middle=False)
    with pytest.raises(RaceError, match=r"acc\[11\] written by instruction 5 .* with nothing "
                                        r"ordering"):
        get_backend("fsim", config).run(racy.dram.copy(), racy.insn_offset, racy.insn_count)


def test_compiled_dense_layer_with_chained_overlap_is_bit_exact():
    # The compiler's overlap pass relies on the same ordering (compiler.accel.passes.overlap).
    # Here a hoisted ALU reset (overlap) zeroes rows, the REQUANT after it (no
    # overlap, same unit) orders them, and the next GEMM (overlap) accumulates onto
    # them: before the fix it read one row before the reset had written it.
    op = Dense(batch=3, in_features=13, out_features=6, bias=True, shift=4)
    config = PRESETS["tiny"]
    inputs = op.random_inputs(np.random.default_rng(7))
    result = AccelRunner(config, sim="rtl").run(compile_op(op, config), inputs)
    np.testing.assert_array_equal(result.outputs["out"], op.reference(**inputs))
