"""Cycles to time: the last placed Fmax of each config, remembered, and the clock
vdla turns cycles into milliseconds with (``--clock-mhz``, else that Fmax)."""

from __future__ import annotations

import json
from pathlib import Path

from vdla import cache
from vdla.hw.config import HwConfig
from vdla.hw.synth.reports import SynthReport

__all__ = ["record_fmax", "known_fmax", "clock_for"]


def _fmax_record(config: HwConfig) -> str:
    """The cache key of ``config``'s Fmax record (kind ``synth/fmax``)."""
    from vdla.hw.generate import hw_source_digest
    # By name too: board presets of the same hardware (``ulx3s``, ``ecpix5``) run
    # on different parts, at different clocks.
    return cache.key_of(config.name, config.hash, hw_source_digest())


def record_fmax(config: HwConfig, report: SynthReport) -> None:
    """Remember ``report``'s Fmax for ``config`` (this design's sources), for `known_fmax`."""
    if report.fmax_mhz is None:
        return

    def produce(work: Path) -> None:
        (work / "fmax.json").write_text(json.dumps({
            "fmax_mhz": report.fmax_mhz, "target": report.target, "device": report.device,
            "top": report.top}) + "\n")
    # The latest placement replaces the record (``force``), atomically.
    cache.get_or_build("synth/fmax", _fmax_record(config), produce, ["fmax.json"],
                       what="Fmax record", force=True)


def known_fmax(config: HwConfig) -> dict | None:
    """The last place-and-route Fmax of ``config`` for the current hw sources, if any.

    Cheap (no tool runs): `place_and_route` and the synthesis benchmark record it.
    """
    entry = cache.lookup("synth/fmax", _fmax_record(config), what="Fmax record")
    return None if entry is None else json.loads((entry.directory / "fmax.json").read_text())


def clock_for(config: HwConfig, clock_mhz: float | None = None) -> tuple[float, str] | None:
    """The clock to turn cycles into time, and where it comes from.

    ``clock_mhz`` when given (``--clock-mhz``), else the Fmax `known_fmax`
    has for ``config``, else None (cycles only).
    """
    if clock_mhz is not None:
        return float(clock_mhz), "--clock-mhz"
    known = known_fmax(config)
    if known is None:
        return None
    return float(known["fmax_mhz"]), (f"Fmax of config {config.name} placed on {known['target']} "
                                      f"{known['device']} ({known['top']}), vdla hw synth")
