"""``vdla quantize MODEL.onnx --calibration x.npy -o MODEL.q.onnx``: vdla's int8 as a QDQ model.

Post-training quantisation with power-of-two scales (`vdla.graph.quantize`),
written as a QDQ ONNX model (`vdla.graph.export.to_qdq`): onnxruntime runs it
with exactly vdla's scales, and ``vdla compile`` reads it back without
calibration.
"""

from __future__ import annotations

import json

import click

from vdla.cli.net import per_channel_option
from vdla.cli.options import Command, fail, write_output


@click.command("quantize", cls=Command, short_help="Quantise a float ONNX model to int8 and write it as QDQ.")
@click.argument("model_path", metavar="MODEL.onnx")
@click.option("--calibration", "calibration_path", required=True, metavar="FILE.npy",
              help="Sample inputs (count, ...) to calibrate the scales on.")
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="The batch of the written model (default: the model's, 1 where symbolic).")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="The QDQ model to write (.onnx).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--fuse-residuals/--no-fuse-residuals", default=True, show_default=True,
              help="Fuse each residual add into the conv producing an operand (one rounding; "
                   "the file then runs, in vdla, only where a conv can add a residual: the "
                   "cpu target or a square GEMM block).")
@per_channel_option
def command(model_path, calibration_path, batch, output, as_json, per_channel, fuse_residuals):
    """Quantise a float ONNX model to int8 (power-of-two scales) and write it as QDQ."""
    from vdla.cli.arrays import read_npy, writable
    from vdla.frontend.onnx import load
    from vdla.graph.export import to_qdq
    from vdla.graph.network import quantize_graph
    writable(output, "-o")
    graph = load(model_path, batch=batch)
    if len(graph.inputs) != 1:
        fail(f"--calibration: the model has {len(graph.inputs)} inputs; one .npy "
             "calibrates a single-input model")
    samples = read_npy(calibration_path, "--calibration")
    integer = quantize_graph(graph, {graph.inputs[0]: samples}, per_channel, fuse_residuals)
    write_output(output, to_qdq(integer).SerializeToString(), "-o")
    layers = {node.name: node.attrs["shift"] for node in integer.nodes if "shift" in node.attrs}
    if as_json:
        click.echo(json.dumps({"output": output, "shifts": layers}))
        return
    click.echo(f"{output}: int8 QDQ, power-of-two scales; requantisation shifts: "
               + ", ".join(f"{name} {shift}" for name, shift in layers.items()))
