"""A few hundred illegal programs on the RTL: none runs to a result.

Programs broken by `testing.illegal` at random (tiny config, one model build):
whatever fsim refuses, the rtl backend refuses with the same message before
the model runs a cycle; whatever fsim accepts (a random mutation can leave a
legal program) the RTL computes bit-exactly as fsim. So no illegal program
ends with an output, and with the checker turned off the hardware's own
illegal accesses still end as a clear error.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

from vdla.sim.errors import AddressError, SimulationError
from vdla.sim.fsim import FunctionalSimulator
from vdla.testing.illegal import MUTATIONS, mutate
from vdla.testing.programs import generate
from vdla.sim.rtl import RtlSimulator

pytestmark = pytest.mark.rtl

PROGRAMS = 30   # x every mutation class: ~300 mutants


def _run(backend, mutant):
    image = mutant.dram.copy()
    try:
        backend.run(image, mutant.insn_offset, mutant.insn_count)
    except SimulationError as error:
        return None, error
    return image, None


def test_illegal_programs_never_run_to_an_output_on_the_rtl(tiny, chip_build):
    fsim = FunctionalSimulator(tiny)
    rtl = RtlSimulator(tiny, build=chip_build)
    rng = np.random.default_rng(88)
    tally = collections.Counter()
    for seed in range(PROGRAMS):
        program = generate(tiny, 7000 + seed)
        for name in MUTATIONS:
            mutant = mutate(program, rng, name)
            if mutant is None:
                continue
            expected, refused = _run(fsim, mutant)
            before = rtl.model.cycles
            actual, error = _run(rtl, mutant)
            where = f"seed {7000 + seed}: {mutant.description}"
            if refused is not None:
                assert error is not None, f"rtl ran a program fsim refuses ({where})"
                assert type(error) is type(refused) and str(error) == str(refused), where
                assert rtl.model.cycles == before, f"the model ran ({where})"
                tally["refused"] += 1
            else:
                assert not mutant.certain, where
                assert error is None, f"{where}: {error}"
                np.testing.assert_array_equal(actual, expected, err_msg=where)
                tally["legal after all"] += 1
    assert tally["refused"] >= 200, tally


def test_the_hardware_reports_its_own_illegal_accesses(tiny, chip_build):
    """With the checker off, DRAM accesses past the image end as an AddressError."""
    rtl = RtlSimulator(tiny, build=chip_build, check=False)
    rng = np.random.default_rng(3)
    seen = 0
    for seed in range(20):
        mutant = mutate(generate(tiny, 600 + seed), rng, "dram_past_image")
        if mutant is None:
            continue
        with pytest.raises(AddressError, match="the chip made a bad DRAM access"):
            rtl.run(mutant.dram.copy(), mutant.insn_offset, mutant.insn_count)
        seen += 1
    assert seen >= 10
