"""``vdla hw``: hardware generation commands (``verilog``, ``model``, ``synth``, ``bitstream``)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from vdla.cli.options import Group, check_identifier, config_option, write_output


@click.group(cls=Group)
def hw():
    """Generate and inspect the accelerator RTL."""


@hw.command("verilog")
@config_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the Verilog here (default: standard output).")
@click.option("--top", default=None, help="Name of the top Verilog module.",
              callback=lambda ctx, param, value: check_identifier(value, "--top"))
@click.option("--json", "as_json", is_flag=True, help="Report as JSON (with -o).")
def verilog_command(config, output, top, as_json):
    """Generate the accelerator's Verilog for a config."""
    from vdla.hw.generate import TOP_NAME, verilog
    started = time.perf_counter()
    if output is None or str(output) == "-":
        sys.stdout.write(verilog(config, name=top or TOP_NAME))
        return
    text = verilog(config, name=top or TOP_NAME)
    write_output(output, text, "--output")
    report = {"config": config.name, "hash": config.hash, "output": str(output),
              "lines": text.count("\n"), "bytes": len(text),
              "seconds": round(time.perf_counter() - started, 2)}
    if as_json:
        click.echo(json.dumps(report))
    else:
        click.echo(f"wrote {output}: {report['lines']} lines, config {config.name} "
                   f"({config.batch}x{config.block_in}x{config.block_out}, "
                   f"{config.dram_bus_bits}-bit bus) in {report['seconds']} s", err=True)


hw.add_command(__import__("vdla.cli.hw_model", fromlist=["model"]).model)  # vdla hw model
hw.add_command(__import__("vdla.cli.hw_synth", fromlist=["synth"]).synth)  # vdla hw synth
hw.add_command(__import__("vdla.cli.hw_synth", fromlist=["bitstream"]).bitstream)  # vdla hw bitstream
hw.add_command(__import__("vdla.cli.hw_synth", fromlist=["board_header"]).board_header)

command = hw
