"""The ``vdla`` command line: one group, one module per subcommand."""

from __future__ import annotations

import importlib

import click

# Each module defines a click command (or group) called ``command``.
SUBCOMMANDS = []


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli():
    """vdla: a hardware/software co-design framework for a VDLA-style accelerator."""


for _module in SUBCOMMANDS:
    cli.add_command(importlib.import_module(f"cli.{_module}").command)


def main():
    cli()


if __name__ == "__main__":
    main()
