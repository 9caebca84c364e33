"""The ``vdla`` command line: one group, one module per subcommand."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import click

from vdla import __version__
from vdla.cli.options import USER_ERRORS, Group, one_line

# Each module defines a click command (or group) called ``command``.
SUBCOMMANDS = ["isa", "hw", "run", "inspect", "compile", "bench", "compare", "tune", "dse", "demo",
               "config", "inputs", "quantize", "bench_net", "cache"]


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vdla")
def cli():
    """vdla: a hardware/software co-design framework for a VDLA-style accelerator."""


for _module in SUBCOMMANDS:
    cli.add_command(importlib.import_module(f"vdla.cli.{_module}").command)


def _write_traceback(error: BaseException) -> str:
    """Write the traceback of an unexpected error into the cache folder; returns where."""
    import tempfile
    import time
    import traceback
    text = "".join(traceback.format_exception(error))
    from vdla.cache import cache_root
    for folder in (cache_root() / "crash", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"vdla-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
            path.write_text(f"vdla {__version__}\nargv: {sys.argv}\n\n{text}")
            return str(path)
        except OSError:
            continue
    return "nowhere (no writable folder); run with VDLA_DEBUG=1 to see it"


def main():
    """Entry point of the ``vdla`` script: every failure ends as one line, never a traceback.

    Exit status 1 for a user error (bad input, a file that cannot be read or
    written, a program the verifier rejects, a failing toolchain), 2 for bad
    usage (click), 130 when interrupted, and 70 for an internal error: a bug,
    whose traceback goes to a file the message names (``VDLA_DEBUG=1`` raises
    it instead).
    """
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("vdla: aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("vdla: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except RecursionError:
        click.ClickException("input nested too deeply to process").show()
        sys.exit(1)
    except Exception as error:  # noqa: BLE001 - the one place every failure is reported
        if os.environ.get("VDLA_DEBUG"):
            raise
        if isinstance(error, USER_ERRORS):  # raised outside a command (which reports its own)
            click.ClickException(one_line(error)).show()
            sys.exit(1)
        where = _write_traceback(error)
        click.echo(f"vdla: internal error (a bug in vdla, please report it): "
                   f"{type(error).__name__}: {one_line(error)}; traceback written to {where}",
                   err=True)
        sys.exit(70)


if __name__ == "__main__":
    main()
