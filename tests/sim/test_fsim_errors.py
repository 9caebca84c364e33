"""fsim on broken programs: deadlocks, races, bad addresses, bad words, illegal flags.

Each error case has a passing twin (the same program made correct) so that the
test shows the error comes from the defect, not from the harness.
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw import isa
from vdla.hw.isa import Alu, Finish, Gemm, Load, MemType, Store, Uop
from vdla.sim.errors import (AddressError, DeadlockError, InstructionError, RaceError,
                        SimulationError, TokenError)
from vdla.sim.fsim import FunctionalSimulator
from tests.sim.image import TINY, Image, random_elements


def inp_load(image, **flags):
    return image.load_all("inp", random_elements(np.random.default_rng(0), TINY, "inp", 8),
                          **flags)


def wgt_load(image, **flags):
    return image.load_all("wgt", random_elements(np.random.default_rng(1), TINY, "wgt", 8),
                          **flags)


def gemm(**flags):
    return Gemm(uop_begin=0, uop_end=1, iter_out=4, dst_factor_out=1, src_factor_out=1, **flags)


def store(image, **flags):
    return Store(dram_base=image.element(image.alloc(64), "out"), y_size=1, x_size=4,
                 x_stride=4, **flags)


# ------------------------------------------------------------------ deadlocks and tokens
def test_pop_never_pushed_is_a_deadlock_naming_the_instruction_and_queue():
    image = Image(TINY)
    program = [inp_load(image), image.load_uops([Uop()]), gemm(pop_prev=True)]
    with pytest.raises(DeadlockError) as error:
        image.run(program)
    message = str(error.value)
    assert "compute blocked at instruction 2 (GEMM) waiting to pop from load->compute" in message
    assert "load done" in message and "store done" in message
    assert "load->compute 0/16" in message
    assert error.value.index == 2


def test_pop_never_pushed_twin_runs():
    image = Image(TINY)
    program = [inp_load(image, push_next=True), image.load_uops([Uop()]), gemm(pop_prev=True)]
    image.run(program)


def test_circular_wait_names_every_blocked_module():
    image = Image(TINY)
    program = [inp_load(image, pop_next=True, push_next=True), gemm(pop_prev=True, push_prev=True)]
    with pytest.raises(DeadlockError) as error:
        image.run(program)
    message = str(error.value)
    assert "load blocked at instruction 0 (LOAD inp) waiting to pop from compute->load" in message
    assert "compute blocked at instruction 1 (GEMM) waiting to pop from load->compute" in message


@pytest.mark.parametrize("pushes", [16, 17])
def test_push_into_full_queue_blocks(pushes):
    """token_queue_depth is 16: the 17th push waits for a pop that comes only after
    load's whole queue, so it deadlocks; 16 pushes fit."""
    image = Image(TINY)
    program = [Load(memory_type=MemType.INP, y_size=0, push_next=True) for _ in range(pushes)]
    program += [Alu(uop_end=0, pop_prev=True) for _ in range(pushes)]
    if pushes <= TINY.token_queue_depth:
        result = image.run(program)
        assert result.counters["token_pushes_load_to_compute"] == pushes
        return
    # Compute's pops come after a FINISH-free prefix it can run, so make compute wait on
    # store first: then load fills the queue and blocks pushing.
    image = Image(TINY)
    program = [Load(memory_type=MemType.INP, y_size=0, push_next=True) for _ in range(pushes)]
    program += [Alu(uop_end=0, pop_next=True)]
    with pytest.raises(DeadlockError) as error:
        image.run(program)
    message = str(error.value)
    assert "load blocked after instruction 16 (LOAD inp) pushing into load->compute (full, 16/16)" \
        in message
    assert "compute blocked at instruction 17 (ALU) waiting to pop from store->compute" in message


def test_tokens_left_over_are_an_error():
    image = Image(TINY)
    with pytest.raises(TokenError, match=r"never popped \(load->compute: 1\)"):
        image.run([inp_load(image, push_next=True)])


def test_missing_finish():
    image = Image(TINY)
    with pytest.raises(InstructionError, match="no FINISH"):
        image.run([inp_load(image)], finish=False)


def test_compute_instruction_after_finish():
    image = Image(TINY)
    with pytest.raises(InstructionError, match=r"instruction 2 \(ALU\) follows the FINISH"):
        image.run([inp_load(image), Finish(), Alu(uop_end=0)], finish=False)


def test_load_and_store_after_finish_still_run():
    image = Image(TINY)
    out = image.alloc(64)
    program = [Finish(), Store(dram_base=image.element(out, "out"), x_size=1)]
    image.dram[out:out + 4] = 7
    image.run(program, finish=False)
    assert (image.dram[out:out + 4] == 0).all()


# ------------------------------------------------------------------ races
def race_program(image, drop):
    """Load -> GEMM -> store, then a second load reusing the inp entries.

    ``drop`` names the token left out; None gives the correct program.
    """
    uops = image.load_uops([Uop()])
    tokens = {
        "load->compute": dict(push_next=True),
        "compute->store": dict(push_next=True),
        "compute->load": dict(push_prev=True),
    }
    for name in tokens:
        if name == drop:
            tokens[name] = {}
    def popping(name, flag):
        return {} if name == drop else {flag: True}
    return [
        inp_load(image), wgt_load(image, **tokens["load->compute"]),
        uops,
        gemm(**popping("load->compute", "pop_prev"), **tokens["compute->store"],
             **tokens["compute->load"]),
        store(image, **popping("compute->store", "pop_prev"), push_prev=True),
        inp_load(image, **popping("compute->load", "pop_next")),
        Finish(pop_next=True),
    ]


def test_race_twin_runs():
    image = Image(TINY)
    image.run(race_program(image, None), finish=False)


@pytest.mark.parametrize("drop, message", [
    ("load->compute", r"instruction 3 \(GEMM\) on compute reads (inp|wgt)\[0\] written by "
                      r"instruction [01] \(LOAD (inp|wgt)\) on load .*missing load->compute"),
    # Which of the two unordered accesses fsim meets first is its own business.
    ("compute->store", r"instruction 4 \(STORE out\) on store reads out\[0\] written by "
                       r"instruction 3 \(GEMM\) on compute .*missing compute->store|"
                       r"instruction 3 \(GEMM\) on compute overwrites out\[0\] read by "
                       r"instruction 4 \(STORE out\) on store .*missing store->compute"),
    ("compute->load", r"instruction 5 \(LOAD inp\) on load overwrites inp\[0\] read by "
                      r"instruction 3 \(GEMM\) on compute .*missing compute->load"),
])
def test_missing_token_is_a_race(drop, message):
    image = Image(TINY)
    with pytest.raises(RaceError, match=message):
        image.run(race_program(image, drop), finish=False)


def test_race_through_a_chain_of_tokens_is_ordered():
    """load -> compute -> store orders load's write before store... and compute's
    token to load after store's push orders store before the next load."""
    image = Image(TINY)
    program = [
        image.load_uops([Uop()]),
        Alu(uop_end=1, push_next=True),             # writes out[0]
        store(image, pop_prev=True, push_prev=True),
        Alu(uop_end=0, pop_next=True, push_prev=True),  # relays: store -> compute -> load
        inp_load(image, pop_next=True),
        Finish(),
    ]
    image.run(program, finish=False)
    # and dropping the relay's pop makes compute's ALU racy against the store read
    image = Image(TINY)
    program[3] = Alu(uop_end=1)  # writes out[0] again without waiting for the store
    with pytest.raises(RaceError, match=r"instruction 3 \(ALU\) on compute overwrites out\[0\] "
                                        r"read by instruction 2 \(STORE out\)"):
        image.run(program[:4] + [Finish()], finish=False)


def test_races_can_be_switched_off():
    image = Image(TINY)
    image.run(race_program(image, "load->compute"), finish=False, check_races=False)


# ------------------------------------------------------------------ addresses
@pytest.mark.parametrize("case, pattern", [
    ("padded-load", r"instruction 0 \(LOAD inp\): the padded 3x4 region lands on "
                    r"inp\[250..261\], beyond the 256-entry inp buffer"),
    ("dram-load", r"instruction 0 \(LOAD inp\): DRAM region .* outside the 65536-byte"),
    ("dram-store", r"instruction 1 \(STORE out\): DRAM region .* outside the 65536-byte"),
    ("sram-store", r"instruction 1 \(STORE out\): reads out\[254..257\], beyond the 256-entry"),
    ("uop-range", r"instruction 1 \(GEMM\): micro-ops \[510, 513\) go beyond the 512-entry"),
    ("gemm-dst", r"instruction 2 \(GEMM\): micro-op 0 at iteration \(out 1, in 0\) computes "
                 r"dst index 256, beyond the 256-entry acc buffer"),
    ("gemm-wgt", r"instruction 2 \(GEMM\): micro-op 0 at iteration \(out 0, in 2\) computes "
                 r"wgt index 130, beyond the 128-entry wgt buffer"),
    ("alu-src", r"instruction 2 \(ALU\): micro-op 0 at iteration \(out 0, in 1\) computes "
                r"src index 300, beyond the 256-entry acc buffer"),
])
def test_out_of_range_addresses(case, pattern):
    image = Image(TINY)
    last = 65536 // 4
    program = {
        "padded-load": [Load(memory_type=MemType.INP, sram_base=250, y_size=1, x_size=2,
                             y_pad_top=2, x_pad_left=2)],
        "dram-load": [Load(memory_type=MemType.INP, dram_base=last - 8, y_size=3, x_size=2,
                           x_stride=4)],
        "dram-store": [Alu(uop_end=0), Store(dram_base=last, x_size=1)],
        "sram-store": [Alu(uop_end=0), Store(sram_base=254, x_size=4)],
        "uop-range": [Alu(uop_end=0), Gemm(uop_begin=510, uop_end=513)],
        "gemm-dst": [image.load_uops([Uop(dst=255 - 100)]), Alu(uop_end=0),
                     Gemm(uop_end=1, iter_out=2, dst_factor_out=101)],
        "gemm-wgt": [image.load_uops([Uop(wgt=120)]), Alu(uop_end=0),
                     Gemm(uop_end=1, iter_in=3, wgt_factor_in=5)],
        "alu-src": [image.load_uops([Uop(src=200)]), Alu(uop_end=0),
                    Alu(uop_end=1, iter_in=2, src_factor_in=100)],
    }[case]
    with pytest.raises(AddressError, match=pattern):
        image.run(program)


def test_instruction_region_outside_dram():
    dram = np.zeros(256, np.uint8)
    with pytest.raises(AddressError, match=r"\[128, 288\) lie outside the 256-byte"):
        FunctionalSimulator(TINY).run(dram, 128, 10)


# ------------------------------------------------------------------ bad words and flags
def corrupted(image, program, index, mutate):
    offset, count = image.write_program(program)
    word = int.from_bytes(image.dram[offset + 16 * index:offset + 16 * index + 16].tobytes(),
                          "little")
    image.dram[offset + 16 * index:offset + 16 * (index + 1)] = np.frombuffer(
        mutate(word).to_bytes(16, "little"), np.uint8)
    return offset, count


@pytest.mark.parametrize("mutate, pattern", [
    (lambda w: (w & ~0b111) | 7, r"instruction 1: bad opcode 7"),
    (lambda w: (w & ~0b111) | 5, r"instruction 1: bad opcode 5"),
    (lambda w: w | (1 << 127), r"instruction 1: bits set above the ALU format"),
    (lambda w: w | (7 << 7), r"instruction 1: bad memory_type 7"),
], ids=["opcode7", "opcode5", "high-bit", "memory-type"])
def test_corrupted_word_in_dram(mutate, pattern):
    image = Image(TINY)
    program = [Alu(uop_end=0), Alu(uop_end=0), Finish()]
    if "memory" in pattern:
        program[1] = Load(memory_type=MemType.UOP, y_size=0)
    offset, count = corrupted(image, program, 1, mutate)
    with pytest.raises(InstructionError, match=pattern) as error:
        FunctionalSimulator(TINY).run(image.dram, offset, count)
    assert error.value.index == 1
    # the uncorrupted stream runs
    image = Image(TINY)
    image.run(program, finish=False)


@pytest.mark.parametrize("insn, pattern", [
    (Load(memory_type=MemType.INP, pop_prev=True), r"instruction 0 \(LOAD inp\): runs on load, "
                                                   r"which has no previous module.*pop:prev"),
    (Load(memory_type=MemType.WGT, push_prev=True), r"\(LOAD wgt\): runs on load.*push:prev"),
    (Store(pop_next=True), r"\(STORE out\): runs on store, which has no next module"),
    (Store(push_next=True), r"\(STORE out\): runs on store.*push:next"),
    (Load(memory_type=MemType.OUT), r"\(LOAD out\): cannot LOAD into the out buffer"),
    (Store(memory_type=MemType.ACC), r"\(STORE acc\): STORE reads only the out buffer"),
    (Store(x_pad_left=1), r"\(STORE out\): STORE takes no padding"),
], ids=["load-pop-prev", "load-push-prev", "store-pop-next", "store-push-next", "load-out",
        "store-acc", "store-pad"])
def test_illegal_instruction_for_its_module(insn, pattern):
    image = Image(TINY)
    with pytest.raises(InstructionError, match=pattern):
        image.run([insn])


def test_errors_are_value_errors_with_index():
    image = Image(TINY)
    with pytest.raises(ValueError) as error:
        image.run([Store(pop_next=True)])
    assert isinstance(error.value, SimulationError) and error.value.index == 0


@pytest.mark.parametrize("option", ["trace", "cycle_limit"])
def test_timed_options_are_rejected_clearly(option):
    with pytest.raises(ValueError, match=f"fsim does not support option.*{option}.*untimed"):
        FunctionalSimulator(TINY, **{option: 1})


def test_bad_dram_image_type():
    with pytest.raises(TypeError, match="1-D numpy uint8"):
        FunctionalSimulator(TINY).run(np.zeros(64, np.int8), 0, 1)
    program = isa.encode_program([Finish()], TINY)
    dram = np.zeros(64, np.uint8)
    dram[:16] = program
    assert FunctionalSimulator(TINY).run(dram, 0, 1).counters["compute_insns"] == 1
