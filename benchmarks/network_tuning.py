"""Network tuning curves: estimated end-to-end cycles against trials, task scheduler vs uniform.

Usage::

    python benchmarks/network_tuning.py [--model ic_resnet8] [--config tiny]
        [--trials 120] [--batch 4] [--seeds 2] [--jobs 1]

The zoo model is imported, quantised on seeded calibration samples and
compiled as ``vdla compile`` does; its distinct accelerator layers are tuned
together (`vdla.tune.network.tune_network`) within ``--trials`` trials, once
with Ansor's gradient task scheduler and once with uniform allocation (rounds
in turn), for each seed. Every trial is measured as layer tuning measures it:
the schedule compiled and run on the Verilator RTL, cycles counted, the output
checked bit for bit. Measurements are cached by `tune.log.measurement_key` in
``benchmarks/results/network_tuning_cache.jsonl``, so a schedule both
strategies meet is simulated once and a re-run resumes. The end-to-end cost
after a trial is the sum over layers of their best cycles so far, each times
its occurrences.

Per seed it reports the best end-to-end cost uniform allocation found, the
trials it needed to reach it, and the trials the scheduler needed to reach it
(None: not within the budget); the criterion is met when the scheduler needs
at most half of uniform's trials. Writes
``benchmarks/results/network_tuning.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks" / "models"))

from vdla.bench.executor import Pool  # noqa: E402
from vdla.hw.config import load_config  # noqa: E402
from vdla.tune import TuneSettings  # noqa: E402
from vdla.tune.log import TuneLog, read_jsonl, record_measurement  # noqa: E402
from vdla.tune.network import STRATEGIES, tasks_from_model, tune_network  # noqa: E402


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


def first_within(curve: list[float | None], target: float) -> int | None:
    """Trials (1-based) until the curve is at or below ``target``."""
    return next((i + 1 for i, value in enumerate(curve)
                 if value is not None and value <= target), None)


def main(argv=None) -> int:
    import onnx
    import zoo
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ic_resnet8", choices=sorted(zoo.MODELS))
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--trials", type=int, default=120)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--output", default=str(RESULTS / "network_tuning.json"))
    args = parser.parse_args(argv)
    began = time.perf_counter()
    config = load_config(args.config)
    model = zoo.MODELS[args.model](0)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / f"{args.model}.onnx"
        onnx.save(model, path)
        tasks = tasks_from_model(path, config, zoo.random_inputs(model, 8))
        cache = _Cache(RESULTS / "network_tuning_cache.jsonl")
        runs = {strategy: [] for strategy in STRATEGIES}
        default = None
        pool = Pool(args.jobs)
        try:
            for seed in range(args.seeds):
                for strategy in STRATEGIES:
                    log = Path(scratch) / f"{strategy}_{seed}.jsonl"
                    settings = TuneSettings(trials=args.trials, log=log, batch=args.batch,
                                            seed=seed, jobs=args.jobs)
                    result = tune_network(tasks, config, settings, strategy=strategy,
                                          pool=pool, cache=cache)
                    if default is None:
                        default = _default_end_to_end(result, config)
                    runs[strategy].append({"curve": result.curve(),
                                           "allocation": result.allocation(),
                                           "rounds": result.rounds,
                                           "measured": result.measured})
                    print(f"seed {seed} {strategy}: end-to-end {result.end_to_end():,.0f} "
                          f"cycles, trials per layer {result.allocation()}", flush=True)
        finally:
            pool.close()
    per_seed = []
    for seed in range(args.seeds):
        uniform, gradient = runs["uniform"][seed]["curve"], runs["gradient"][seed]["curve"]
        target = uniform[-1]
        uniform_trials = first_within(uniform, target)
        gradient_trials = first_within(gradient, target)
        per_seed.append({"seed": seed, "uniform_best": target, "gradient_best": gradient[-1],
                         "uniform_trials_to_its_best": uniform_trials,
                         "gradient_trials_to_uniform_best": gradient_trials,
                         "at_most_half": gradient_trials is not None
                         and gradient_trials <= uniform_trials / 2,
                         "at_most_half_of_budget": gradient_trials is not None
                         and gradient_trials <= args.trials / 2})
    summary = {
        "command": "python benchmarks/network_tuning.py " + " ".join(argv or sys.argv[1:]),
        "model": args.model, "config": args.config, "target": "accel (RTL cycles)",
        "trials": args.trials, "batch": args.batch, "seeds": args.seeds,
        "tasks": [{"op": t.op.describe(), "weight": t.weight, "layers": list(t.layers),
                   "macs": t.op.macs} for t in tasks],
        "default_end_to_end": default,
        "per_seed": per_seed,
        "median_gradient_over_uniform_trials": statistics.median(
            s["gradient_trials_to_uniform_best"] / s["uniform_trials_to_its_best"]
            if s["gradient_trials_to_uniform_best"] is not None else float("inf")
            for s in per_seed),
        "criterion_met": all(s["at_most_half"] for s in per_seed),
        "criterion_met_against_budget": all(s["at_most_half_of_budget"] for s in per_seed),
        "runs": runs,
        "simulated_schedules": len(cache),
        "seconds": round(time.perf_counter() - began, 1),
    }
    Path(args.output).write_text(json.dumps(summary, indent=1) + "\n")
    for s in per_seed:
        print(f"seed {s['seed']}: uniform best {s['uniform_best']:,.0f} cycles after "
              f"{s['uniform_trials_to_its_best']} trials; the scheduler reaches it after "
              f"{s['gradient_trials_to_uniform_best']} (best {s['gradient_best']:,.0f})")
    print(f"default schedules: {default} cycles; criterion (at most half of uniform's trials "
          f"to its best) met: {summary['criterion_met']}; "
          f"{summary['seconds']} s; wrote {args.output}")
    return 0


def _default_end_to_end(result, config) -> float | None:
    """The end-to-end cycles of every layer's default schedule, where each was measured."""
    from vdla.tune.target import get_target
    total = 0.0
    for index, task in enumerate(result.tasks):
        schedule = get_target("accel").default(task.op, config).to_dict()
        cost = next((r["cost"] for i, r in result.trials
                     if i == index and r["schedule"] == schedule), None)
        if cost is None:
            return None
        total += task.weight * cost
    return total


if __name__ == "__main__":
    sys.exit(main())
