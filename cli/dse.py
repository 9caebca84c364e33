"""``vdla dse``: sweep accelerator configurations for a workload; time, area, Pareto front.

``vdla dse --space space.json --workload resnet18 [--layers C4,C7]
[--scheduler ...]`` evaluates every configuration of the space (see
`tune.dse`) on the RTL with its synthesis estimate, appends each result to
``--log`` as it finishes (``--resume`` continues; by default a log in the
cache folder named for the sweep, so a crashed run leaves no file where the
command ran), and writes the table and
the Pareto front of time against area as JSON (``--out``) and a plot
(``--plot``, when a configuration succeeded). It exits non-zero when any
configuration failed; ``--resume`` evaluates the failed ones again.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from pathlib import Path

import click

from vdla.cli.options import Command, fail, write_output


def default_log(space, workloads) -> Path:
    """The log of a sweep when ``--log`` is not given: in the cache folder (never in the
    folder the command runs in, which may be a repository), named for the sweep (its
    space and layers), so the same command with ``--resume`` continues it."""
    from vdla.cache import cache_root
    sweep = repr((space, [(w.name, w.op.describe()) for w in workloads])).encode()
    return cache_root() / "dse" / f"{hashlib.sha256(sweep).hexdigest()[:16]}.jsonl"


@click.command("dse", cls=Command, short_help="Find the best accelerator config per unit of area.")
@click.option("--space", "space_path", required=True, metavar="SPACE.json",
              help="Configurations to sweep (see `vdla.tune.dse`).")
@click.option("--workload", default="resnet18", show_default=True, help="Network to run.")
@click.option("--layers", default=None, help="Comma-separated layers (default: all).")
@click.option("--log", "log_path", default=None, metavar="FILE.jsonl",
              help="Append each configuration's result here (default: a log of this sweep in "
                   "the cache folder, which --resume finds again).")
@click.option("--resume", is_flag=True, help="Continue the log's sweep.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--scheduler", default=None, metavar="tcp://HOST:PORT|local",
              help="Run on this Dask scheduler, or 'local' to start a cluster.")
@click.option("--metric", default="luts", show_default=True,
              type=click.Choice(["luts", "ffs", "brams", "dsps"]), help="Area for the front.")
@click.option("--out", "out_path", default="dse.json", show_default=True,
              help="Table and front as JSON.")
@click.option("--plot", "plot_path", default="dse.png", show_default=True,
              help="Pareto plot (PNG).")
def command(space_path, workload, layers, log_path, resume, jobs, scheduler, metric, out_path,
            plot_path):
    """Find the best accelerator configuration per unit of area for a workload."""
    from tqdm import tqdm
    from vdla.tune import dse
    from vdla.bench.plots import pareto
    from vdla.bench.suite import select_workloads
    space = dse.load_space(space_path)
    workloads = select_workloads(layers, workload)
    configs, skipped = space.configs()
    if log_path is None:
        log_path = str(default_log(space, workloads))
    for reason in skipped:
        click.echo(f"skipping invalid config {reason}", err=True)
    bar = tqdm(total=len(configs), desc=f"dse {workload}", unit="config")

    def progress(record):
        bar.update(1)
        bar.set_postfix_str(record["name"] + (": failed" if record["error"] else ""))

    try:
        records = dse.run_dse(space, workloads, log=log_path, resume=resume, jobs=jobs,
                              scheduler=scheduler, progress=progress)
        front = dse.pareto_front(records, metric)
    except KeyboardInterrupt:
        raise click.Abort() from None
    finally:
        bar.close()
    report = {"command": "vdla " + shlex.join(sys.argv[1:]), "workload": workload,
              "layers": [w.name for w in workloads], "metric": metric, "configs": records,
              "front": [r["name"] for r in front]}
    written = [out_path]
    write_output(out_path, json.dumps(report, indent=1), "--out")
    try:
        if front:
            pareto(records, front, metric, plot_path)
            written.append(plot_path)
    except (OSError, ValueError) as error:
        fail(f"--plot: cannot write {plot_path} ({getattr(error, 'strerror', None) or error})")
    click.echo(f"{'config':40s} {'cycles':>12s} {metric:>8s} {'MHz':>6s} {'time ms':>9s}")
    for record in records:
        if record.get("error"):
            click.echo(f"{record['name']:40s} failed: {record['error']}")
            continue
        mark = " *" if record in front else ""
        click.echo(f"{record['name']:40s} {record['cycles']:12,d} {record['area'][metric]:8,d} "
                   f"{record['clock_mhz']:6.1f} {record['time_s'] * 1e3:9.3f}{mark}")
    click.echo(f"* Pareto front ({len(front)} of {len(records)}); wrote {', '.join(written)}")
    failed = [record["name"] for record in records if record.get("error")]
    if failed:
        fail(f"{len(failed)} of {len(records)} configuration(s) failed ({', '.join(failed[:3])}"
             f"{', ...' if len(failed) > 3 else ''}): see {log_path}; --resume evaluates "
             "them again")
