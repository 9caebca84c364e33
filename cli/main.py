"""The ``vdla`` command line: one group, one module per subcommand."""

from __future__ import annotations

import importlib
import sys

import click

from vdla import __version__

# Each module defines a click command (or group) called ``command``.
SUBCOMMANDS = ["isa", "hw", "run", "inspect", "compile", "bench", "compare", "demo", "config",
               "inputs"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vdla")
def cli():
    """vdla: a hardware/software co-design framework for a VDLA-style accelerator."""


for _module in SUBCOMMANDS:
    cli.add_command(importlib.import_module(f"vdla.cli.{_module}").command)


def _one_line(error: Exception) -> str:
    # "/x/y.v: No such file or directory" rather than "[Errno 2] No such file ...: '/x/y.v'"
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error)


def main():
    """Entry point of the ``vdla`` script: user errors end as one line, never a traceback."""
    # Errors of ours are ValueErrors with a message meant for the user: print
    # that one line instead of a traceback.
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("vdla: aborted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except (ValueError, OSError) as error:
        click.echo(f"vdla: error: {_one_line(error)}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
