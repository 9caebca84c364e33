"""The options of ``vdla run`` that belong to one backend, accepted, refused and documented
from the backends' own declarations.

Each such option sets one keyword option of a runner: ``--trace`` the
``trace=`` of a simulation backend, ``--threads`` the ``threads=`` of the cpu
target. Which runner takes which keyword is declared once, by the runner
(`compiler.runners.run_options`: a simulation tier when it registers, a host
target in `compiler.runners.HOST_RUNNERS`); this module only maps flags to
keywords. An option given to a run whose runners do not declare its keyword
is refused in one line naming the option, the runners of the run and those
that take it; each option's help lists the runners that take it, read from
the same declarations when the help is printed.
"""

from __future__ import annotations

from typing import Any, Callable

import click

from vdla.cli.options import fail

__all__ = ["BackendOption", "backend_option", "given_options", "options_for",
           "progress_options", "label", "PROGRESS_SECONDS"]

# Seconds between progress lines of a long run (rtl cycles, fsim micro-ops).
PROGRESS_SECONDS = 10

Runner = tuple[str, str | None]
"""A runner as ``(target, sim)``: ``("accel", "rtl")``, ``("cpu", None)``."""


def label(runner: Runner) -> str:
    """How a user selects ``runner``: ``--sim rtl``, ``--target cpu``."""
    target, sim = runner
    return f"--sim {sim}" if target == "accel" else f"--target {target}"


def _takers(keyword: str) -> list[str]:
    from vdla.compiler.runners import run_options, runner_names
    return [label(runner) for runner in runner_names() if keyword in run_options(*runner)]


class BackendOption(click.Option):
    """A click option that sets the runner keyword ``keyword`` (its value through
    ``convert``), documented with the runners that declare that keyword."""

    def __init__(self, *args, keyword: str, convert: Callable[[Any], Any] | None = None,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.keyword = keyword
        self.convert = convert or (lambda value: value)

    @property
    def flag(self) -> str:
        return max(self.opts, key=len)

    def get_help_record(self, ctx):
        record = super().get_help_record(ctx)
        if record is None:
            return None
        names, text = record
        takers = _takers(self.keyword)
        return names, f"{text} Applies to {', '.join(takers) if takers else 'no backend'}."


def backend_option(*param_decls: str, keyword: str, convert=None, **attrs):
    """``click.option`` of a `BackendOption` (default None: given or not)."""
    return click.option(*param_decls, cls=BackendOption, keyword=keyword, convert=convert,
                        default=None, **attrs)


def given_options(ctx: click.Context) -> dict[BackendOption, Any]:
    """The backend options of ``ctx``'s command that were given, with their values."""
    return {param: ctx.params[param.name] for param in ctx.command.params
            if isinstance(param, BackendOption) and ctx.params.get(param.name) is not None}


def options_for(given: dict[BackendOption, Any], runners: list[Runner]) -> dict[Runner, dict]:
    """The keyword options of each runner in ``runners`` (those of a run), from ``given``.

    An option goes to every runner of the run that declares its keyword.

    Raises
    ------
    click.ClickException
        For an option that no runner of the run takes: ``--trace does not apply to
        --sim fsim (it applies to --sim rtl)``.
    """
    from vdla.compiler.runners import run_options
    declared = {runner: run_options(*runner) for runner in runners}
    options: dict[Runner, dict] = {runner: {} for runner in runners}
    for option, value in given.items():
        takers = [runner for runner in runners if option.keyword in declared[runner]]
        if not takers:
            where = " or ".join(label(runner) for runner in runners) or "this run"
            elsewhere = _takers(option.keyword)
            fail(f"{option.flag} does not apply to {where} (it applies to "
                 f"{', '.join(elsewhere) if elsewhere else 'no backend'})")
        for runner in takers:
            options[runner][option.keyword] = option.convert(value)
    return options


def _announce(text: str) -> None:
    if text.startswith("building"):
        text += " (first run for this hardware only, about a minute)..."
    click.echo(text, err=True)


def progress_options(runner: Runner) -> dict:
    """The progress reporting of ``runner``, where it declares it (``progress=``): a
    cold Verilator build (about a minute) and long runs say so on stderr."""
    from vdla.compiler.runners import run_options
    if "progress" not in run_options(*runner):
        return {}
    return {"progress": _announce, "progress_every": PROGRESS_SECONDS}
