"""Networks on the command line: ``vdla compile MODEL.onnx``, and ``run``/``inspect`` of the result.

``vdla compile model.onnx [--calibration x.npy] [--config ...] -o net.vdla``
imports, quantises, places and compiles a whole model into one network file
(`vdla.graph.network_file`); ``vdla run net.vdla`` recognises such a file by
its magic and comes here (`run_network`); ``vdla inspect net.vdla`` shows it
(`cli.inspect.inspect_network`).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import click

from vdla.cli.clock import clock_option
from vdla.cli.options import Command, Group, config_option, fail
from vdla.files import printable

__all__ = ["ModelGroup", "compile_model", "run_network",
           "per_channel_option"]

per_channel_option = click.option(
    "--per-channel", "per_channel", is_flag=True,
    help="Calibrate weights with one power-of-two scale per output channel (layers whose "
         "channels differ requantise with per-channel multipliers; docs/isa.md).")


class ModelGroup(Group):
    """A click group where ``GROUP FILE.onnx ...`` means ``GROUP model FILE.onnx ...``."""

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands:
            # A PyTorch checkpoint goes to the model command too, whose import refuses it in
            # one line that says how to export instead (rather than "no such command").
            from vdla.frontend.onnx import CHECKPOINT_SUFFIXES
            if args[0].lower().endswith((".onnx", *CHECKPOINT_SUFFIXES)):
                return "model", self.commands["model"], args
        return super().resolve_command(ctx, args)


def _names(value: str | None) -> list[str]:
    return [name for name in (value or "").split(",") if name]


@click.command("model", cls=Command, short_help="Compile a whole ONNX model (float or QDQ) to a network.")
@click.argument("model_path", metavar="MODEL.onnx")
@click.option("--calibration", "calibration_path", default=None, metavar="FILE.npy",
              help="Sample inputs (count, ...) for post-training quantisation (not needed for "
                   "a QDQ model, whose scales are used).")
@click.option("--calibration-method", "calibration_method", default="mse",
              show_default=True,
              type=click.Choice(["mse", "minmax", "percentile", "entropy"]),
              help="How --calibration sets activation ranges: vdla's least squared error, "
                   "or onnxruntime's MinMax, Percentile (99.999) or Entropy (KL divergence); "
                   "vdla.graph.calibration.")
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="The batch the network runs (default: the model's, 1 where symbolic).")
@click.option("--on-cpu", "on_cpu", default=None, metavar="NODE,...",
              help="Layers to run as generated C instead of on the accelerator.")
@click.option("--target", type=click.Choice(["accel", "cpu"]), default="accel",
              show_default=True, help="Where layers run by default.")
@click.option("--place-by-cost", "by_cost", is_flag=True,
              help="Also move to the cpu each layer whose generated C, timed on this machine, "
                   "beats the accelerator's estimate at the clock (--clock-mhz or the known "
                   "Fmax).")
@clock_option
@click.option("--cpu-fallback/--no-cpu-fallback", "fallback", default=True, show_default=True,
              help="Run a layer the accelerator refuses as generated C (the summary names "
                   "each, `vdla inspect` says why); --no-cpu-fallback stops at it instead.")
@click.option("--fuse-residuals/--no-fuse-residuals", default=True, show_default=True,
              help="Fuse each residual add into the conv producing an operand, where its "
                   "target can add it (the cpu, or a square GEMM block); else on the host.")
@click.option("--tuned", "tuned_path", default=None, metavar="LOG.jsonl",
              help="Give each accelerator layer the best schedule a `vdla tune` log holds for "
                   "it on this config (others keep the default).")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="The network file to write (.vdla).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@per_channel_option
@config_option
def compile_model(model_path, calibration_path, calibration_method, batch, on_cpu, target, by_cost, clock_mhz,
                  fallback, fuse_residuals, tuned_path, output, as_json, per_channel, config):
    """Compile a whole ONNX model (float with --calibration, or QDQ) into a network file."""
    from vdla.cli.arrays import read_npy, writable
    from vdla.frontend.onnx import load as load_model
    from vdla.graph.network import compile_network
    from vdla.graph.network_file import save
    writable(output, "-o")
    schedules = _tuned(tuned_path, config, target) if tuned_path is not None else None
    calibration = None
    graph = load_model(model_path, batch=batch)
    if calibration_path is not None:
        samples = read_npy(calibration_path, "--calibration")
        if len(graph.inputs) != 1:
            fail(f"--calibration: the model has {len(graph.inputs)} inputs; one .npy "
                 "calibrates a single-input model")
        calibration = {graph.inputs[0]: samples}
    network = compile_network(graph, config, calibration, on_cpu=_names(on_cpu),
                              target=target, by_cost=by_cost, clock_mhz=clock_mhz,
                              per_channel=per_channel, fuse_residuals=fuse_residuals,
                              fallback=fallback, schedules=schedules,
                              calibration_method=calibration_method)
    save(network, output)
    rows = network.rows()
    summary = {"output": output, "nodes": len(rows), "inputs": network.input_specs_json(),
               "placement": {place: sum(r["place"] == place for r in rows)
                             for place in ("accel", "cpu", "host")},
               "compile_seconds": round(network.compile_seconds, 3),
               "bytes": Path(output).stat().st_size, "changes": network.changes}
    if schedules is not None:
        summary["tuned"] = {"log": tuned_path, "layers": len(schedules.applied),
                            "accel_layers": len(network.programs)}
    if as_json:
        click.echo(json.dumps(summary))
        return
    counts = ", ".join(f"{n} {place}" for place, n in summary["placement"].items() if n)
    click.echo(f"{output}: {summary['nodes']} nodes ({counts}), {summary['bytes']:,} bytes, "
               f"compiled in {summary['compile_seconds']:.2f} s")
    for name, spec in summary["inputs"].items():
        click.echo(f"input {name}: {spec}")
    if schedules is not None:
        click.echo(f"tuned: {summary['tuned']['layers']} of {len(network.programs)} accelerator "
                   f"layer(s) take their best schedule from {printable(tuned_path)}")
    for name, change in network.changes.items():   # names come from the model: shown only
        click.echo(f"{printable(name)}: {printable(change)}")
    for name, cost in network.metadata.get("placement_costs", {}).items():
        click.echo(f"{name}: accelerator {cost['accel_ms']:.3f} ms (estimated), cpu "
                   f"{cost['cpu_ms']:.3f} ms (measured) -> {network.placement[name]}")


def _tuned(path: str, config, target: str):
    """The schedule chooser of a tuning log (`tune.network.tuned_schedules`), its warnings
    (a torn last line) printed as one line each."""
    import warnings
    from vdla.tune.log import read_log
    from vdla.tune.network import tuned_schedules
    if target != "accel":
        fail(f"--tuned with --target {target}: a network file keeps no cpu schedules; "
             "--tuned applies accelerator tuning logs (vdla tune MODEL.onnx)")
    if not Path(path).is_file():
        fail(f"--tuned {path}: no such file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = read_log(path)
    for warning in caught:
        click.echo(f"warning: {warning.message}", err=True)
    return tuned_schedules(records, config)


def _network_runners(request, network) -> list[tuple[str, str | None]]:
    """The runners a run of ``network`` uses: the simulator of its accelerator layers (none
    with --target cpu) and the cpu target, where any layer runs as C."""
    target = request.target or "accel"
    if target not in ("accel", "cpu"):
        fail(f"--target {target}: a network runs on the accelerator (--sim ...) or with "
             "--target cpu")
    places = set(network.placement.values())
    runners = [("accel", request.simulator)] if target == "accel" and "accel" in places else []
    if request.sim is not None and not runners:
        fail(f"--sim {request.sim} does not apply to {request.program_file}: "
             + ("--target cpu runs every layer as C" if target == "cpu"
                else "the network runs no layer on the accelerator"))
    return runners + ([("cpu", None)] if target == "cpu" or "cpu" in places else [])


# Options that record one program's run into one file: a network runs many.
_ONE_RUN = ("--trace", "--timeline", "--timeline-window")


def run_network(request) -> None:
    """``vdla run`` of a network file (``request``: a `cli.run.Request`)."""
    from vdla.cli.arrays import output_paths, read_inputs, write_outputs
    from vdla.cli.backend_options import options_for, progress_options
    from vdla.graph.network_file import load
    network = load(request.program_file, request.config)
    for flag in _ONE_RUN:
        if request.option(flag) is not None:
            fail(f"{flag} records the run of one program; {request.program_file} is a "
                 f"network of {len(network.graph.nodes)} nodes")
    runners = _network_runners(request, network)
    options = options_for(request.backend, runners)
    accel = next((options[r] | progress_options(r) for r in runners if r[0] == "accel"), {})
    host = options.get(("cpu", None), {})   # threads=, for the layers that run as C
    # run's --output parsing, over the network's outputs.
    outputs_view = SimpleNamespace(outputs=[SimpleNamespace(name=name)
                                            for name in network.graph.outputs])
    paths = output_paths(request.outputs, outputs_view)
    specs = {name: SimpleNamespace(dtype=dtype, shape=shape)
             for name, (dtype, shape) in network.input_specs().items()}
    arrays = read_inputs(request.inputs, specs, "network", any_float=True)
    result = network.run(arrays, request.simulator, target=request.target or "accel",
                         **host, **accel)
    written = write_outputs(paths, result.outputs)
    report = _network_report(request, network, result, written)
    click.echo(json.dumps(report) if request.as_json else "\n".join(_network_lines(report)))


def _network_report(request, network, result, written: dict[str, str]) -> dict:
    from vdla.cli.clock import time_report
    return {"sim": "cpu" if request.target == "cpu" else request.simulator,
            "layers": result.layers, "accel_cycles": result.accel_cycles,
            "accel_time": time_report(network.config, result.accel_cycles, request.clock_mhz),
            "repacks": result.repacks, "copied_bytes": result.copied_bytes,
            "build_seconds": round(result.build_seconds, 6),
            "seconds": round(sum(row["seconds"] for row in result.layers), 6),
            "outputs": {name: {"shape": list(array.shape), "dtype": array.dtype.name,
                               "file": written.get(name)}
                        for name, array in result.outputs.items()}}


def _network_lines(report: dict) -> list[str]:
    from vdla.cli.clock import time_text
    from vdla.files import printable
    lines = [f"{'node':<28} {'op':<18} {'place':<6} {'cycles':>10} {'ms':>9}"]
    for row in report["layers"]:
        cycles = "-" if row["cycles"] is None else f"{row['cycles']:,}"
        # Names come from the file (and the model before it): shown, never obeyed.
        lines.append(f"{printable(row['name'])[:28]:<28} {row['op']:<18} {row['place']:<6} "
                     f"{cycles:>10} {row['seconds'] * 1e3:>9.3f}")
    lines.append(f"built before the run (not in ms): {report['build_seconds'] * 1e3:.3f} ms")
    if report["accel_cycles"] is not None:
        lines.append(f"accelerator cycles: {report['accel_cycles']:,}"
                     + (f" ({time_text(report['accel_time'])})" if report["accel_time"]
                        else ""))
    lines.append(f"host repacks (logical <-> blocked layout): {report['repacks']}")
    lines.append(f"bytes the host copied into DRAM: {report['copied_bytes']:,}")
    for name, output in report["outputs"].items():
        where = f" -> {output['file']}" if output["file"] is not None else ""
        lines.append(f"output {printable(name)}: {output['dtype']} {tuple(output['shape'])}"
                     f"{where}")
    return lines

