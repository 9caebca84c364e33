"""Errors the simulators raise about a program they cannot run.

Every error is a `vdla.errors.VdlaError` and a `ValueError` (a bad program is
bad input, as is a bad simulator option: `OptionError`) and a program error's message
names the instruction at fault: its global index in the instruction stream and
its opcode, then the problem. The same classes serve every simulation tier, so
callers can catch one family whichever backend ran.
"""

from __future__ import annotations

from vdla.errors import VdlaError

__all__ = ["OptionError", "SimulationError", "DeadlockError", "RaceError", "AddressError",
           "InstructionError", "TokenError", "describe_instruction",
           "instruction_label"]


def describe_instruction(index: int | None, insn=None) -> str:
    """``"instruction 12 (GEMM)"``: how every message names an instruction.

    Parameters
    ----------
    index : int or None
        Global index of the instruction in the stream.
    insn : hw.isa.Instruction, optional
        The decoded instruction; adds its opcode (and memory type for loads/stores).
    """
    where = "instruction" if index is None else f"instruction {index}"
    if insn is None:
        return where
    return f"{where} ({instruction_label(insn)})"


def instruction_label(insn) -> str:
    """``"GEMM"``, ``"LOAD inp"``: an instruction's opcode, and memory type for loads/stores.

    Parameters
    ----------
    insn : hw.isa.Instruction
    """
    label = insn.opcode.name
    memory_type = getattr(insn, "memory_type", None)
    if memory_type is not None:
        label += f" {memory_type.kind}"
    return label


class OptionError(VdlaError, ValueError):
    """A simulator that is not registered, an option its backend does not take (``trace``
    for the untimed fsim), or an option value out of range: a bad request, not a bad program."""


class SimulationError(VdlaError, ValueError):
    """A program that cannot run as written.

    Attributes
    ----------
    index : int or None
        Global index of the offending instruction, when one is at fault.
    """

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index


class DeadlockError(SimulationError):
    """No module can make progress but instructions remain (a token never comes)."""


class RaceError(SimulationError):
    """Two accesses to the same SRAM entry, at least one a write, that nothing orders.

    Either two modules without a dependency token between them, or compute's
    GEMM and ALU units running side by side (``overlap``) on the same acc/out
    entry. The message names both instructions and the entry.
    """


class AddressError(SimulationError):
    """An SRAM index or a DRAM region outside its memory."""


class InstructionError(SimulationError):
    """A word that is no valid instruction, or one its module cannot execute."""


class TokenError(SimulationError):
    """Tokens pushed but never popped: the next run on the hardware would see them."""
