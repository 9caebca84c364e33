"""``vdla compare resnet18``: the accelerator, the cpu target and CPU libraries, side by side.

Runs C2–C11 once in this process (`bench.compare.run_comparison`): the
accelerator's RTL-baseline cycles at ``--clock-mhz`` (its outputs checked on
fsim), the cpu target in int8 and fp32, onnxruntime (when installed) and
numpy, and with ``--targets ...,gpu`` the gpu target and PyTorch cuDNN at
batch 1 and 8 ("not measured (no CUDA device)" without one), medians of ``--repeats`` calls, every output checked against numpy.
Prints a table (or ``--json``), optionally writes the report (``--json-out``)
and a log-scale bar chart (``--plot``). An output that disagrees with numpy
is one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import json
import sys

import click

from vdla.cli.options import POSITIVE, config_option, fail, write_output

_TARGETS = ("accel", "cpu", "gpu")


def _targets(value: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in _TARGETS]
    if unknown or not names:
        fail(f"--targets {value!r}: expected a comma-separated list of {', '.join(_TARGETS)}")
    return names


@click.command("compare")
@click.argument("network", type=click.Choice(["resnet18"]))
@click.option("--targets", default="accel,cpu", show_default=True,
              help="Which of accel,cpu,gpu to measure (the CPU libraries always run; "
                   "gpu adds PyTorch cuDNN on the same GPU, batch 1 and 8).")
@config_option
@click.option("--clock-mhz", type=POSITIVE, default=None,
              help="The accelerator's clock (default: the config's Fmax from `vdla hw synth`, "
                   "else 100 MHz, VTA's PYNQ clock).")
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True,
              help="Threads of the cpu target and onnxruntime.")
@click.option("--repeats", type=click.IntRange(min=1), default=20, show_default=True,
              help="Timed calls per layer (the median is reported).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--json-out", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE.json", help="Also write the report to FILE.json.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE.png", help="Draw ms per layer, log scale.")
def command(network, targets, config, clock_mhz, threads, repeats, as_json, json_path,
            plot_path):
    """Compare the accelerator with the cpu target and CPU libraries on NETWORK."""
    from vdla.bench.compare import (CheckError, format_table,
                                    plot_comparison, run_comparison)
    from vdla.compiler.cpu.build import CpuBuildError
    names = _targets(targets)

    def progress(message: str) -> None:
        if sys.stderr.isatty():
            click.echo(f"\r{message:<40}", nl=False, err=True)
    try:
        report = run_comparison(config, names, clock_mhz, threads, repeats, progress=progress)
    except (CheckError, CpuBuildError) as error:
        fail(str(error))
    if sys.stderr.isatty():
        click.echo("\r" + " " * 41 + "\r", nl=False, err=True)
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
