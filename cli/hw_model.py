"""``vdla hw model``: build the cycle-accurate Verilator model of a config into a directory.

The model is the shared library `sim.rtl` drives through ctypes (C ABI in
``sim/rtl/harness.cpp``: ``vdla_create``, ``vdla_dram_write``, ``vdla_run``,
``vdla_read_counters``, ...). Builds come from the RTL build cache, so asking
again for the same config is instant.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import click

from vdla.cli.options import Command, config_option

__all__ = ["model"]

C_ABI = ("vdla_create", "vdla_destroy", "vdla_dram_resize", "vdla_dram_write", "vdla_dram_read",
         "vdla_start", "vdla_step", "vdla_run", "vdla_cycles", "vdla_done", "vdla_error",
         "vdla_read_counters", "vdla_read_status", "vdla_read_memory_stats",
         "vdla_set_backpressure", "vdla_trace_open", "vdla_trace_close",
         "vdla_num_activity", "vdla_activity_name", "vdla_activity_enable", "vdla_activity_read",
         "vdla_activity_bin_cycles")


@click.command("model", cls=Command, short_help="Build the Verilator model of the accelerator.")
@config_option
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory to write the model into (created if missing).")
@click.option("--trace", is_flag=True, help="Build the variant that can write FST waveforms.")
@click.option("--portable", is_flag=True,
              help="Build without -march=native, so the library runs on other CPUs (~2x slower).")
@click.option("--force", is_flag=True, help="Rebuild even if the cache has the model.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def model(config, output, trace, portable, force, as_json):
    """Build the Verilator model of the accelerator (shared library + Verilog + manifest)."""
    from vdla.sim.rtl.build import DEFAULT_OPT_FAST, MANIFEST_NAME, PORTABLE_OPT_FAST, build_model

    started = time.perf_counter()

    def progress(line: str) -> None:
        click.echo(f"{line} (about 20-60 s the first time)...", err=True)

    opt_fast = PORTABLE_OPT_FAST if portable else DEFAULT_OPT_FAST
    build = build_model(config, trace=trace, force=force, progress=progress, opt_fast=opt_fast)
    output.mkdir(parents=True, exist_ok=True)
    library = output / build.library.name
    verilog = output / build.verilog.name
    shutil.copy2(build.library, library)
    shutil.copy2(build.verilog, verilog)
    built = build.manifest
    manifest = {
        "config": config.to_dict(),
        "config_hash": config.hash,
        "model_key": build.key,
        "trace": trace,
        "library": library.name,
        "verilog": verilog.name,
        "verilator": built["verilator"],
        "opt_fast": opt_fast,
        "portable": "native" not in opt_fast,
        "dram_bus_bits": config.dram_bus_bits,
        "dram_read_latency": config.dram_read_latency,
        "counters": built["counters"],
        "status": built["status"],
        "c_abi": list(C_ABI),
        "build_seconds": built["build_seconds"],
        "cache": str(build.directory),
    }
    (output / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    report = {"output": str(output), "library": str(library), "verilog": str(verilog),
              "manifest": str(output / MANIFEST_NAME), "config": config.name,
              "config_hash": config.hash, "cached": build.cached, "trace": trace,
              "seconds": round(time.perf_counter() - started, 2)}
    if as_json:
        click.echo(json.dumps(report))
    else:
        how = "from the cache" if build.cached else f"built in {built['build_seconds']} s"
        click.echo(f"model of config {config.name} ({config.batch}x{config.block_in}x"
                   f"{config.block_out}, {config.dram_bus_bits}-bit bus, read latency "
                   f"{config.dram_read_latency}) {how}: {library}, {verilog.name}, "
                   f"{MANIFEST_NAME} in {output}")


command = model
