"""``vdla compare resnet18``: the accelerator, the cpu target and CPU libraries, side by side.

Runs C2–C11 once in this process (`bench.compare.run_comparison`): the
accelerator's RTL-baseline cycles at ``--clock-mhz`` (its outputs checked on
fsim), the cpu target in int8 and fp32, onnxruntime (when installed) and
numpy, and with ``--targets ...,gpu`` the gpu target and PyTorch cuDNN at
batch 1 and 8 ("not measured (no CUDA device)" without one), every output
checked against numpy. Each CPU implementation is timed in blocks of its own
(``--warmup`` calls, then ``--calls`` timed calls), ``--repeats`` rounds of
blocks in random order (``--seed``); medians with their spread, and
onnxruntime with its intra-op spinning on (its default) and off
(``... nospin``). ``--only`` times a few implementations alone.
Prints a table (or ``--json``), optionally writes the report (``--json-out``)
and a log-scale bar chart (``--plot``). An output that disagrees with numpy
is one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import json
import sys

import click

from vdla.cli.options import POSITIVE, Command, config_option, fail, write_output
from vdla.compiler.workloads import RESNET18
from vdla.runtime.program import PROGRAM_TARGETS

NETWORKS = {"resnet18": RESNET18}


def _choices(option: str, value: str, known) -> list[str]:
    """The comma-separated names of ``value``, each one of ``known``."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names or any(name not in known for name in names):
        fail(f"{option} {value!r}: expected a comma-separated list of {', '.join(known)}")
    return names


@click.command("compare", cls=Command,
               short_help="Compare the accelerator with the cpu target and CPU libraries.")
@click.argument("network", type=click.Choice(list(NETWORKS)))
@click.option("--targets", default="accel,cpu", show_default=True,
              help="Which of accel,cpu,gpu to measure (the CPU libraries always run; "
                   "gpu adds PyTorch cuDNN on the same GPU, batch 1 and 8).")
@config_option
@click.option("--clock-mhz", type=POSITIVE, default=None,
              help="The accelerator's clock (default: the config's Fmax from `vdla hw synth`, "
                   "else 100 MHz, VTA's PYNQ clock).")
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True,
              help="Threads of the cpu target and onnxruntime.")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True,
              help="Rounds: blocks of each implementation per layer, in random order.")
@click.option("--calls", type=click.IntRange(min=1), default=10, show_default=True,
              help="Timed calls in each block.")
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True,
              help="Untimed calls opening each block.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seeds the inputs and the blocks' order.")
@click.option("--layers", default=None, metavar="NAME,...",
              help="Only these layers of NETWORK (e.g. C2,C5; default: all).")
@click.option("--only", default=None, metavar="NAME,...",
              help="Time only these CPU implementations (e.g. 'cpu fp32,ort fp32').")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--json-out", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE.json", help="Also write the report to FILE.json.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE.png", help="Draw ms per layer, log scale.")
def command(network, targets, config, clock_mhz, threads, repeats, calls, warmup, seed, layers,
            only, as_json, json_path, plot_path):
    """Compare the accelerator with the cpu target and CPU libraries on NETWORK."""
    from vdla.bench.compare import format_table, plot_comparison, run_comparison, timed_names
    names = tuple(_choices("--targets", targets, PROGRAM_TARGETS))
    workloads = NETWORKS[network]
    if layers is not None:
        chosen = _choices("--layers", layers, [w.name for w in workloads])
        workloads = tuple(w for w in workloads if w.name in chosen)
    if only is not None:
        only = [name.strip() for name in only.split(",") if name.strip()]
        try:
            timed_names(names, only)
        except ValueError as error:
            fail(f"--only: {error}")

    from tqdm import tqdm
    layer_names = [w.name for w in workloads]
    # Layers timed so far, and what runs now (`run_comparison`'s progress lines).
    bar = tqdm(total=len(layer_names), desc=f"compare {network}", unit="layer", file=sys.stderr,
               leave=False, dynamic_ncols=True)

    def progress(message: str) -> None:
        layer = message.partition(":")[0]
        if layer in layer_names:
            bar.n = layer_names.index(layer)
        bar.set_postfix_str(message)
    try:
        report = run_comparison(config, names, clock_mhz, threads, repeats, workloads,
                                seed, progress, calls, warmup, only)
    finally:
        bar.close()
    report["command"] = "vdla compare " + " ".join(sys.argv[2:])
    try:
        if json_path:
            write_output(json_path, json.dumps(report, indent=2), "--json")
        if plot_path:
            plot_comparison(report, plot_path)
    except OSError as error:
        fail(f"cannot write {error.filename}: {error.strerror}")
    if as_json:
        click.echo(json.dumps(report))
        return
    for line in format_table(report):
        click.echo(line)
    for what, path in (("report", json_path), ("plot", plot_path)):
        if path:
            click.echo(f"{what}: {path}")
