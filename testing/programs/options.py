"""What the random program generator is asked for, and what it hands back.

`GeneratorOptions` holds the generator's knobs (every default exercises
everything); `RandomProgram` is a generated program with the DRAM image it
runs in and helpers to run it on a backend and explain a mismatch. Apart from
the generator (`vdla.testing.programs.generator`) so that tests and benchmarks can
name both without the generator's internals.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from vdla.hw.config import HwConfig
from vdla.hw.isa import Instruction

__all__ = ["GeneratorOptions", "RandomProgram"]


@dataclasses.dataclass(frozen=True)
class GeneratorOptions:
    """Knobs of the generator (defaults exercise everything).

    Parameters
    ----------
    actions : (int, int)
        Range of random body actions (each one or two instructions).
    max_uops_per_insn : int
        Bound on ``iter_out * iter_in * (uop_end - uop_begin)`` of body GEMM/ALU.
    max_load_elements : int
        Bound on the padded size of one body load.
    eager_token_probability : float
        Chance that an instruction pushes a token nobody needs yet.
    eager_pop_probability : float
        Chance that an instruction pops a token in flight it does not need.
    max_pending_tokens : int
        Most tokens in flight per queue (also bounded by the queue depth).
    short_strides : bool
        Allow load strides shorter than a row (rows overlap in DRAM, or repeat).
    pad_uop_acc : bool
        Use padding on uop and acc loads as well as inp/wgt ones.
    dump_acc : bool
        Expose all four bytes of every accumulator at the end (else only out).
    feedback_stores : bool
        Let loads read back DRAM written by earlier stores (ordered through
        compute with a store -> compute -> load token chain).
    requant : bool
        Emit the fused ALU REQUANT (off for hardware without it).
    overwrite : bool
        Emit GEMM_OVERWRITE (off for hardware without it).
    overlap : bool
        Set ``overlap`` on GEMM/ALU instructions where it is legal (hardware
        that runs compute in order may ignore the flag: results are the same).
    overlap_probability : float
        Chance that a GEMM/ALU where overlap is legal gets it.
    burst_probability : float
        Chance that a compute action is a burst of 2-4 GEMM/ALU instructions
        whose micro-ops come in one uop load (so the units can run together).
    """

    actions: tuple[int, int] = (20, 60)
    max_uops_per_insn: int = 64
    max_load_elements: int = 48
    eager_token_probability: float = 0.15
    eager_pop_probability: float = 0.5
    max_pending_tokens: int = 6
    short_strides: bool = True
    pad_uop_acc: bool = True
    dump_acc: bool = True
    feedback_stores: bool = True
    requant: bool = True
    overwrite: bool = True
    overlap: bool = True
    overlap_probability: float = 0.7
    burst_probability: float = 0.35

    def replace(self, **changes) -> "GeneratorOptions":
        """A copy with ``changes`` applied (as `dataclasses.replace`)."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass
class RandomProgram:
    """A generated program and the DRAM image it runs in.

    Attributes
    ----------
    dram : numpy.ndarray
        The initial DRAM image (uint8). Backends modify images in place: run
        on ``dram.copy()``.
    insn_offset, insn_count : int
        Where the instruction stream sits (bytes) and how many instructions.
    instructions : list of Instruction
    regions : dict of str to (int, int)
        Byte ``(offset, size)`` of every DRAM region (``insn``, ``uop``,
        ``inp``, ``wgt``, ``acc``, ``result``, ``dump``).
    summary : dict
        Counts of instruction kinds, tokens and fillers (for reports).
    """

    config: HwConfig
    seed: int
    options: GeneratorOptions
    dram: np.ndarray
    insn_offset: int
    insn_count: int
    instructions: list[Instruction]
    regions: dict[str, tuple[int, int]]
    summary: dict[str, Any]

    def run(self, backend) -> tuple[np.ndarray, Any]:
        """Run on a backend; returns ``(final DRAM image, RunResult)``."""
        image = self.dram.copy()
        result = backend.run(image, self.insn_offset, self.insn_count)
        return image, result

    def describe_difference(self, expected: np.ndarray, actual: np.ndarray) -> str:
        """Where two final DRAM images differ, by region and element (for failure messages)."""
        diff = np.flatnonzero(expected != actual)
        if not len(diff):
            return "images equal"
        lines = [f"{len(diff)} byte(s) differ"]
        for name, (offset, size) in self.regions.items():
            inside = diff[(diff >= offset) & (diff < offset + size)]
            if len(inside):
                first = int(inside[0])
                lines.append(f"  {name}: {len(inside)} bytes, first at +{first - offset} "
                             f"(byte {first}): expected {expected[first]:#04x}, "
                             f"got {actual[first]:#04x}")
        return "\n".join(lines)
