"""Bounded reads: a file vdla takes as data is never read past what it may hold."""

from __future__ import annotations

from pathlib import Path

from vdla.graph.errors import GraphError

__all__ = ["read_bounded"]


def read_bounded(path: str | Path, limit: int, what: str) -> bytes:
    """The bytes of ``path``, or one `GraphError` if unreadable or larger than ``limit``.

    ``what`` completes "larger than ..." (e.g. ``"vdla's limit of 1,024 bytes"``).
    Special files such as ``/dev/zero`` end in the error, not in memory exhaustion.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise GraphError(f"{path}: cannot read ({error.strerror or error})") from None
    if len(data) > limit:
        raise GraphError(f"{path}: larger than {what}")
    return data
