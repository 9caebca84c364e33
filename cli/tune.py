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

``vdla tune MODEL.onnx|NET.vdla --trials N`` tunes a whole network's distinct
accelerator layers together (`tune.network`): Ansor's task scheduler gives
each round of trials to the layer that most lowers the estimated end-to-end
cycles (``--strategy uniform``: rounds in turn); ``vdla compile MODEL.onnx
--tuned LOG`` applies each layer's best.
"""

from __future__ import annotations

import json
import warnings

import click

from vdla.cli.compile import conv2d_from_options, conv2d_options, dense_from_options, dense_options
from vdla.cli.net import ModelGroup, per_channel_option
from vdla.cli.options import config_option, fail


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


class _NetworkGroup(ModelGroup):
    """``vdla tune FILE ...`` means ``vdla tune model FILE ...`` for a model or network file."""

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands:
            from vdla.graph.network_file import is_network_file
            if is_network_file(args[0]):
                return "model", self.commands["model"], args
        return super().resolve_command(ctx, args)


@click.group("tune", cls=_NetworkGroup,
             short_help="Tune a layer's or a network's schedules with measurements.")
def command():
    """Tune a layer's schedule with measurements (grid, random or XGBoost-guided), or a
    network's layers together (vdla tune MODEL.onnx)."""


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


@command.command("model", short_help="Tune the layers of an ONNX model or network file.")
@click.argument("model_path", metavar="MODEL.onnx|NET.vdla")
@click.option("--calibration", "calibration_path", default=None, metavar="FILE.npy",
              help="Sample inputs for quantisation, as vdla compile takes them (the layers "
                   "tuned are those it compiles).")
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="The batch the network runs (default: the model's).")
@click.option("--strategy", type=click.Choice(["gradient", "uniform"]), default="gradient",
              show_default=True,
              help="How rounds are allocated: Ansor's task scheduler, or in turn.")
@per_channel_option
@_tune_options
def model(model_path, calibration_path, batch, strategy, per_channel, **options):
    """Tune the distinct accelerator layers of a network together, within --trials in all."""
    from vdla.graph.network_file import is_network_file
    from vdla.tune.network import tasks_from_file, tasks_from_model
    config = options["config"]
    if options["target"] == "cpu":
        fail(f"--target {options['target']}: network tuning tunes the accelerator's layers "
             "(tune one layer on the cpu with: vdla tune conv2d|dense ... --target cpu)")
    if is_network_file(model_path):
        if calibration_path is not None or batch is not None or per_channel:
            fail("--calibration, --batch and --per-channel quantise an ONNX model; "
                 f"{model_path} is a compiled network")
        tasks = tasks_from_file(model_path, config)
    else:
        calibration = None
        if calibration_path is not None:
            from vdla.cli.arrays import read_npy
            from vdla.frontend.onnx import load as load_model
            samples = read_npy(calibration_path, "--calibration")
            inputs = load_model(model_path, batch=batch).inputs
            if len(inputs) != 1:
                fail(f"--calibration: the model has {len(inputs)} inputs; one .npy "
                     "calibrates a single-input model")
            calibration = {inputs[0]: samples}
        tasks = tasks_from_model(model_path, config, calibration, batch=batch,
                                 per_channel=per_channel)
    _tune_network(tasks, strategy=strategy, **options)


def _tune_network(tasks, *, strategy, config, target, trials, tuner, log_path, resume,
                  transfer_paths, jobs, scheduler, batch_size, seed, as_json):
    from tqdm import tqdm
    from vdla.tune import TuneSettings
    from vdla.tune.network import tune_network
    if transfer_paths:
        fail("--transfer: a network's layers already share one model (tune each network "
             "in its own log)")
    _read_logs([log_path])                  # warn about a torn last line up front
    bar = tqdm(total=trials, desc=f"tune {len(tasks)} layer(s) ({tuner})", unit="trial",
               disable=as_json, leave=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # the torn line was reported above
            settings = TuneSettings(target=target, tuner=tuner, trials=trials, log=log_path,
                                    resume=resume, jobs=jobs, scheduler=scheduler,
                                    batch=batch_size, seed=seed)
            result = tune_network(tasks, config, settings, strategy=strategy,
                                  progress=lambda task, record: bar.update(1))
    except KeyboardInterrupt:
        raise click.Abort() from None
    finally:
        bar.close()
    best, allocation = result.best(), result.allocation()
    default = [_default_cost(task, config, target, result) for task in range(len(tasks))]
    rows = [{"op": task.op.describe(), "weight": task.weight, "layers": list(task.layers),
             "trials": allocation[i], "best_cost": best[i]["cost"] if best[i] else None,
             "default_cost": default[i]} for i, task in enumerate(tasks)]
    summary = {"config": config.name, "target": target, "tuner": tuner, "strategy": strategy,
               "trials": len(result.trials), "measured": result.measured, "log": log_path,
               "end_to_end": result.end_to_end(),
               "default_end_to_end": None if None in default else
               sum(task.weight * cost for task, cost in zip(tasks, default)),
               "tasks": rows}
    if as_json:
        click.echo(json.dumps(summary))
        return
    if summary["end_to_end"] is None:
        untried = [row["op"] for row in rows if not row["trials"]]
        if untried:
            fail(f"--trials {trials}: {len(untried)} of the {len(tasks)} layers got no trial "
                 f"(each needs a round of up to {result.batch} first): pass more --trials")
        failed = next(row["op"] for row in rows if row["best_cost"] is None)
        fail(f"no trial of {failed} succeeded (see {log_path})")
    click.echo(f"{len(tasks)} distinct layer(s) on {config.name}: estimated end-to-end "
               f"{_cost(summary['end_to_end'], 'cycles')} after {summary['trials']} trial(s) "
               f"({result.measured} measured now)"
               + (f", default schedules {_cost(summary['default_end_to_end'], 'cycles')}"
                  if summary["default_end_to_end"] is not None else ""))
    for row in rows:
        click.echo(f"  {row['weight']} x {row['op']}: {row['trials']} trial(s), best "
                   f"{_cost(row['best_cost'], 'cycles')}")
    click.echo(f"  log: {log_path} (apply with: vdla compile MODEL.onnx --tuned {log_path})")


def _default_cost(task: int, config, target: str, result) -> float | None:
    """The cost of task ``task``'s default schedule among its trials, if measured."""
    from vdla.tune import get_target
    op = result.tasks[task].op
    schedule = get_target(target).default(op, config).to_dict()
    return next((r["cost"] for i, r in result.trials if i == task and r["schedule"] == schedule),
                None)


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
