"""The one base class of every error vdla raises on purpose.

A `VdlaError` is a failure the user can cause and fix: bad input (a config, a
layer, a program or model file, a schedule, a tuning log), a program the
simulators refuse, a missing or failing toolchain (Verilator, a C compiler,
nvcc, Yosys/nextpnr). Its message is one line that names the problem (a tool's
output, when kept, follows on later lines). The ``vdla`` command reports a
`VdlaError` in that one line (exit status 1); any other exception escaping a
command is a bug in vdla, reported with its traceback in a file (exit 70).

Each layer defines its own subclasses (``ConfigError``, ``CompileError``,
``SimulationError``, ``GraphError``, ``SynthError``, ...), so callers catch
one family, or all of vdla's with ``except VdlaError``. Errors about bad
input also derive from `ValueError` and the cache's from `OSError`, as they
did before this base existed, so ``except ValueError`` callers keep working.

This module imports nothing, so every layer may use it.
"""

from __future__ import annotations

__all__ = ["VdlaError"]


class VdlaError(Exception):
    """A failure the user can cause and fix; its first line says what is wrong."""
