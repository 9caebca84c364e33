"""Tuning curves: best-so-far cost against trials for each tuner, over seeds.

Usage::

    python benchmarks/tuning.py [--target accel|cpu] [--config default]
        [--layers C4,C7,C10,C3,C11] [--extra batch4,dense,odd] [--trials 40]
        [--seeds 5] [--jobs 2]

Each workload (ResNet-18 layers and a few non-ResNet shapes: a batch-4
conv, a dense layer, a conv with odd channel counts) is tuned on the target
by every tuner (xgb, random, grid) with each seed, every trial a real
measurement, bit-exactness checked: RTL cycles on the accelerator, or the
wall time of the generated C on this CPU (``--target cpu``: one thread per
measurement, `vdla.tune.cpu_target`; run it with ``--jobs 1`` so no two
measurements share the cores). The tuners search alone
(``start_from_default=False``) so the curves compare search strategies; the
default schedule is measured apart, and `vdla tune` itself starts from it
(a tuned schedule is ``min(default, best found)``). Measurements are cached
by `tune.log.measurement_key` (target and its design, workload, config,
schedule) in ``benchmarks/results/tuning_cache.jsonl`` (cpu:
``tuning_cpu_cache.jsonl``), so seeds and tuners that meet a schedule again do
not measure it again (on the cpu every tuner is scored by the same noisy time
of a schedule) and a re-run resumes.

Per workload it reports, median over seeds, how many trials each tuner needs
to come within 5 % of the best schedule any tuner found (``None``: not within
the budget), the ratio random / xgb of those, and best found against the
default. Writes ``benchmarks/results/tuning.json`` and ``tuning.png`` (cpu:
``tuning_cpu.json``, ``tuning_cpu.png``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from vdla.bench.executor import Pool
from vdla.compiler import Conv2d, Dense
from vdla.compiler.workloads import resnet18_layer
from vdla.hw.config import load_config
from vdla.tune import TuneSettings, tune
from vdla.tune.log import (TuneLog, measurement_key, read_jsonl, record_measurement,
                           workload_key)
from vdla.tune.target import get_target

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
TUNERS = ("xgb", "random", "grid")
WITHIN = 0.05

# Non-ResNet shapes: batch > 1, a dense layer, odd channel counts.
EXTRA = {
    "batch4": Conv2d(4, 32, 64, 14, 14, kernel=3, stride=2, padding=1, bias=True, shift=8,
                     relu=True),
    "dense": Dense(16, 512, 256, bias=True, shift=8),
    "odd": Conv2d(1, 45, 83, 17, 17, kernel=3, stride=2, padding=1, bias=True, shift=8),
}


class _Cache(dict):
    """Measurements by `measurement_key`, persisted as JSON lines (one per new entry)."""

    def __init__(self, path: Path):
        super().__init__()
        self.writer = TuneLog(path)
        for record in read_jsonl(path, required="key"):
            super().__setitem__(record["key"], record_measurement(record))

    def __setitem__(self, key, measurement):
        super().__setitem__(key, measurement)
        self.writer.append({"key": key, "cost": measurement.cost, "correct": measurement.correct,
                            "error": measurement.error, "details": measurement.details})


def trials_to_reach(curve: list[float | None], goal: float) -> int | None:
    """1-based trial at which a best-so-far curve first reaches ``goal`` (None: never)."""
    for index, value in enumerate(curve, start=1):
        if value is not None and value <= goal:
            return index
    return None


def _median(values: list[int | None], budget: int) -> float | None:
    """Median with 'never' counted as beyond the budget (None if the median is)."""
    ranked = sorted(budget + 1 if v is None else v for v in values)
    median = statistics.median(ranked)
    return None if median > budget else median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="accel", choices=("accel", "cpu"))
    parser.add_argument("--config", default="default")
    parser.add_argument("--layers", default="C4,C7,C10")
    parser.add_argument("--extra", default=",".join(EXTRA))
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--output", default=None,
                        help="default: results/tuning.json (cpu: tuning_cpu.json)")
    parser.add_argument("--table-only", action="store_true",
                        help="print the markdown table of --output's report and exit")
    parser.add_argument("--recheck", type=int, default=0, metavar="N",
                        help="measure each workload's default and best schedule of --output's "
                             "report N more times each, alternating (how noisy the costs are), "
                             "and add that to the report")
    args = parser.parse_args()
    suffix = "" if args.target == "accel" else f"_{args.target}"
    output = args.output or str(RESULTS / f"tuning{suffix}.json")
    if args.table_only:
        print(markdown_table(json.loads(Path(output).read_text())))
        return 0
    config = load_config(args.config)
    workloads = {name: resnet18_layer(name).op for name in args.layers.split(",") if name}
    workloads.update({name: EXTRA[name] for name in args.extra.split(",") if name})
    target = get_target(args.target)
    unit = target.unit
    cache = _Cache(RESULTS / f"tuning{suffix}_cache.jsonl")
    if args.recheck:
        report = json.loads(Path(output).read_text())
        report["recheck"] = recheck(report, workloads, target, config, cache, args.recheck)
        report["recheck_command"] = "python benchmarks/tuning.py " + " ".join(sys.argv[1:])
        Path(output).write_text(json.dumps(report, indent=1))
        return 0
    report = {"command": "python benchmarks/tuning.py " + " ".join(sys.argv[1:]),
              "target": args.target, "design": target.design(config), "unit": unit,
              "config": config.name, "trials": args.trials, "seeds": args.seeds,
              "batch": args.batch, "within": WITHIN, "workloads": {}}
    began = time.perf_counter()
    with Pool(args.jobs) as pool:
        options = target.prepare(config, shared=True)
        for name, op in workloads.items():
            default = target.default(op, config)
            key = measurement_key(args.target, op, config, default)
            if key not in cache:
                cache[key] = target.measure(op, config, default, options)
            curves = {}
            for tuner in TUNERS:
                seeds = range(args.seeds) if tuner != "grid" else range(1)  # grid: no randomness
                curves[tuner] = [
                    tune(op, config,
                         TuneSettings(target=args.target, tuner=tuner, trials=args.trials,
                                      batch=args.batch, seed=seed, start_from_default=False),
                         pool=pool, cache=cache).best_so_far()
                    for seed in seeds]
            best = min(v for runs in curves.values() for curve in runs for v in curve
                       if v is not None)
            goal = best * (1 + WITHIN)
            reach = {tuner: [trials_to_reach(curve, goal) for curve in runs]
                     for tuner, runs in curves.items()}
            medians = {tuner: _median(values, args.trials) for tuner, values in reach.items()}
            xgb, rnd = medians["xgb"], medians["random"]
            ratio = (rnd if rnd is not None else args.trials + 1) / xgb if xgb else None
            row = {"op": op.describe(), f"default_{unit}": cache[key].cost, f"best_{unit}": best,
                   f"tuned_{unit}": min(best, cache[key].cost),
                   "best_over_default": best / cache[key].cost,
                   "trials_to_within": reach, "median_trials_to_within": medians,
                   "random_over_xgb": ratio, "random_never": rnd is None,
                   "meets_3x": ratio is not None and ratio >= 3, "curves": curves}
            report["workloads"][name] = row
            _write(report, output, began, cache)      # after each workload: partial runs count
            print(f"{name:6s} default {cache[key].cost:>11,.1f}  best {best:>11,.1f} {unit} "
                  f"({best / cache[key].cost:.3f}x)  median trials to 5%: "
                  + "  ".join(f"{t} {medians[t]}" for t in TUNERS)
                  + f"  random/xgb {'>' if rnd is None else ''}"
                  + (f"{ratio:.1f}" if ratio else "-"), flush=True)
    report = _write(report, output, began, cache)
    print(markdown_table(report))
    print(f"{report['summary']}; wrote {output}")
    return 0


def recheck(report: dict, workloads: dict, target, config, cache: dict, times: int) -> dict:
    """Measure each workload's default and best schedule ``times`` more times each.

    The best is the cached measurement of the report's best cost; the two are
    measured alternately, so a change in the machine's load touches both.
    Returns, per workload, the costs and the median ratio best / default.
    """
    unit, options = report["unit"], target.prepare(config, shared=True)
    result = {}
    for name, row in report["workloads"].items():
        op = workloads.get(name)
        if op is None:
            continue
        schedules = [json.loads(key)[-1] for key, m in cache.items()
                     if json.loads(key)[1] == workload_key(op) and m.cost == row[f"best_{unit}"]]
        space = target.space(op, config)
        pair = {"default": target.default(op, config), "best": space.decode(schedules[0])}
        costs = {which: [] for which in pair}
        for _ in range(times):
            for which, schedule in pair.items():
                measured = target.measure(op, config, schedule, options)
                costs[which].append(measured.cost)
        ratios = [b / d for b, d in zip(costs["best"], costs["default"])]
        result[name] = {"best_schedule": pair["best"].to_dict(), **costs,
                        "best_over_default_median": statistics.median(ratios),
                        "best_over_default_range": [min(ratios), max(ratios)]}
        print(f"{name:6s} recheck best/default median {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}-{max(ratios):.3f}) over {times}", flush=True)
    return result


def markdown_table(report: dict) -> str:
    """The README's table of a report: default and tuned cost, trials to within 5 %."""
    unit = report.get("unit", "cycles")              # reports from before --target
    recheck = report.get("recheck", {})
    extra = (" re-measured best / default: median (range) |", "--:|") if recheck else ("", "")
    lines = [f"| workload | layer | default {unit} | tuned {unit} | tuned / default | median "
             f"trials to within 5 %: xgb / random / grid | random ÷ xgb |{extra[0]}",
             f"|---|---|--:|--:|--:|--:|--:|{extra[1]}"]
    for name, row in report["workloads"].items():
        default, tuned = row[f"default_{unit}"], row[f"tuned_{unit}"]
        medians = " / ".join("never" if row["median_trials_to_within"][t] is None
                             else f"{row['median_trials_to_within'][t]:g}" for t in TUNERS)
        ratio = row["random_over_xgb"]
        ratio = "-" if ratio is None else ("> " if row["random_never"] else "") + f"{ratio:.1f}"
        number = ",.0f" if unit == "cycles" else ",.1f"
        line = (f"| {name} | {row['op']} | {default:{number}} | {tuned:{number}} | "
                f"{tuned / default:.3f} | {medians} | {ratio} |")
        if name in recheck:
            low, high = recheck[name]["best_over_default_range"]
            line += f" {recheck[name]['best_over_default_median']:.3f} ({low:.2f}–{high:.2f}) |"
        lines.append(line)
    return "\n".join(lines)


def _write(report: dict, output: str, began: float, cache: dict) -> dict:
    report["seconds"] = round(time.perf_counter() - began, 1)
    report["simulated_schedules"] = len(cache)
    rows, unit = report["workloads"].values(), report["unit"]
    report["summary"] = {"workloads": len(rows),
                         "meets_3x": sum(row["meets_3x"] for row in rows),
                         "tuned_never_slower": all(row[f"tuned_{unit}"] <= row[f"default_{unit}"]
                                                   for row in rows)}
    Path(output).write_text(json.dumps(report, indent=1))
    _plot(report, Path(output).with_suffix(".png"))
    return report


def _plot(report: dict, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    names, unit = list(report["workloads"]), report["unit"]
    columns = min(4, len(names))
    rows = -(-len(names) // columns)
    figure = Figure(figsize=(4 * columns, 3 * rows))
    FigureCanvasAgg(figure)
    colours = {"xgb": "#c62828", "random": "#1565c0", "grid": "#757575"}
    for index, name in enumerate(names):
        row = report["workloads"][name]
        axes = figure.add_subplot(rows, columns, index + 1)
        for tuner, runs in row["curves"].items():
            data = np.array([[np.nan if v is None else row[f"best_{unit}"] / v for v in curve]
                             for curve in runs])
            trials = np.arange(1, data.shape[1] + 1)
            axes.plot(trials, np.nanmedian(data, axis=0), color=colours[tuner], label=tuner)
            if len(runs) > 1:
                axes.fill_between(trials, np.nanmin(data, axis=0), np.nanmax(data, axis=0),
                                  color=colours[tuner], alpha=0.15)
        axes.axhline(row[f"best_{unit}"] / row[f"default_{unit}"], color="black", ls=":",
                     label="default")
        axes.axhline(1 / (1 + WITHIN), color="#2e7d32", ls="--", lw=0.8, label="within 5%")
        axes.set_title(f"{name} ({report.get('target', 'accel')}): {row['op']}", fontsize=7)
        axes.set_xlabel("trials", fontsize=7)
        axes.set_ylabel("best found / best-so-far", fontsize=7)
        axes.set_ylim(0, 1.05)
        axes.tick_params(labelsize=6)
        if index == 0:
            axes.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path, dpi=130)


if __name__ == "__main__":
    sys.exit(main())
