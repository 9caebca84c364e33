"""``vdla tune``: search a layer's schedule space with real measurements.

``vdla tune conv2d|dense <layer options> --target accel|cpu --trials N --tuner
xgb|random|grid --log tune.jsonl`` measures candidates (accel: RTL cycles;
cpu: wall time of the generated C on this machine, one thread; each output
checked against numpy) on local worker processes or a Dask cluster
(``--scheduler tcp://host:8786``, or ``local`` to start one here), appends each
trial to the log as it finishes and shows progress (trials, best so far).
``--resume`` continues a log after a crash; ``--transfer`` warm-starts the
xgb model from other workloads' logs; ``vdla compile --tuned`` applies the
result.
"""

from __future__ import annotations

import json
import warnings

import click

from vdla.cli.compile import conv2d_from_options, conv2d_options, dense_from_options, dense_options
from vdla.cli.options import Group, config_option, fail


def _tune_options(function):
    options = [
        config_option,
        click.option("--target", default="accel", show_default=True,
                     help="Where schedules are measured (accel: RTL cycles; cpu: microseconds "
                          "of the generated C on this machine, one thread)."),
        click.option("--trials", type=click.IntRange(min=1), default=32, show_default=True,
                     help="Trials in all (resumed ones included)."),
        click.option("--tuner", default="xgb", show_default=True,
                     type=click.Choice(["xgb", "random", "grid"])),
        click.option("--log", "log_path", default="tune.jsonl", show_default=True,
                     metavar="FILE.jsonl", help="Append every trial to this log."),
        click.option("--resume", is_flag=True, help="Continue the log's trials of this layer."),
        click.option("--transfer", "transfer_paths", multiple=True, metavar="LOG.jsonl",
                     help="Warm-start the xgb model from other workloads' logs (repeatable)."),
        click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Local worker processes (or workers of --scheduler local)."),
        click.option("--scheduler", default=None, metavar="tcp://HOST:PORT|local",
                     help="Measure on this Dask scheduler, or 'local' to start a cluster "
                          "(needs 'distributed')."),
        click.option("--batch-size", "batch_size", type=click.IntRange(min=1), default=None,
                     help="Candidates per round (default: twice the workers, at least 4)."),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@click.group("tune", cls=Group, short_help="Tune a layer's schedule with measurements.")
def command():
    """Tune a layer's schedule with measurements (grid, random or XGBoost-guided)."""


@command.command("conv2d")
@conv2d_options
@_tune_options
def conv2d(**options):
    """Tune a 2D convolution."""
    _tune(lambda: conv2d_from_options(options), **options)


@command.command("dense")
@dense_options
@_tune_options
def dense(**options):
    """Tune a fully connected layer."""
    _tune(lambda: dense_from_options(options), **options)


def _read_logs(paths):
    from vdla.tune import read_log
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = [record for path in paths for record in read_log(path)]
    for warning in caught:
        click.echo(f"warning: {warning.message}", err=True)
    return records


def _tune(make_op, *, config, target, trials, tuner, log_path, resume, transfer_paths, jobs,
          scheduler, batch_size, seed, as_json, **_):
    from tqdm import tqdm
    from vdla.tune import TuneSettings, get_target, tune
    op = make_op()
    unit = get_target(target).unit
    transfer = _read_logs(transfer_paths)
    _read_logs([log_path])                  # warn about a torn last line up front
    bar = tqdm(total=trials, desc=f"tune {op.describe()} ({tuner})", unit="trial",
               disable=as_json, leave=True)
    best = [None]

    def progress(record):
        if record["correct"] and (best[0] is None or record["cost"] < best[0]):
            best[0] = record["cost"]
        bar.update(1)
        bar.set_postfix_str("best " + (_cost(best[0], unit) if best[0] is not None else "-"))

    def message(text):
        bar.clear()
        click.echo(f"{text} (first run for this hardware only, about a minute)", err=True)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # the torn line was reported above
            settings = TuneSettings(target=target, tuner=tuner, trials=trials, log=log_path,
                                    resume=resume, jobs=jobs, scheduler=scheduler,
                                    batch=batch_size, seed=seed)
            result = tune(op, config, settings, transfer=transfer, progress=progress,
                          message=message)
            bar.n = len(result.records)
    except KeyboardInterrupt:
        raise click.Abort() from None
    finally:
        bar.close()
    best_record = result.best
    # The default is in the first batch, not always first: trials are logged as they finish.
    default_schedule = get_target(target).default(op, config).to_dict()
    default = next((r for r in result.records if r["schedule"] == default_schedule), None)
    summary = {"op": op.describe(), "config": config.name, "target": target, "unit": unit,
               "tuner": tuner, "trials": len(result.records), "measured": result.measured,
               "log": log_path,
               "best_cost": best_record["cost"] if best_record else None,
               "best_schedule": best_record["schedule"] if best_record else None,
               "default_cost": default["cost"] if default else None}
    if as_json:
        click.echo(json.dumps(summary))
        return
    if best_record is None:
        fail(f"no trial of {op.describe()} succeeded (see {log_path})")
    schedule = " ".join(f"{k}={v}" for k, v in best_record["schedule"].items())
    click.echo(f"{op.describe()} on {config.name if target == 'accel' else target}: best "
               f"{_cost(best_record['cost'], unit)} "
               f"after {len(result.records)} trial(s) ({result.measured} measured now)")
    click.echo(f"  schedule: {schedule}")
    if default is not None and default["cost"] is not None:
        click.echo(f"  default schedule: {_cost(default['cost'], unit)}")
    click.echo(f"  log: {log_path} (apply with: vdla compile ... --target {target} "
               f"--tuned {log_path})")


def _cost(value: float, unit: str) -> str:
    return f"{value:,.0f} {unit}" if unit == "cycles" else f"{value:,.1f} {unit}"
