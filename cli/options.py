"""Options shared by several ``vdla`` subcommands."""

from __future__ import annotations

import click

from hw.config import PRESETS, ConfigError, load_config


def _parse_config(ctx, param, value):
    try:
        return load_config(value)
    except ConfigError as error:
        # One line, like every other user error (BadParameter adds a usage block).
        raise click.ClickException(f"--config: {error}") from None


config_option = click.option(
    "--config", "config", default=None, callback=_parse_config, metavar="PRESET|FILE.json",
    help=f"Accelerator config: a preset ({', '.join(PRESETS)}) or a JSON file. "
         "Default: default.")
"""The ``--config`` option: the command receives a validated `HwConfig` as ``config``."""
