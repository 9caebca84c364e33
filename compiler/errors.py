"""Errors the compiler raises for bad input (never for its own bugs)."""

from __future__ import annotations

from vdla.errors import VdlaError

__all__ = ["CompileError", "ShapeError", "ScheduleError"]


class CompileError(VdlaError, ValueError):
    """A layer that cannot be compiled for the given accelerator."""


class ShapeError(CompileError):
    """An operator whose shape or parameters are invalid or unsupported."""


class ScheduleError(CompileError):
    """A schedule that is malformed or does not fit the accelerator's buffers."""
