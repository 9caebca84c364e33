"""`sim.checker`: the first out-of-range micro-op index of a loop nest, found without walking it.

A GEMM/ALU index is ``base[u] + i * factor_out + j * factor_in``; when one
passes its buffer the checker names the first bad (out, in) iteration and
micro-op. The brute-force walk it once did is kept here as the reference.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from vdla.hw.config import PRESETS
from vdla.hw.isa import Alu, Finish, Gemm, Uop
from vdla.sim.checker import check_program
from vdla.sim.errors import AddressError
from tests.sim.image import Image

# (field, buffer, factor prefix) in the order the checker bounds-checks them.
_GEMM_FIELDS = [("dst", "acc", "dst"), ("src", "inp", "src"), ("wgt", "wgt", "wgt")]
_ALU_FIELDS = [("dst", "acc", "dst"), ("src", "acc", "src")]


def _brute_force_message(config, index, name, insn, uops, fields):
    """The first bad index, found by stepping through every iteration (the old checker)."""
    for field, buffer, prefix in fields:
        base = np.array([getattr(uop, field) for uop in uops], dtype=np.int64)
        outer = getattr(insn, f"{prefix}_factor_out")
        inner = getattr(insn, f"{prefix}_factor_in")
        depth = config.depth(buffer)
        for i in range(insn.iter_out):
            for j in range(insn.iter_in):
                values = base + i * outer + j * inner
                if values.max() >= depth:
                    u = int(np.argmax(values >= depth))
                    return (f"instruction {index} ({name}): micro-op {insn.uop_begin + u} at "
                            f"iteration (out {i}, in {j}) computes {field} index "
                            f"{int(values[u])}, beyond the {depth}-entry {buffer} buffer")
    return None


def _check(image, program):
    offset, count = image.write_program(list(program) + [Finish()])
    check_program(image.config, image.dram, offset, count)


def _random_case(rng, config):
    kind = rng.choice(["gemm", "alu", "gemm-reset", "alu-imm"])
    uops = [Uop(dst=int(rng.integers(config.depth("acc"))),
                src=int(rng.integers(min(config.depth("inp"), config.depth("acc")))),
                wgt=int(rng.integers(config.depth("wgt"))))
            for _ in range(int(rng.integers(1, 5)))]
    loop = dict(uop_begin=0, uop_end=len(uops), iter_out=int(rng.integers(1, 13)),
                iter_in=int(rng.integers(1, 13)))

    def factor(buffer):  # zero, or a step that fits the field (as wide as the buffer's index)
        return int(rng.choice([0, int(rng.integers(1, min(41, config.depth(buffer))))]))

    if kind.startswith("gemm"):
        reset = kind == "gemm-reset"
        insn = Gemm(reset=reset, **loop,
                    **{f"{p}_factor_{w}": factor(buffer) for _, buffer, p in _GEMM_FIELDS
                       for w in ("out", "in")})
        fields, name = (_GEMM_FIELDS[:1] if reset else _GEMM_FIELDS), "GEMM"
    else:
        imm = kind == "alu-imm"
        insn = Alu(use_imm=imm, **loop,
                   **{f"{p}_factor_{w}": factor(buffer) for _, buffer, p in _ALU_FIELDS
                      for w in ("out", "in")})
        fields, name = (_ALU_FIELDS[:1] if imm else _ALU_FIELDS), "ALU"
    return uops, insn, fields, name


@pytest.mark.parametrize("config_name", ["tiny", "odd"])
def test_first_bad_iteration_matches_the_brute_force_walk(config_name):
    config = PRESETS[config_name]
    rng = np.random.default_rng(34)
    outcomes = {"refused": 0, "passed": 0}
    for _ in range(150):
        uops, insn, fields, name = _random_case(rng, config)
        image = Image(config)
        program = [image.load_uops(uops), Alu(uop_end=0), insn]
        expected = _brute_force_message(config, 2, name, insn, uops, fields)
        if expected is None:
            _check(image, program)
            outcomes["passed"] += 1
        else:
            with pytest.raises(AddressError, match=f"^{re.escape(expected)}$"):
                _check(image, program)
            outcomes["refused"] += 1
    assert min(outcomes.values()) >= 20, outcomes  # both branches exercised


def test_a_huge_loop_nest_is_reported_without_walking_it():
    """A 16383x16383 GEMM whose dst runs past acc only at outer iteration 2048.

    The old walk stepped through 2048 * 16383 (out, in) pairs in Python first
    (minutes); solving the affine index for the first bad iteration is instant.
    """
    config = PRESETS["default"]
    depth = config.depth("acc")
    image = Image(config)
    insn = Gemm(reset=True, uop_begin=0, uop_end=1, iter_out=16383, iter_in=16383,
                dst_factor_out=1)
    program = [image.load_uops([Uop(dst=0)]), Alu(uop_end=0), insn]
    pattern = (rf"^instruction 2 \(GEMM\): micro-op 0 at iteration \(out {depth}, in 0\) "
               rf"computes dst index {depth}, beyond the {depth}-entry acc buffer$")
    with pytest.raises(AddressError, match=pattern):
        _check(image, program)
    assert depth * insn.iter_in > 3 * 10 ** 7  # what the old walk would have stepped through
