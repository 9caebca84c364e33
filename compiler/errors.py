"""Errors the compiler raises for bad input (never for its own bugs)."""

from __future__ import annotations

from vdla.errors import VdlaError

__all__ = ["CompileError", "ShapeError", "ScheduleError", "check_mode"]


class CompileError(VdlaError, ValueError):
    """A layer that cannot be compiled for the given accelerator."""


class ShapeError(CompileError):
    """An operator whose shape or parameters are invalid or unsupported."""


class ScheduleError(CompileError):
    """A schedule that is malformed or does not fit the accelerator's buffers."""


def check_mode(mode: str, modes: tuple[str, ...]) -> None:
    """Refuse a precision ``mode`` that is not one of a target's ``modes``.

    Raises
    ------
    ScheduleError
        ``"mode: expected one of int8, fp32, got 'fp64'"``.
    """
    if mode not in modes:
        raise ScheduleError(f"mode: expected one of {', '.join(modes)}, got {mode!r}")
