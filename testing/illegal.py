"""Illegal variants of legal programs, for fuzzing the checker and every tier.

`mutate` takes a legal random program (`testing.programs.generate`) and
breaks it in one of the ways `MUTATIONS` lists -- each one a class of
defect a tier must refuse: SRAM indices past a buffer, a STORE from inp or
wgt, a LOAD into out, micro-op ranges past the uop buffer, DRAM regions past
the image, a dependency token dropped (deadlock or tokens left over), an
instruction after FINISH or no FINISH, micro-ops loaded from DRAM a STORE
writes, ``overlap`` forced onto every compute instruction (a race wherever
the two units touch the same entries), and a flipped bit anywhere in an
instruction word. Each mutation says whether the result is illegal for
certain (``certain``) or only perhaps (races and bit flips may leave a legal
program); the fuzz tests check that certain ones are always refused, and
that whatever the checker accepts, the RTL computes exactly as fsim.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vdla.hw import isa
from vdla.hw.isa import Alu, Finish, Gemm, Load, MemType, Store

__all__ = ["Mutant", "MUTATIONS", "mutate"]


@dataclasses.dataclass
class Mutant:
    """A mutated program: its DRAM image and how it was broken.

    Attributes
    ----------
    dram : numpy.ndarray
        The image (the original's, with the instruction words replaced).
    insn_offset, insn_count : int
    mutation : str
        A name of `MUTATIONS`.
    certain : bool
        True when the mutation always makes the program illegal.
    description : str
        What was changed (instruction index and fields), for failure messages.
    """

    dram: np.ndarray
    insn_offset: int
    insn_count: int
    mutation: str
    certain: bool
    description: str


def _pick(rng, instructions, kind):
    indices = [i for i, insn in enumerate(instructions) if isinstance(insn, kind)]
    return int(rng.choice(indices)) if indices else None


def _sram_past_buffer(rng, program, instructions):
    index = _pick(rng, instructions, (Load, Store))
    if index is None:
        return None
    insn = instructions[index]
    kind = insn.memory_type.kind
    depth = program.config.depth(kind)
    count = insn.y_size * insn.x_size if isinstance(insn, Store) else insn.padded_y * insn.padded_x
    if count == 0:
        return None
    base = depth - int(rng.integers(0, min(count, depth)))  # last entry lands past the end
    return index, insn.replace(sram_base=base), f"sram_base={base} ({kind} depth {depth})"


def _store_from_inp_or_wgt(rng, program, instructions):
    index = _pick(rng, instructions, Store)
    if index is None:
        return None
    kind = MemType.INP if rng.integers(2) else MemType.WGT
    return index, instructions[index].replace(memory_type=kind), f"STORE from {kind.kind}"


def _load_into_out(rng, program, instructions):
    index = _pick(rng, instructions, Load)
    if index is None:
        return None
    return index, instructions[index].replace(memory_type=MemType.OUT), "LOAD into out"


def _uops_past_buffer(rng, program, instructions):
    index = _pick(rng, instructions, (Gemm, Alu))
    if index is None:
        return None
    depth = program.config.depth("uop")
    insn = instructions[index]
    end = depth + int(rng.integers(1, 4))
    begin = min(insn.uop_begin, depth - 1)
    return (index, insn.replace(uop_begin=begin, uop_end=end, iter_out=max(1, insn.iter_out),
                                iter_in=max(1, insn.iter_in)),
            f"uop range [{begin}, {end}) (uop depth {depth})")


def _dram_past_image(rng, program, instructions):
    index = _pick(rng, instructions, (Load, Store))
    if index is None or instructions[index].y_size * instructions[index].x_size == 0:
        return None
    insn = instructions[index]
    element = program.config.element_bytes(insn.memory_type.kind)
    base = program.dram.size // element + int(rng.integers(0, 64))
    return index, insn.replace(dram_base=base), f"dram_base={base} (image {program.dram.size} B)"


def _drop_a_token(rng, program, instructions):
    flagged = [(i, flag) for i, insn in enumerate(instructions)
               for flag in ("pop_prev", "pop_next", "push_prev", "push_next")
               if getattr(insn, flag)]
    if not flagged:
        return None
    index, flag = flagged[int(rng.integers(len(flagged)))]
    return index, instructions[index].replace(**{flag: False}), f"{flag} cleared"


def _after_finish(rng, program, instructions):
    index = _pick(rng, instructions, Finish)
    if index is None:
        return None
    # FINISH moved before a compute instruction (swap), or dropped (made a no-op GEMM).
    earlier = [i for i in range(index) if isinstance(instructions[i], (Gemm, Alu))]
    if earlier and rng.integers(2):
        other = int(rng.choice(earlier))
        return [(other, instructions[index]), (index, instructions[other])], None, \
            f"FINISH swapped with instruction {other}"
    return index, Gemm(reset=True, uop_begin=0, uop_end=0), "FINISH replaced by an empty GEMM"


def _uops_from_stored_dram(rng, program, instructions):
    load = [i for i, insn in enumerate(instructions)
            if isinstance(insn, Load) and insn.memory_type == MemType.UOP and insn.y_size
            and insn.x_size]
    store = [i for i, insn in enumerate(instructions) if isinstance(insn, Store)
             and insn.y_size and insn.x_size]
    if not load or not store:
        return None
    index, target = int(rng.choice(load)), instructions[int(rng.choice(store))]
    out_bytes, uop_bytes = program.config.element_bytes("out"), program.config.element_bytes("uop")
    base = target.dram_base * out_bytes // uop_bytes
    return index, instructions[index].replace(dram_base=base), "uop LOAD from a STORE's DRAM"


def _overlap_everywhere(rng, program, instructions):
    changes = [(i, insn.replace(overlap=True)) for i, insn in enumerate(instructions)
               if isinstance(insn, (Gemm, Alu)) and not insn.overlap]
    if not changes:
        return None
    return changes, None, "overlap set on every GEMM/ALU"


# name -> (mutation, certain)
MUTATIONS = {
    "sram_past_buffer": (_sram_past_buffer, True),
    "store_from_inp_or_wgt": (_store_from_inp_or_wgt, True),
    "load_into_out": (_load_into_out, True),
    "uops_past_buffer": (_uops_past_buffer, True),
    "dram_past_image": (_dram_past_image, True),
    "drop_a_token": (_drop_a_token, True),
    "after_finish": (_after_finish, True),
    "uops_from_stored_dram": (_uops_from_stored_dram, True),
    "overlap_everywhere": (_overlap_everywhere, False),
    "bit_flip": (None, False),
}


def mutate(program, rng: np.random.Generator, mutation: str | None = None) -> Mutant | None:
    """One illegal variant of ``program`` (a `testing.programs.RandomProgram`).

    Parameters
    ----------
    program : RandomProgram
    rng : numpy.random.Generator
    mutation : str, optional
        A name of `MUTATIONS`; drawn at random when None.

    Returns
    -------
    Mutant or None
        None when the program offers nothing to break that way (no STORE to
        retarget, ...) or the change does not encode.
    """
    name = mutation or str(rng.choice(list(MUTATIONS)))
    function, certain = MUTATIONS[name]
    dram = program.dram.copy()
    span = slice(program.insn_offset, program.insn_offset + program.insn_count * isa.INSN_BYTES)
    if function is None:   # a flipped bit anywhere in the instruction words
        word_bits = 8 * isa.INSN_BYTES
        bit = int(rng.integers(program.insn_count * word_bits))
        dram[span.start + bit // 8] ^= 1 << (bit % 8)
        return Mutant(dram, program.insn_offset, program.insn_count, name, certain,
                      f"bit {bit % word_bits} of instruction {bit // word_bits} flipped")
    instructions = list(program.instructions)
    change = function(rng, program, instructions)
    if change is None:
        return None
    first, replacement, description = change
    changes = first if isinstance(first, list) else [(first, replacement)]
    for index, insn in changes:
        instructions[index] = insn
    try:
        dram[span] = isa.encode_program(instructions, program.config)
    except isa.IsaError:
        return None
    where = "" if isinstance(first, list) else f"instruction {first}: "
    return Mutant(dram, program.insn_offset, program.insn_count, name, certain,
                  where + description)
