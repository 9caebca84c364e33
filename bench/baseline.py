"""Cycle baselines: the committed regression check of `vdla bench`.

Cycle counts are deterministic, so committed baselines
(``bench/baselines/<config name>.json``, package data) make a cycle-level
regression check: `check_baseline` fails when a layer grows by more than
`BASELINE_TOLERANCE`; `write_baseline` rewrites a baseline, only when asked.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from vdla.bench.records import BenchResult
from vdla.bench.suite import BENCHMARKS, BenchError
from vdla.hw.config import HwConfig
from vdla.records import FRACTION, POSITIVE, Field, check_fields, parse_json, read_record_text

__all__ = ["BASELINE_TOLERANCE", "BaselineEntry", "BaselineCheck", "baseline_path",
           "make_baseline", "load_baseline", "check_baseline_target", "write_baseline",
           "check_baseline"]

# A layer whose cycles grow by more than this fraction fails the baseline check.
BASELINE_TOLERANCE = 0.01
# Where committed baselines live: <repo>/bench/baselines/<config name>.json.
BASELINE_DIR = Path(__file__).resolve().parent / "baselines"


def baseline_path(config: HwConfig) -> Path:
    """The committed baseline of a config: ``bench/baselines/<name>.json`` (package data)."""
    return BASELINE_DIR / f"{config.name}.json"


def make_baseline(result: BenchResult, previous: dict | None = None) -> dict[str, Any]:
    """The baseline file's content for ``result`` (merged into ``previous`` when
    that was recorded on the same hardware, so a subset run updates only its layers).

    Raises
    ------
    BenchError
        For a result without cycles, with an incorrect layer, or without latency hiding.
    """
    wrong = [layer.name for layer in result.layers if not layer.correct]
    if wrong:
        raise BenchError(f"not recording a baseline with incorrect layer(s): {', '.join(wrong)}")
    if not result.timed:
        raise BenchError("a baseline needs cycles: run on a timed simulator (--sim rtl)")
    if not result.latency_hiding:
        raise BenchError("baselines record the default compile: drop --no-latency-hiding")
    layers = {}
    if previous and previous.get("config_hash") == result.config.hash:
        layers.update(previous.get("layers", {}))
    for layer in result.layers:
        layers[layer.name] = {"cycles": layer.cycles, "ideal_cycles": layer.ideal_cycles,
                              "instructions": layer.instructions, "schedule": layer.schedule}
    names = [workload.name for workload in BENCHMARKS[result.benchmark]]
    layers = {name: layers[name] for name in names if name in layers}
    complete = set(layers) == set(names)
    uses = {workload.name: workload.uses for workload in BENCHMARKS[result.benchmark]}
    return {
        "benchmark": result.benchmark,
        "sim": result.sim,
        "config": result.config.to_dict(),
        "config_hash": result.config.hash,
        "tolerance": BASELINE_TOLERANCE,
        "regenerate": f"vdla bench {result.benchmark} --config {result.config.name} "
                      "--update-baseline",
        "layers": layers,
        f"{result.benchmark}_total_cycles":
            sum(entry["cycles"] * uses[name] for name, entry in layers.items())
            if complete else None,
    }


def load_baseline(path: str | Path) -> dict[str, Any]:
    """Read and check a baseline file (read no further than a baseline can be long).

    A baseline has at least one layer, every layer positive integer
    ``cycles``, and an optional ``tolerance`` (a fraction in [0, 1]).

    Raises
    ------
    BenchError
        When the file is missing, unreadable or not a baseline.
    """
    path = Path(path)
    if not path.exists():
        raise BenchError(f"no baseline {path} (record one with --update-baseline)")
    where = f"baseline {path}"
    data = parse_json(read_record_text(path, BenchError, "baseline"), BenchError, where)
    layers = Field('an object naming at least one layer ({NAME: {"cycles": N, ...}, ...})',
                   lambda value: isinstance(value, dict) and bool(value))
    check_fields(data, {"layers": layers}, where, BenchError)
    for name, entry in data["layers"].items():
        check_fields(entry, {"cycles": POSITIVE}, f"{where}: layer {name!r:.40}", BenchError)
    check_fields({"tolerance": BASELINE_TOLERANCE, **data}, {"tolerance": FRACTION}, where,
                 BenchError)
    return data


def check_baseline_target(baseline: dict, config: HwConfig, benchmark: str,
                          path: str | Path = "baseline") -> None:
    """Raise `BenchError` unless ``baseline`` is for this benchmark and hardware.

    Called before a bench runs, so a mismatch costs nothing.
    """
    if baseline.get("benchmark", benchmark) != benchmark:
        raise BenchError(f"baseline {path} is for benchmark {baseline.get('benchmark')!r}, "
                         f"not {benchmark!r}")
    recorded = baseline.get("config_hash")
    if recorded is not None and recorded != config.hash:
        raise BenchError(f"baseline {path} was recorded on other hardware (config hash "
                         f"{recorded}, this config {config.hash}); "
                         "regenerate it with --update-baseline")


def write_baseline(result: BenchResult, path: str | Path) -> Path:
    """Write (or update, for a subset of layers) the baseline at ``path``."""
    path = Path(path)
    previous = None
    if path.exists():
        try:
            previous = load_baseline(path)
        except BenchError:
            previous = None  # a broken baseline is replaced, not merged
    data = make_baseline(result, previous)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


@dataclasses.dataclass(frozen=True)
class BaselineEntry:
    """One layer compared with its baseline.

    ``status`` is ``"regression"`` (grew by more than the tolerance),
    ``"slower"`` (grew within it), ``"unchanged"``, ``"improvement"``,
    ``"new"`` (no baseline for it) or ``"missing"`` (no cycles this run).
    """

    name: str
    old: int | None
    new: int | None
    status: str

    @property
    def change(self) -> float | None:
        """Relative change of cycles, ``new / old - 1``."""
        if self.old is None or self.new is None or self.old == 0:
            return None
        return self.new / self.old - 1


@dataclasses.dataclass(frozen=True)
class BaselineCheck:
    """The outcome of `check_baseline`."""

    path: str
    entries: tuple[BaselineEntry, ...]
    tolerance: float

    def by_status(self, status: str) -> list[BaselineEntry]:
        """The entries of one `BaselineEntry` status, in the run's layer order."""
        return [entry for entry in self.entries if entry.status == status]

    @property
    def ok(self) -> bool:
        """No layer regressed and none lost its cycles."""
        return not self.by_status("regression") and not self.by_status("missing")

    def to_dict(self) -> dict[str, Any]:
        """The ``baseline`` part of the ``vdla bench --json`` report."""
        return {"path": self.path, "ok": self.ok, "tolerance": self.tolerance,
                "layers": [{"name": entry.name, "old": entry.old, "new": entry.new,
                            "status": entry.status} for entry in self.entries]}

    def lines(self) -> list[str]:
        """The human report: failures first, then improvements."""
        lines = []
        for entry in self.by_status("regression"):
            lines.append(f"REGRESSION {entry.name}: {entry.old:,} -> {entry.new:,} cycles "
                         f"({entry.change:+.2%}, more than {self.tolerance:.0%})")
        for entry in self.by_status("missing"):
            recorded = "not in the baseline" if entry.old is None else \
                f"baseline {entry.old:,} cycles"
            lines.append(f"MISSING {entry.name}: {recorded}, no cycles this run (the layer "
                         "failed)")
        for entry in self.by_status("slower"):
            lines.append(f"slower {entry.name}: {entry.old:,} -> {entry.new:,} cycles "
                         f"({entry.change:+.2%}, within {self.tolerance:.0%})")
        for entry in self.by_status("improvement"):
            lines.append(f"improvement {entry.name}: {entry.old:,} -> {entry.new:,} cycles "
                         f"({entry.change:+.2%})")
        for entry in self.by_status("new"):
            lines.append(f"new {entry.name}: {entry.new:,} cycles, not in the baseline")
        unchanged = self.by_status("unchanged")
        compared = len(self.entries) - len(self.by_status("new"))
        verdict = "PASS" if self.ok else "FAIL"
        lines.append(f"baseline {self.path}: {verdict} ({compared} layer(s) compared, "
                     f"{len(unchanged)} unchanged, "
                     f"{len(self.by_status('regression'))} regression(s), "
                     f"{len(self.by_status('improvement'))} improvement(s))")
        if self.by_status("improvement") or self.by_status("new"):
            lines.append("  faster or new layers: record them with --update-baseline")
        return lines


def check_baseline(result: BenchResult, baseline: dict, path: str | Path = "baseline",
                   tolerance: float | None = None) -> BaselineCheck:
    """Compare a run's cycles with a baseline, layer by layer.

    A layer fails when its cycles grow by more than ``tolerance`` (a fraction;
    by default the baseline's own ``tolerance``, else `BASELINE_TOLERANCE`)
    or when it has no cycles although the baseline has some. Layers of the
    baseline that this run did not select are not compared; a baseline that
    records none of the run's layers is an error (comparing nothing passes
    nothing).

    Raises
    ------
    BenchError
        When the result has no cycles, the baseline was recorded on other
        hardware or for another benchmark, or it shares no layer with the run.
    """
    if all(layer.cycles is None and layer.error is None for layer in result.layers):
        raise BenchError("the baseline check needs cycles: run on a timed simulator (--sim rtl)")
    check_baseline_target(baseline, result.config, result.benchmark, path)
    if tolerance is None:
        tolerance = baseline.get("tolerance", BASELINE_TOLERANCE)
    entries = []
    for layer in result.layers:
        old = baseline["layers"].get(layer.name, {}).get("cycles")
        new = layer.cycles
        if old is None:
            status = "new" if new is not None else "missing"
        elif new is None:
            status = "missing"
        elif new - old > old * tolerance:
            status = "regression"
        elif new > old:
            status = "slower"
        elif new < old:
            status = "improvement"
        else:
            status = "unchanged"
        entries.append(BaselineEntry(layer.name, old, new, status))
    if not any(entry.old is not None for entry in entries):
        raise BenchError(f"baseline {path} records none of this run's layers "
                         f"({', '.join(layer.name for layer in result.layers)}): nothing to "
                         "compare")
    return BaselineCheck(str(path), tuple(entries), tolerance)
