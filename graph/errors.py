"""The graph level's one error class: a model vdla cannot import, quantise or compile.

A `GraphError` is bad input (a `ValueError`), so the CLI reports it as one line.
Messages name the node, its operator and what is wrong.
"""

from __future__ import annotations

from vdla.errors import VdlaError

__all__ = ["GraphError"]


class GraphError(VdlaError, ValueError):
    """A model that is malformed, unsupported, or cannot be quantised or placed."""
