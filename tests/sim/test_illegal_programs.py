"""Illegal programs (`testing.illegal`): the checker refuses them exactly as fsim does.

Every class of defect that once reached the RTL unrefused (SRAM indices past
a buffer, STORE from inp/wgt, LOAD into out, micro-op ranges past the uop
buffer, dropped tokens, unordered races, ...) is made from legal random
programs at random; `sim.checker.check_program` must agree with fsim on
every one (same error, same message), and refuse every certain one.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

from vdla.hw.config import PRESETS
from vdla.sim.checker import WorkLimitError, check_program
from vdla.sim.errors import AddressError, InstructionError, SimulationError
from vdla.sim.fsim import FunctionalSimulator
from vdla.testing.illegal import MUTATIONS, mutate
from vdla.testing.programs import generate


def _outcome(function):
    try:
        function()
    except SimulationError as error:
        return type(error), str(error)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("config_name", ["tiny", "odd"])
def test_checker_and_fsim_refuse_the_same_programs(config_name):
    config = PRESETS[config_name]
    fsim = FunctionalSimulator(config)
    rng = np.random.default_rng(8)
    seen = collections.Counter()
    for seed in range(25):
        program = generate(config, 5000 + seed)
        for name in MUTATIONS:
            mutant = mutate(program, rng, name)
            if mutant is None:
                continue
            checked = _outcome(lambda m=mutant: check_program(config, m.dram, m.insn_offset,
                                                              m.insn_count))
            ran = _outcome(lambda m=mutant: fsim.run(m.dram.copy(), m.insn_offset, m.insn_count))
            assert checked == ran, f"seed {seed}, {mutant.description}"
            if mutant.certain:
                assert checked is not None, f"seed {seed} accepted: {mutant.description}"
            seen[name, checked is not None] += 1
    # Every certain class was exercised; the uncertain ones were refused at least once.
    for name in MUTATIONS:
        assert seen[name, True] > 0, name


def test_the_checker_moves_no_data():
    config = PRESETS["tiny"]
    program = generate(config, 17)
    image = program.dram.copy()
    image.flags.writeable = False   # a write would raise
    counters = check_program(config, image, program.insn_offset, program.insn_count)
    expected = FunctionalSimulator(config).run(program.dram.copy(), program.insn_offset,
                                               program.insn_count).counters
    assert counters == expected


@pytest.mark.parametrize("mutation, error, message", [
    ("load_into_out", InstructionError, r"cannot LOAD into the out buffer"),
    ("store_from_inp_or_wgt", InstructionError, r"STORE reads only the out buffer, not (inp|wgt)"),
    ("uops_past_buffer", AddressError, r"micro-ops \[\d+, \d+\) go beyond the 512-entry uop"),
    ("uops_from_stored_dram", AddressError, r"reads micro-ops from DRAM bytes .* which "
                                            r"instruction \d+ \(STORE out\) writes"),
])
def test_messages_name_the_defect(mutation, error, message):
    config = PRESETS["tiny"]
    rng = np.random.default_rng(1)
    for seed in range(40):
        mutant = mutate(generate(config, 900 + seed), rng, mutation)
        if mutant is not None:
            break
    with pytest.raises(error, match=message):
        check_program(config, mutant.dram, mutant.insn_offset, mutant.insn_count)


def test_work_past_the_limit_is_refused_before_it_runs():
    config = PRESETS["tiny"]
    program = generate(config, 3)
    with pytest.raises(WorkLimitError, match=r"asks for [\d,]+ micro-op executions, more than "
                                             r"the limit of 10"):
        FunctionalSimulator(config, max_uop_executions=10).run(
            program.dram.copy(), program.insn_offset, program.insn_count)


def test_long_walks_report_progress():
    """fsim and the checker tell how far a long run is (a program near the work limit
    runs for minutes), ending at the work `uop_executions` counts up front."""
    from vdla.sim.checker import ProgramChecker, uop_executions
    config = PRESETS["tiny"]
    program = generate(config, 3)
    simulated, checked = [], []
    FunctionalSimulator(config, progress=simulated.append, progress_every=0).run(
        program.dram.copy(), program.insn_offset, program.insn_count)
    checker = ProgramChecker(config, program.dram, progress=checked.append, progress_every=0)
    checker.fetch(program.insn_offset, program.insn_count)
    checker.execute()
    total = uop_executions(checker.instructions)
    assert total > 0 and simulated and len(checked) == len(simulated)
    assert simulated[-1] == f"fsim: {total:,} of {total:,} micro-op executions (100 %)"
    assert checked[-1] == (f"checking the program: {total:,} of {total:,} micro-op "
                           "executions (100 %)")
    quiet = []
    FunctionalSimulator(config, progress=quiet.append).run(
        program.dram.copy(), program.insn_offset, program.insn_count)
    assert quiet == []                      # a short run says nothing
