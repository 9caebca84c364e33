"""The ``vdla`` command line: one group, one module per subcommand."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import click

from vdla import __version__

# Each module defines a click command (or group) called ``command``.
SUBCOMMANDS = ["isa", "hw", "run", "inspect", "compile", "bench", "compare", "tune", "dse", "demo",
               "config", "inputs", "quantize", "bench_net"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vdla")
def cli():
    """vdla: a hardware/software co-design framework for a VDLA-style accelerator."""


for _module in SUBCOMMANDS:
    cli.add_command(importlib.import_module(f"vdla.cli.{_module}").command)


def _one_line(error: BaseException) -> str:
    # "/x/y.v: No such file or directory" rather than "[Errno 2] No such file ...: '/x/y.v'"
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    text = str(error).strip()
    if "\n" in text:
        # Build failures carry the tool's output; the first line names the
        # problem, the rest is kept in the log the message points to.
        text = text.splitlines()[0]
    return text or type(error).__name__


def _expected(error: BaseException) -> bool:
    """Failures a user can cause and fix: bad input, files, a missing or failing toolchain."""
    if isinstance(error, (ValueError, OSError, MemoryError)):
        return True
    from vdla.sim.rtl.build import RtlBuildError
    from vdla.sim.rtl.toolchain import ToolchainError
    if isinstance(error, (ToolchainError, RtlBuildError)):
        return True
    # Amaranth's Yosys failing (e.g. on a top-level name it cannot use); only
    # looked up when Amaranth is already loaded, as it must be to raise it.
    yosys = sys.modules.get("amaranth._toolchain.yosys")
    return yosys is not None and isinstance(error, yosys.YosysError)


def _write_traceback(error: BaseException) -> str:
    """Write the traceback of an unexpected error into the cache folder; returns where."""
    import tempfile
    import time
    import traceback
    text = "".join(traceback.format_exception(error))
    from vdla.hw.cache import cache_root
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
        click.echo("vdla: error: input nested too deeply to process", err=True)
        sys.exit(1)
    except Exception as error:  # noqa: BLE001 - the one place every failure is reported
        if os.environ.get("VDLA_DEBUG"):
            raise
        if _expected(error):
            click.echo(f"vdla: error: {_one_line(error)}", err=True)
            sys.exit(1)
        where = _write_traceback(error)
        click.echo(f"vdla: internal error (a bug in vdla, please report it): "
                   f"{type(error).__name__}: {_one_line(error)}; traceback written to {where}",
                   err=True)
        sys.exit(70)


if __name__ == "__main__":
    main()
