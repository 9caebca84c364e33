"""``vdla bench-net MODEL``: where a whole network's time goes, CPU only against CPU + accelerator.

MODEL is an ONNX model (compiled here, as ``vdla compile`` does) or a network
file. The network runs once on the accelerator's simulation tier, checked
against vdla's integer reference; its accelerator layers' cycles (the RTL's,
or the compiler's estimates on an untimed tier) become milliseconds at the
clock. Every node is also timed on this machine as the cpu target runs it
(`bench.breakdown.node_times`). Printed: one row per node, the two totals and
the time per kind of work (the TVM paper's figure, ``--plot`` draws it);
written: the same as JSON (``-o``), and each file written is named.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import click
import numpy as np

from vdla.cli.clock import clock_option
from vdla.cli.options import Command, check_sim, config_option, fail, write_output
from vdla.files import printable

__all__ = ["command"]


@click.command("bench-net", cls=Command,
               short_help="Time a network per node: CPU only against CPU + accelerator.")
@click.argument("model_path", metavar="MODEL")
@click.option("--input", "input_path", default=None, metavar="FILE.npy",
              help="The inputs, one batch of float samples (default: the first of "
                   "--calibration).")
@click.option("--calibration", "calibration_path", default=None, metavar="FILE.npy",
              help="Sample inputs to quantise a float ONNX model with.")
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="The batch of an ONNX model (default: the model's, 1 where symbolic).")
@click.option("--sim", default="rtl", show_default=True, metavar="NAME",
              help="The accelerator's tier: rtl (its cycles) or fsim (the compiler's "
                   "estimated cycles).")
@clock_option
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="The results file (JSON; default: MODEL's name + .bench.json).")
@click.option("--plot", "plot_path", default=None, type=click.Path(dir_okay=False),
              help="Draw the breakdown as stacked bars into this PNG.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@config_option
def command(model_path, input_path, calibration_path, batch, sim, clock_mhz, output, plot_path,
            as_json, config):
    """Per-node time and cycles of a network, CPU only against CPU + accelerator."""
    from vdla.bench.breakdown import by_kind, node_times, plot_breakdown
    from vdla.cli.arrays import read_npy, writable
    from vdla.graph.kernels import execute
    from vdla.hw.synth import clock_for
    check_sim(sim)
    output = output or f"{Path(model_path).name}.bench.json"
    writable(output, "-o")
    if plot_path is not None:
        writable(plot_path, "--plot")
    network, calibration = _network(model_path, calibration_path, batch, config)
    clock = clock_for(network.config, clock_mhz)
    if clock is None:
        fail(f"cycles become time at a clock: pass --clock-mhz (no Fmax is known for config "
             f"{network.config.name!r}; vdla hw synth finds it)")
    (name,) = network.graph.inputs
    dtype, shape = network.input_specs()[name]
    if input_path is not None:   # float samples of the input's shape, read no further
        images = read_npy(input_path, f"input {name!r}",
                          SimpleNamespace(dtype=dtype, shape=shape), any_float=True)
    elif calibration is not None and len(calibration) >= shape[0]:
        images = calibration[:shape[0]]
    else:
        fail(f"give the inputs: --input FILE.npy with a batch of {shape[0]} (or --calibration "
             "with at least that many samples)")
    result = network.run({name: images}, sim)
    reference = execute(network.graph, network.check_inputs({name: images}))
    cycles = {row["name"]: row["cycles"] for row in result.layers if row["place"] == "accel"}
    measured = all(c is not None for c in cycles.values())
    if not measured:  # an untimed tier: the compiler's estimates
        cycles = {layer: network.metadata["estimated_cycles"][layer] for layer in cycles}
    rows = node_times(network, images, cycles, clock[0])
    shares = by_kind(rows)
    report = {"model": str(model_path), "config": network.config.name, "sim": sim,
              "cycles": "measured" if measured else "estimated", "clock_mhz": clock[0],
              "clock": clock[1], "batch": shape[0],
              "bit_exact": all(np.array_equal(result.outputs[o], reference[o])
                               for o in network.graph.outputs),
              "nodes": rows, "breakdown_ms": shares,
              "total_ms": {bar: round(sum(kinds.values()), 4) for bar, kinds in shares.items()}}
    write_output(output, json.dumps(report, indent=1) + "\n", "--output")
    files = {"results": str(output)}
    if plot_path is not None:
        title = f"{Path(model_path).stem}, batch {shape[0]}, accelerator at {clock[0]:g} MHz"
        # Drawn into a handle: written aside and renamed, as the results are.
        write_output(plot_path, lambda handle: plot_breakdown(shares, title, handle), "--plot")
        files["plot"] = str(plot_path)
    if as_json:
        click.echo(json.dumps({**report, "files": files}))
        return
    for line in _lines(report) + [f"{what}: {path}" for what, path in files.items()]:
        click.echo(line)


def _network(model_path: str, calibration_path: str | None, batch: int | None, config):
    """The network of a network file or an ONNX model, and the calibration samples."""
    from vdla.cli.arrays import read_npy
    from vdla.graph.network import compile_network
    from vdla.graph.network_file import is_network_file, load
    calibration = None if calibration_path is None else read_npy(calibration_path,
                                                                   "--calibration")
    if is_network_file(model_path):
        return load(model_path, config), calibration
    from vdla.frontend.onnx import load as load_model
    graph = load_model(model_path, batch=batch)
    samples = None if calibration is None else {graph.inputs[0]: calibration}
    return compile_network(graph, config, samples), calibration


def _lines(report: dict) -> list[str]:
    source = "RTL" if report["cycles"] == "measured" else "estimated"
    lines = [f"{report['model']}: batch {report['batch']} on {report['config']}, accelerator "
             f"at {report['clock_mhz']:g} MHz ({report['clock']}); {source} cycles; outputs "
             f"{'bit-exact with' if report['bit_exact'] else 'DIFFER from'} the reference",
             f"{'node':<28} {'op':<16} {'place':<6} {'cycles':>11} {'accel ms':>9} "
             f"{'cpu ms':>9}"]
    for row in report["nodes"]:
        cycles = "-" if row["cycles"] is None else f"{row['cycles']:,}"
        accel = "-" if row["accel_ms"] is None else f"{row['accel_ms']:.3f}"
        lines.append(f"{printable(row['name'])[:28]:<28} {row['op']:<16} {row['place']:<6} "
                     f"{cycles:>11} {accel:>9} {row['cpu_ms']:>9.3f}")
    kinds = sorted({kind for bar in report["breakdown_ms"].values() for kind in bar})
    lines += ["", f"{'ms per kind of work':<28} " + " ".join(f"{bar:>18}"
                                                             for bar in report["breakdown_ms"])]
    for kind in kinds:
        lines.append(f"{kind:<28} " + " ".join(f"{bar.get(kind, 0.0):>18.3f}"
                                               for bar in report["breakdown_ms"].values()))
    lines.append(f"{'total':<28} " + " ".join(f"{total:>18.3f}"
                                              for total in report["total_ms"].values()))
    return lines
