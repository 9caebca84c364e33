"""Options shared by several ``vdla`` subcommands."""

from __future__ import annotations

import click

from hw.config import ConfigError, load_config


def _parse_config(ctx, param, value):
    try:
        return load_config(value)
    except ConfigError as error:
        raise click.BadParameter(str(error)) from None


config_option = click.option(
    "--config", "config", default=None, callback=_parse_config, metavar="PRESET|FILE.json",
    help="Accelerator config: a preset name (default, tiny) or a JSON file. Default: default.")
