"""``--clock-mhz``: cycles become time at a clock the user gives or the config's known Fmax.

`hw.synth.clock_for` picks the clock (the option, else the Fmax that ``vdla hw
synth`` last placed and routed this config at, else none); every report that
prints cycles says which clock its times are at.
"""

from __future__ import annotations

import click

from vdla.cli.options import POSITIVE

__all__ = ["clock_option", "time_report", "time_text"]

clock_option = click.option(
    "--clock-mhz", "clock_mhz", type=POSITIVE, default=None,
    help="Also report time at this clock (default: the config's Fmax from 'vdla hw synth', "
         "when known).")


def time_report(config, cycles: int | None, clock_mhz: float | None) -> dict | None:
    """``{"ms", "clock_mhz", "clock"}`` for ``cycles``, or None without cycles or a clock."""
    if cycles is None:  # untimed: no need to look for a clock (nor to load Amaranth)
        return None
    from vdla.hw.synth import clock_for
    clock = clock_for(config, clock_mhz)
    if clock is None:
        return None
    mhz, source = clock
    return {"ms": cycles / (mhz * 1e3), "clock_mhz": mhz, "clock": source}


def time_text(report: dict) -> str:
    """``1.234 ms at 100 MHz (--clock-mhz)``."""
    return f"{report['ms']:.3f} ms at {report['clock_mhz']:g} MHz ({report['clock']})"
