"""Options and user-error helpers shared by several ``vdla`` subcommands."""

from __future__ import annotations

import click

from vdla.hw.config import PRESETS, ConfigError, load_config


def fail(message: str):
    """Stop the command with ``message`` as its one-line error (exit status 1).

    Raises
    ------
    click.ClickException
        Always.
    """
    raise click.ClickException(message)


def check_sim(sim: str) -> None:
    """Fail with one line unless ``sim`` is a registered simulation backend."""
    from vdla.sim.backend import backend_names
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
