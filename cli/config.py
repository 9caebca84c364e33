"""``vdla config``: the accelerator configs a ``--config`` option accepts.

``vdla config list`` names the presets with their shape; ``vdla config show
PRESET|FILE.json`` prints a config as the complete JSON file ``--config``
reads (every field of `hw.config.HwConfig`), so that ``vdla config show
default > mine.json``, an edit and ``--config mine.json`` make a new
accelerator. A file may leave fields out: they take the values of
`HwConfig`'s defaults (the ``default`` preset's shape). ``show`` therefore
also checks a file and prints what it resolves to; ``--derived`` adds the
widths and depths derived from it.
"""

from __future__ import annotations

import json

import click

from vdla.cli.bench import describe_config
from vdla.cli.options import Group
from vdla.hw.config import ELEMENT_KINDS, PRESETS, HwConfig, load_config


def derived(config: HwConfig) -> dict:
    """The figures `HwConfig` derives from a config: MACs per cycle, SRAM depths, widths."""
    return {
        "hash": config.hash,
        "macs_per_cycle": config.macs_per_cycle,
        "dram_bus_bytes": config.dram_bus_bytes,
        "dram_alignment": config.dram_alignment,
        "out_buffer_bytes": config.out_buffer_bytes,
        "sram_depth": {kind: config.depth(kind) for kind in ELEMENT_KINDS},
        "element_bytes": {kind: config.element_bytes(kind) for kind in ELEMENT_KINDS},
        "uop_index_bits": config.uop_index_bits,
    }


@click.group("config", cls=Group)
def command():
    """Show the accelerator configs that --config accepts."""


@command.command("list")
def list_presets():
    """List the preset configs."""
    width = max(map(len, PRESETS))
    for name, config in PRESETS.items():
        click.echo(f"{name:<{width}} {describe_config(config)}")
    click.echo("\n'vdla config show PRESET' prints one as JSON; a JSON file of that form (fields "
               "left out take default's values) works wherever --config does.")


@command.command("show", short_help="Print a config (a preset, or a JSON file, completed).")
@click.argument("spec", metavar="PRESET|FILE.json", default="default")
@click.option("--derived", "with_derived", is_flag=True,
              help="Add the figures derived from it (MACs per cycle, SRAM depths, hash).")
def show(spec, with_derived):
    """Print a config (a preset, or a JSON file checked and completed) as JSON."""
    config = load_config(spec)
    data = config.to_dict()
    if with_derived:
        data["derived"] = derived(config)
    click.echo(json.dumps(data, indent=2))
