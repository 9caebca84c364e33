"""Options and user-error helpers shared by several ``vdla`` subcommands."""

from __future__ import annotations

import math

import click

from vdla.errors import VdlaError
from vdla.hw.config import PRESETS, ConfigError, load_config


def one_line(error: BaseException) -> str:
    """The one line that reports ``error``: its message's first line, or an OSError's
    ``"/x/y.v: No such file or directory"`` (not ``"[Errno 2] No such file ...: '/x/y.v'"``)."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    # Build failures carry the tool's output; the first line names the
    # problem, the rest is kept in the log the message points to.
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


USER_ERRORS = (VdlaError, OSError, MemoryError)
"""Failures a user can cause and fix, reported in one line: vdla's domain errors
(`vdla.errors.VdlaError`), and the operating system refusing a file the user named
(missing, unreadable, a full disk) or the memory a large input needs. Any other
exception is a bug in vdla."""


class Command(click.Command):
    """A click command that reports a user error (`USER_ERRORS`) as its one-line error
    (exit status 1).

    The one place a domain error becomes a message: commands raise, they do
    not catch and re-word. Any other exception passes through (`vdla.cli.main`
    reports it as a bug).
    """

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except USER_ERRORS as error:
            raise click.ClickException(one_line(error)) from error


class Group(Command, click.Group):
    """A click group of `Command`s (and `Group`s) that reports a `VdlaError` as one line."""

    command_class = Command
    group_class = type


def fail(message: str):
    """Stop the command with ``message`` as its one-line error (exit status 1).

    Raises
    ------
    click.ClickException
        Always.
    """
    raise click.ClickException(message)


class Number(click.ParamType):
    """A float option that is a real number (click's FLOAT and FloatRange take ``nan``
    and ``inf``, which then print as ``nan ms`` or reach a place-and-route run).

    Every error is one line naming the option.
    """

    name = "number"

    def __init__(self, positive: bool = False):
        self.positive = positive

    def convert(self, value, param, ctx) -> float:
        option = max(param.opts, key=len) if param is not None and param.opts else "value"
        try:
            number = float(value)
        except (TypeError, ValueError):
            fail(f"{option}: expected a number, got {value!r}")
        if not math.isfinite(number):
            fail(f"{option}: expected a finite number, got {value}")
        if self.positive and number <= 0:
            fail(f"{option}: must be positive, got {value}")
        return number


POSITIVE = Number(positive=True)
"""The type of every float option that must be a positive real number (a clock ...)."""


def write_output(path, content, what: str) -> None:
    """Write an output file the user named, atomically (`vdla.files.write_atomic`):
    a failed write leaves an existing file as it was.

    ``content`` is text, bytes or ``write(handle)``; a failure stops the
    command with one line naming ``what`` (``"--json"``, ``"output 'y'"``).
    """
    from vdla.files import write_atomic
    if isinstance(content, str):
        content = content.encode()
    write = content if callable(content) else (lambda handle: handle.write(content))
    try:
        write_atomic(path, write)
    except OSError as error:
        fail(f"{what}: cannot write {path} ({error.strerror or error})")


def check_identifier(value: str | None, option: str) -> str | None:
    """``value`` if it is a plain Verilog identifier (or None); else fail with one line."""
    import re
    if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", value):
        fail(f"{option} {value!r}: expected a Verilog identifier (a letter or '_', then "
             "letters, digits or '_')")
    return value


def check_sim(sim: str) -> None:
    """Fail with one line unless ``sim`` is a registered simulation backend."""
    from vdla.sim.backends import backend_names
    names = backend_names()
    if sim not in names:
        fail(f"--sim {sim!r}: unknown simulator (available: {', '.join(names)})")


def _parse_config(ctx, param, value):
    try:
        return load_config(value)
    except ConfigError as error:
        # One line, like every other user error (BadParameter adds a usage block).
        fail(f"--config: {error}")


def _parse_program_config(ctx, param, value):
    return None if value is None else _parse_config(ctx, param, value)


config_option = click.option(
    "--config", "config", default=None, callback=_parse_config, metavar="PRESET|FILE.json",
    help=f"Accelerator config: a preset ({', '.join(PRESETS)}) or a JSON file. "
         "Default: default.")
"""The ``--config`` option: the command receives a validated `HwConfig` as ``config``."""

program_config_option = click.option(
    "--config", "config", default=None, callback=_parse_program_config,
    metavar="PRESET|FILE.json",
    help=f"The accelerator config the program must have been compiled for: a preset "
         f"({', '.join(PRESETS)}) or a JSON file. Default: the one the program file carries.")
"""``--config`` for commands that read a program file: ``config`` is None unless given, and
`runtime.program_file.load` then refuses a program compiled for other hardware."""
