"""Invoking one `vdla` sub-command in-process with click's test runner."""

from __future__ import annotations

from click.testing import CliRunner, Result

__all__ = ["invoke"]


def invoke(command, args) -> Result:
    """Run ``command`` with ``args`` (each turned into a string); stdout and
    stderr stay apart in the result."""
    return CliRunner().invoke(command, [str(a) for a in args])
