"""``vdla isa``: print the instruction-set reference generated from hw/isa.py."""

from __future__ import annotations

from pathlib import Path

import click

from vdla.cli.options import Command, config_option, write_output
from vdla.hw.isa import reference_markdown


@click.command("isa", cls=Command, short_help="Print the ISA reference (docs/isa.md) for a config.")
@config_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the reference to FILE instead of printing it.")
def command(config, output):
    """Print the ISA reference (the source of docs/isa.md) for a configuration."""
    text = reference_markdown(config)
    if output:
        write_output(output, text, "--output")
        click.echo(f"wrote {output}")
    else:
        click.echo(text, nl=False)
