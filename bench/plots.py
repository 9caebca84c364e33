"""Figures of benchmark results: a roofline of the layers and a module activity timeline.

`roofline` places each layer at its arithmetic intensity (operations per DRAM
byte) and its achieved throughput (operations per cycle) under the two
ceilings of the accelerator: the GEMM core (``2 * macs_per_cycle`` operations
per cycle, a MAC being two operations) and the DRAM port (``dram_bus_bytes``
bytes per cycle times the intensity). Layers bunch up near the ridge, so
their names sit in one row above the ceiling, spread apart, each with a
leader line to its point.

`timeline` draws what the load, compute and store modules did over a run,
from activity intervals ``{"load": [(start, end, state), ...], ...}`` with
``state`` one of ``"busy"``, ``"wait_token"``, ``"wait_mem"``; cycles no
interval covers are idle.

Both draw on their own figure with matplotlib's Agg canvas (no display, and
pyplot's global backend is left alone), write a PNG, and return the numbers
they drew so that callers and tests can check them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from vdla.errors import VdlaError
from vdla.files import write_atomic
from vdla.hw.config import HwConfig
from vdla.hw.counters import RTL_ACTIVITY

__all__ = ["roofline", "timeline", "pareto", "ACTIVITY_STATES", "ACTIVITY_MODULES", "PlotError"]

ACTIVITY_MODULES = RTL_ACTIVITY
ACTIVITY_STATES = ("busy", "wait_token", "wait_mem")
COLOURS = {"busy": "#2e7d32", "wait_token": "#f9a825", "wait_mem": "#c62828",
           "idle": "#e0e0e0"}
LABELS = {"busy": "busy", "wait_token": "waiting on a token", "wait_mem": "waiting on memory",
          "idle": "idle"}


# Roofline labels: one row this many times the compute ceiling, at least this
# fraction of the axes' width apart (a three-character name at 8 pt).
LABEL_ROW_HEIGHT = 1.3
LABEL_GAP = 0.045


class PlotError(VdlaError, ValueError):
    """Data that cannot be plotted: no timed layers, malformed activity."""


def _layer_dicts(results) -> list[dict[str, Any]]:
    """Accept a `BenchResult`, `LayerResult`s or the JSON report's layer dicts."""
    if hasattr(results, "layers"):
        results = results.layers
    elif isinstance(results, Mapping) and "layers" in results:
        results = results["layers"]
    layers = []
    for layer in results:
        layers.append(layer.to_dict() if hasattr(layer, "to_dict") else dict(layer))
    return layers


def _points(layers: list[dict]) -> dict[str, tuple[float, float]]:
    points = {}
    for layer in layers:
        traffic = (layer.get("dram_bytes_read") or 0) + (layer.get("dram_bytes_written") or 0)
        if not layer.get("cycles") or not traffic:
            continue
        ops = 2 * layer["macs"]
        points[layer["name"]] = (ops / traffic, ops / layer["cycles"])
    return points


def roofline(results, config: HwConfig, path: str | Path, *, compare=None,
             compare_label: str = "without latency hiding",
             title: str | None = None,
             clock: tuple[float, str] | None = None) -> dict[str, tuple[float, float]]:
    """Draw the layers on the accelerator's roofline and write a PNG.

    Parameters
    ----------
    results : BenchResult, sequence of LayerResult, or the JSON report
        Layers with ``macs``, ``cycles``, ``dram_bytes_read`` and
        ``dram_bytes_written``; layers without cycles are left out.
    config : HwConfig
        Gives the compute ceiling (``2 * macs_per_cycle`` ops/cycle) and the
        bandwidth ceiling (``dram_bus_bytes`` bytes/cycle).
    path : str or Path
        The PNG to write.
    compare : same types as ``results``, optional
        A second run drawn as hollow markers (e.g. the ablation).
    compare_label : str
    title : str, optional
    clock : (float, str), optional
        A clock in MHz and where it comes from (`hw.synth.clock_for`): a second
        axis then gives the throughput in GOPS at that clock, and says which.

    Returns
    -------
    dict of str to (float, float)
        Each drawn layer's (ops/byte, ops/cycle).

    Raises
    ------
    PlotError
        When no layer has cycles and DRAM traffic (an untimed simulator).
    """
    points = _points(_layer_dicts(results))
    if not points:
        raise PlotError("roofline: no layer has cycles and DRAM bytes; run on a timed "
                        "simulator (rtl)")
    others = _points(_layer_dicts(compare)) if compare is not None else {}
    peak = 2 * config.macs_per_cycle
    bandwidth = config.dram_bus_bytes
    ridge = peak / bandwidth
    every = list(points.values()) + list(others.values())
    low = min([x for x, _ in every] + [ridge]) / 4
    high = max([x for x, _ in every] + [ridge]) * 4

    figure, axes = _figure((7.5, 5))
    intensities = [low * (high / low) ** (i / 200) for i in range(201)]
    axes.plot(intensities, [min(peak, bandwidth * x) for x in intensities], color="black",
              linewidth=1.5)
    axes.axhline(peak, color="black", linestyle=":", linewidth=0.8)
    axes.text(high / 1.05, peak * 1.04, f"compute ceiling: {peak} ops/cycle "
              f"({config.macs_per_cycle} MACs)", ha="right", va="bottom", fontsize=8)
    axes.text(low * 1.3, bandwidth * low * 1.3 * 1.25,
              f"DRAM ceiling: {bandwidth} B/cycle", rotation=0, ha="left", va="bottom",
              fontsize=8)
    axes.axvline(ridge, color="grey", linestyle="--", linewidth=0.6)
    for name, (x, y) in others.items():
        axes.scatter([x], [y], facecolors="none", edgecolors="#1565c0", s=36, zorder=3)
        if name in points:
            axes.annotate("", xy=points[name], xytext=(x, y),
                          arrowprops={"arrowstyle": "->", "color": "#90caf9", "lw": 0.8})
    axes.scatter([x for x, _ in points.values()], [y for _, y in points.values()],
                 color="#1565c0", s=36, zorder=4, label="with latency hiding" if others else None)
    if others:
        axes.scatter([], [], facecolors="none", edgecolors="#1565c0", s=36, label=compare_label)
        axes.legend(loc="lower right", fontsize=8)
    _label_row(axes, points, low, high, peak * LABEL_ROW_HEIGHT)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlim(low, high)
    tops = [y for _, y in every]
    axes.set_ylim(min(tops + [bandwidth * low]) / 2, peak * 2)
    axes.set_xlabel("arithmetic intensity (ops per DRAM byte, 2 ops per MAC)")
    axes.set_ylabel("throughput (ops per cycle)")
    if clock is not None:
        mhz, source = clock
        giga = mhz / 1e3                        # ops/cycle x cycles/ns = GOPS
        seconds = axes.secondary_yaxis("right", functions=(lambda y: y * giga,
                                                           lambda g: g / giga))
        seconds.set_ylabel(f"GOPS at {mhz:g} MHz ({source})", fontsize=7)
    axes.set_title(title or f"Roofline: {config.name} ({config.batch}x{config.block_in}x"
                            f"{config.block_out} GEMM, {config.dram_bus_bits}-bit DRAM)")
    axes.grid(True, which="both", linewidth=0.3, alpha=0.5)
    _save(figure, path)
    return points


def label_positions(fractions: list[float], gap: float = LABEL_GAP, left: float = 0.03,
                    right: float = 0.97) -> list[float]:
    """Where a row of labels goes: in their points' order, ``gap`` apart at least.

    ``fractions`` are the points' horizontal positions as fractions of the
    axes' width, in increasing order. Labels are pushed right of their
    neighbours as far as needed, then the row is moved back left by the
    average push (so leader lines fan out both ways), staying within
    ``[left, right]``.
    """
    positions: list[float] = []
    for fraction in fractions:
        positions.append(max(fraction, positions[-1] + gap) if positions else fraction)
    if not positions:
        return positions
    shift = sum(p - f for p, f in zip(positions, fractions)) / len(positions)
    shift = max(shift, positions[-1] - right)   # end by the right edge
    shift = min(shift, positions[0] - left)     # start after the left edge
    return [position - shift for position in positions]


def _label_row(axes, points: dict[str, tuple[float, float]], low: float, high: float,
               height: float) -> None:
    """Name every point in one row above the compute ceiling, with a leader line each.

    Layers crowd near the ridge point (where memory- and compute-bound meet),
    so labels beside their points overlap; a row spaced apart does not.
    """
    span = math.log(high / low)
    ordered = sorted(points.items(), key=lambda item: item[1])
    fractions = [math.log(x / low) / span for _, (x, _) in ordered]
    for (name, point), fraction in zip(ordered, label_positions(fractions)):
        axes.annotate(name, point, xytext=(low * math.exp(fraction * span), height),
                      textcoords="data", ha="center", va="bottom", fontsize=8,
                      arrowprops={"arrowstyle": "-", "color": "#9e9e9e", "lw": 0.6,
                                  "shrinkA": 1, "shrinkB": 3})


def _check_activity(activity) -> dict[str, list[tuple[int, int, str]]]:
    if not isinstance(activity, Mapping):
        raise PlotError(f"activity: expected a dict of module to intervals, got "
                        f"{type(activity).__name__}")
    unknown = sorted(set(activity) - set(ACTIVITY_MODULES))
    if unknown:
        raise PlotError(f"activity: unknown module(s) {', '.join(map(str, unknown))} "
                        f"(known: {', '.join(ACTIVITY_MODULES)})")
    checked = {}
    for module in ACTIVITY_MODULES:
        intervals = []
        for number, item in enumerate(activity.get(module, ())):
            try:
                start, end, state = item
            except (TypeError, ValueError):
                raise PlotError(f"activity[{module!r}][{number}]: expected (start_cycle, "
                                f"end_cycle, state), got {item!r}") from None
            if state not in ACTIVITY_STATES:
                raise PlotError(f"activity[{module!r}][{number}]: unknown state {state!r} "
                                f"(known: {', '.join(ACTIVITY_STATES)})")
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       for v in (start, end)) or start < 0 or end <= start:
                raise PlotError(f"activity[{module!r}][{number}]: expected 0 <= start < end, "
                                f"got {start!r}, {end!r}")
            intervals.append((start, end, state))
        checked[module] = sorted(intervals)
    return checked


def timeline(activity: Mapping[str, Iterable], path: str | Path, *,
             cycles: int | None = None, title: str | None = None,
             window: tuple[int, int] | None = None) -> dict[str, dict[str, int]]:
    """Draw per-module activity over cycles and write a PNG.

    Parameters
    ----------
    activity : dict
        ``{"load": [(start_cycle, end_cycle, state), ...], "compute": [...],
        "store": [...]}``; intervals are half-open ``[start, end)`` and ``state``
        is ``"busy"``, ``"wait_token"`` or ``"wait_mem"``. Gaps are idle.
    path : str or Path
        The PNG to write.
    cycles : int, optional
        Length of the run (default: the last interval's end).
    title : str, optional
    window : (int, int), optional
        Draw only cycles ``start <= cycle < end`` (intervals are clipped to
        it; the totals returned are the window's).

    Returns
    -------
    dict
        ``{module: {state: cycles}}`` as drawn, ``"idle"`` included.

    Raises
    ------
    PlotError
        For an unknown module or state, an interval that is not ``0 <= start < end``,
        or a window that is not ``0 <= start < end``.
    """
    intervals = _check_activity(activity)
    last = max((end for rows in intervals.values() for _, end, _ in rows), default=0)
    length = cycles if cycles is not None else last
    first = 0
    if window is not None:
        first, stop = window
        if not 0 <= first < stop:
            raise PlotError(f"timeline: window must satisfy 0 <= start < end, got {window!r}")
        intervals = {module: [(max(start, first), min(end, stop), state)
                              for start, end, state in rows if start < stop and end > first]
                     for module, rows in intervals.items()}
        length = stop
    if length <= 0:
        raise PlotError("timeline: no activity and no cycle count to draw")

    figure, axes = _figure((10, 2.9))
    totals: dict[str, dict[str, int]] = {}
    rows = list(reversed(ACTIVITY_MODULES))  # load on top
    for row, module in enumerate(rows):
        axes.broken_barh([(first, length - first)], (row - 0.4, 0.8), facecolors=COLOURS["idle"])
        drawn = {state: 0 for state in ACTIVITY_STATES}
        for state in ACTIVITY_STATES:
            spans = [(start, end - start) for start, end, kind in intervals[module]
                     if kind == state]
            if spans:
                axes.broken_barh(spans, (row - 0.4, 0.8), facecolors=COLOURS[state],
                                 edgecolor="none")
            drawn[state] = int(sum(width for _, width in spans))
        drawn["idle"] = int(length - first - _covered(intervals[module]))
        totals[module] = drawn
    axes.set_yticks(range(len(rows)), rows)
    axes.set_xlim(first, length)
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    axes.set_ylim(-0.6, len(rows) - 0.4)
    axes.set_xlabel("cycle")
    handles = [Patch(color=COLOURS[state], label=LABELS[state])
               for state in (*ACTIVITY_STATES, "idle")]
    axes.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.36), ncol=4,
                fontsize=8, frameon=False)
    axes.set_title(title or "Module activity")
    _save(figure, path, crop=True)  # tight_layout leaves a band below the legend
    return {module: totals[module] for module in ACTIVITY_MODULES}


def _covered(intervals: list[tuple[int, int, str]]) -> int:
    """Cycles covered by the union of the intervals (overlaps counted once)."""
    covered, reach = 0, -math.inf
    for start, end, _ in sorted(intervals):
        if end <= reach:
            continue
        covered += end - max(start, reach)
        reach = end
    return covered


def pareto(records: list[dict], front: list[dict], metric: str, path: str | Path) -> dict:
    """Time against area of every configuration of a DSE sweep, the Pareto front joined.

    ``records`` and ``front`` are `tune.dse` records; returns the points drawn.
    """
    good = [r for r in records if r.get("error") is None]
    if not good:
        raise PlotError("no configuration succeeded: nothing to plot")
    figure, axes = _figure((7.5, 5))
    xs = [r["area"][metric] for r in good]
    ys = [r["time_s"] * 1e3 for r in good]
    axes.scatter(xs, ys, color="#90a4ae", zorder=2, label="configurations")
    fx = [r["area"][metric] for r in front]
    fy = [r["time_s"] * 1e3 for r in front]
    axes.plot(fx, fy, "o-", color="#c62828", zorder=3, label="Pareto front")
    _label_column(axes, {r["name"]: (r["area"][metric], r["time_s"] * 1e3) for r in front})
    clock = "Fmax" if all(r.get("fmax_mhz") for r in good) else "nominal clock"
    axes.set_xlabel(f"area ({metric}, synthesis estimate)")
    axes.set_ylabel(f"time (ms, cycles / {clock})")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    _save(figure, path)
    return {"points": list(zip(xs, ys)), "front": list(zip(fx, fy))}


def _label_column(axes, points: dict[str, tuple[float, float]]) -> None:
    """Name every point beside it, the names spread apart vertically with leader lines.

    Configurations that differ only in a field that costs no area (a bus width)
    sit almost on top of each other; their names, spaced apart, stay readable.
    Names of points in the right half go to their left.
    """
    (left, right), (low, high) = axes.get_xlim(), axes.get_ylim()
    ordered = sorted(points.items(), key=lambda item: item[1][1])
    fractions = [(y - low) / (high - low) for _, (_, y) in ordered]
    nudge = 0.02 * (right - left)
    for (name, (x, y)), fraction in zip(ordered, label_positions(fractions, gap=0.05)):
        before = x > (left + right) / 2
        axes.annotate(name, (x, y), xytext=(x - nudge if before else x + nudge,
                                            low + fraction * (high - low)),
                      textcoords="data", ha="right" if before else "left", va="center",
                      fontsize=6, arrowprops={"arrowstyle": "-", "color": "#9e9e9e",
                                              "lw": 0.5, "shrinkA": 1, "shrinkB": 3})


def _figure(size: tuple[float, float]):
    figure = Figure(figsize=size, dpi=120)
    FigureCanvasAgg(figure)
    return figure, figure.subplots()


def _save(figure: Figure, path: str | Path, crop: bool = False) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    # Written aside and renamed: a failed write leaves an earlier plot whole.
    write_atomic(path, lambda file: figure.savefig(
        file, format="png", **({"bbox_inches": "tight", "pad_inches": 0.1} if crop else {})))
