"""fsim's happens-before between compute's GEMM and ALU units (the ``overlap`` flag).

A GEMM or ALU with ``overlap`` waits only for its own unit, so it may run
beside the other unit's earlier instructions; fsim must accept such programs
when the two touch different acc/out entries and report a `RaceError` naming
both instructions and the entry when they do not. Every racy case has a twin
without ``overlap`` (or with the conflict removed) that runs, and the legal
ones compute what the same program computes without ``overlap``.
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw.isa import Alu, AluOp, Finish, Gemm, Load, MemType, Store, Uop
from vdla.sim.errors import RaceError
from tests.sim.image import TINY, Image, random_elements

ROWS = 4   # every GEMM/ALU below covers 4 consecutive acc rows
# The bodies name acc rows 0..31; each group of 8 lies in its own acc bank
# (hw/isa.py's bank rule), so rows 0..7 and 8..15 never share a bank.
BANK = TINY.acc_bank_rows


def row(logical: int) -> int:
    """The acc entry of a body's row ``logical``: group ``logical // 8`` in bank ``logical // 8``."""
    return (logical // 8) * BANK + logical % 8


class Builder:
    """Hand-written compute bodies over a prologue that fills inp, wgt and acc."""

    def __init__(self):
        self.uops: list[Uop] = []

    def _uop(self, dst: int, src: int = 0) -> int:
        self.uops.append(Uop(dst=row(dst), src=src, wgt=0))
        return len(self.uops) - 1

    def gemm(self, rows: int, overlap: bool = False, reset: bool = False, **flags) -> Gemm:
        u = self._uop(rows)
        return Gemm(uop_begin=u, uop_end=u + 1, iter_out=ROWS, dst_factor_out=1,
                    src_factor_out=1, reset=reset, overlap=overlap, **flags)

    def alu(self, rows: int, src: int | None = None, overlap: bool = False,
            op: AluOp = AluOp.REQUANT, imm: int = 8 | 32, reset: bool = False, **flags) -> Alu:
        u = self._uop(rows, 0 if src is None else row(src))
        return Alu(uop_begin=u, uop_end=u + 1, iter_out=ROWS, dst_factor_out=1,
                   src_factor_out=1, alu_op=op, use_imm=src is None, imm=imm, reset=reset,
                   overlap=overlap, **flags)

    def program(self, image: Image, body) -> list:
        rng = np.random.default_rng(3)
        return [
            image.load_all("inp", random_elements(rng, TINY, "inp", 8)),
            image.load_all("wgt", random_elements(rng, TINY, "wgt", 8), push_next=True),
            image.load_all("acc", random_elements(rng, TINY, "acc", TINY.depth("acc"), -5000, 5000),
                           pop_prev=True),
            image.load_uops(self.uops),
            *body,
        ]


def run(body_of, overlap_everywhere=None, **options):
    """Build ``body_of(builder)`` and run it; return final acc and out."""
    builder = Builder()
    body = body_of(builder)
    if overlap_everywhere is not None:
        body = [insn.replace(overlap=overlap_everywhere) if isinstance(insn, (Gemm, Alu))
                else insn for insn in body]
    image = Image(TINY)
    result = image.run(builder.program(image, body), dump_sram=True, **options)
    return result.details["sram"]["acc"], result.details["sram"]["out"]


# Each body: the instructions after the prologue (whose last instruction is 3).
LEGAL = {
    # GEMM accumulates rows 0..3 while the ALU requantises rows 8..11 (bias from 16..19)
    "gemm-beside-requant": lambda b: [b.gemm(0), b.alu(8, src=16, overlap=True)],
    "requant-beside-gemm": lambda b: [b.alu(8, src=16), b.gemm(0, overlap=True)],
    "both-overlap": lambda b: [b.gemm(0, overlap=True), b.alu(8, overlap=True),
                               b.gemm(4, overlap=True), b.alu(12, src=20, overlap=True)],
    # the ALU reads rows 16..19 the first GEMM wrote: the second GEMM waited for
    # the first, and the ALU issued after the second GEMM started
    "ordered-through-own-unit": lambda b: [b.gemm(16), b.alu(8, overlap=True),
                                           b.gemm(0, overlap=True),
                                           b.alu(12, src=16, overlap=True)],
    # an instruction without overlap waits for both units
    "no-overlap-waits": lambda b: [b.gemm(0, overlap=True), b.alu(0, src=0)],
    "no-overlap-gemm-waits": lambda b: [b.alu(0, overlap=True), b.gemm(0)],
    # uop/acc LOADs belong to both units: later instructions of either wait for them
    "uop-load-between": lambda b: [b.gemm(0, overlap=True), Load(memory_type=MemType.UOP,
                                                                 sram_base=500, y_size=0),
                                   b.alu(0, overlap=True)],
    "reads-beside-reads": lambda b: [b.alu(8, src=24, overlap=True),
                                     b.alu(12, src=24, overlap=True),
                                     b.gemm(4, overlap=True), b.alu(16, src=24, overlap=True)],
}

RACES = {
    # RAW: the ALU reads acc rows a concurrent GEMM writes
    "alu-reads-gemm-rows": (
        lambda b: [b.gemm(0), b.alu(8, src=2, overlap=True)],
        r"instruction 5 \(ALU\) on compute's ALU unit reads acc\[2\] written by "
        r"instruction 4 \(GEMM\) on compute's GEMM unit .*overlap"),
    # WAW: the GEMM overlaps an earlier ALU reset of the same rows
    "gemm-over-alu-reset": (
        lambda b: [b.alu(0, reset=True), b.gemm(0, overlap=True)],
        r"instruction 5 \(GEMM\) on compute's GEMM unit overwrites acc\[0\] written by "
        r"instruction 4 \(ALU\) on compute's ALU unit"),
    # WAW: both write the same rows, the ALU requantising what the GEMM accumulates
    "requant-over-gemm": (
        lambda b: [b.gemm(0, overlap=True), b.alu(1, overlap=True)],
        r"instruction 5 \(ALU\) on compute's ALU unit overwrites acc\[1\] written by "
        r"instruction 4 \(GEMM\)"),
    # WAR: the GEMM writes rows an earlier ALU reads as its bias
    "gemm-over-alu-bias": (
        lambda b: [b.alu(8, src=0, overlap=True), b.gemm(2, overlap=True)],
        r"instruction 5 \(GEMM\) on compute's GEMM unit overwrites acc\[2\] read by "
        r"instruction 4 \(ALU\) on compute's ALU unit"),
    # overlap on the later instruction only: the earlier ALU is not waited for
    "earlier-without-overlap-still-runs": (
        lambda b: [b.alu(0, src=16), b.gemm(0, overlap=True)],
        r"instruction 5 \(GEMM\) .* overwrites acc\[0\] written by instruction 4 \(ALU\)"),
    # different rows of one acc bank: the units would meet on its ports
    "same-bank": (
        lambda b: [b.gemm(0), b.alu(4, overlap=True)],
        rf"instruction 5 \(ALU\) on compute's ALU unit uses acc bank 0 "
        rf"\(acc/out\[0\.\.{BANK - 1}\]\) while instruction 4 \(GEMM\) on compute's GEMM unit "
        r"may still use it: .*different acc banks"),
    # the bias read from the bank the GEMM runs in
    "bias-in-the-gemm-bank": (
        lambda b: [b.gemm(0), b.alu(8, src=4, overlap=True)],
        r"instruction 5 \(ALU\) .* uses acc bank 0 .* instruction 4 \(GEMM\)"),
    # the second ALU waits for the first, not for the GEMM that runs beside both
    "two-alus-beside-a-gemm": (
        lambda b: [b.gemm(0), b.alu(8, overlap=True), b.alu(12, src=3, overlap=True)],
        r"instruction 6 \(ALU\) .* reads acc\[3\] written by instruction 4 \(GEMM\)"),
}


@pytest.mark.parametrize("name", LEGAL)
def test_legal_overlap_runs_and_computes_the_sequential_result(name):
    acc, out = run(LEGAL[name])
    sequential_acc, sequential_out = run(LEGAL[name], overlap_everywhere=False)
    assert np.array_equal(acc, sequential_acc) and np.array_equal(out, sequential_out)


@pytest.mark.parametrize("name", RACES)
def test_conflicting_overlap_is_a_race(name):
    body, pattern = RACES[name]
    with pytest.raises(RaceError, match=pattern) as error:
        run(body)
    assert error.value.index == int(pattern.split(r"instruction ")[1].split(" ")[0])


@pytest.mark.parametrize("name", RACES)
def test_conflicting_twin_without_overlap_runs(name):
    body, _ = RACES[name]
    run(body, overlap_everywhere=False)
    run(body, check_races=False)   # and the race check can be switched off


@pytest.mark.parametrize("third, conflict", [
    (lambda b, overlap: b.alu(0, src=8, overlap=overlap), r"acc\[0\] written by instruction 4"),
    (lambda b, overlap: b.gemm(8, overlap=overlap), rf"acc\[{row(8)}\] written by instruction 5"),
])
@pytest.mark.parametrize("overlap", [False, True])
def test_a_later_instruction_without_overlap_is_ordered(third, conflict, overlap):
    """GEMM on rows 0..3 beside an ALU on rows 8..11; a third instruction touching
    both regions is ordered after both without overlap and races with overlap."""
    def body(b):
        return [b.gemm(0), b.alu(8, src=16, overlap=True), third(b, overlap)]
    if overlap:
        with pytest.raises(RaceError, match=r"instruction 6 .*" + conflict):
            run(body)
    else:
        run(body)


def test_push_carries_completion_of_every_earlier_compute_instruction():
    """GEMM writes rows 0..3, an overlap ALU rows 8..11 and pushes to store, which
    reads out rows 0..11 (and the rows between their banks): the push orders the
    concurrent GEMM's writes too."""
    builder = Builder()
    image = Image(TINY)
    body = [builder.gemm(0), builder.alu(8, overlap=True, push_next=True),
            Store(dram_base=image.element(image.alloc(16 * 128), "out"), y_size=1,
                  x_size=row(12), x_stride=row(12), pop_prev=True)]
    image.run(builder.program(image, body))


def test_store_needs_the_token_of_the_instruction_that_wrote():
    """The push of an earlier instruction does not order a later concurrent one."""
    builder = Builder()
    image = Image(TINY)
    body = [builder.gemm(0, push_next=True), builder.alu(8, overlap=True),
            Store(dram_base=image.element(image.alloc(16 * 128), "out"), y_size=1,
                  x_size=row(12), x_stride=row(12), pop_prev=True)]
    # Which of the two unordered accesses fsim meets first is its own business.
    with pytest.raises(RaceError, match=rf"instruction 6 \(STORE out\) on store reads out\[{row(8)}\] "
                                        r"written by instruction 5 \(ALU\) on compute "
                                        r".*missing compute->store|"
                                        rf"instruction 5 \(ALU\) on compute overwrites out\[{row(8)}\] "
                                        r"read by instruction 6 \(STORE out\)"):
        image.run(builder.program(image, body))


def test_acc_load_waits_for_both_units():
    def body(b):
        return [b.gemm(0, overlap=True), b.alu(8, overlap=True),
                Load(memory_type=MemType.ACC, sram_base=0, dram_base=0, y_size=1, x_size=12,
                     x_stride=12)]
    run(body)


def test_finish_waits_for_both_units():
    """FINISH belongs to both units: a token it pops orders nothing before it but
    the run still ends cleanly after concurrent instructions."""
    builder = Builder()
    image = Image(TINY)
    body = [builder.gemm(0, overlap=True), builder.alu(8, overlap=True), Finish()]
    image.run(builder.program(image, body), finish=False)
