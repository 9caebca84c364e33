"""Errors of the host runtime: bad inputs to a run, and programs that cannot run.

Both are `ValueError` (bad input), so the CLI turns them into one line.
"""

from __future__ import annotations

from vdla.errors import VdlaError

__all__ = ["InputError", "ProgramError"]


class InputError(VdlaError, ValueError):
    """Inputs that do not match the program: missing, unknown, wrong dtype or shape."""


class ProgramError(InputError):
    """A program that cannot run on this device (other hardware, or a broken DRAM plan).

    A subclass of `InputError`: the program is one of a runner's ``run`` inputs.
    """
