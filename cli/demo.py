"""``vdla demo``: the first thing to run: one ResNet-18 layer, end to end.

Compiles a ResNet-18 convolution (C2 by default) for an accelerator config,
runs it with random inputs on a simulator (the cycle-accurate rtl tier by
default; its first run builds the Verilator model), checks the output against
numpy and prints a short report: the schedule, instructions per module,
cycles against the ideal, GEMM utilization, what each module did, DRAM
traffic, and PASS or FAIL. Exits non-zero when the output is wrong.
"""

from __future__ import annotations

import sys

import click

from vdla.cli.bench import describe_config
from vdla.compiler.workloads import RESNET18
from vdla.cli.options import Command, check_sim, config_option
from vdla.bench.layer_run import run_layer
from vdla.bench.records import LayerResult
from vdla.bench.suite import prepare_backend, select_workloads


def _say(text: str) -> None:
    click.echo(text, err=True)


def _schedule_text(schedule: dict | None) -> str:
    if not schedule:
        return "-"
    tiles = ", ".join(f"{knob}={schedule[knob]}" for knob in
                      ("tile_b", "tile_h", "tile_w", "tile_k", "tile_c") if knob in schedule)
    threads = schedule.get("virtual_threads")
    hiding = "on" if schedule.get("latency_hiding", True) else "off"
    return (f"{tiles}; {threads} virtual thread(s), loop order {schedule.get('loop_order')}, "
            f"latency hiding {hiding}")


def _bytes(count: int) -> str:
    return f"{count:,} B ({count / (1 << 20):.2f} MiB)"


def report_lines(layer: LayerResult, sim: str) -> list[str]:
    """The demo's report of one `LayerResult`."""
    lines = [f"schedule:     {_schedule_text(layer.schedule)}"]
    if layer.instructions is not None:
        per_module = ", ".join(f"{module} {count:,}"
                               for module, count in layer.instructions_per_module.items())
        lines.append(f"instructions: {layer.instructions:,} ({per_module}); "
                     f"{layer.uops:,} micro-ops; compiled in {layer.compile_seconds:.2f} s")
    if layer.simulation_seconds is not None:
        lines.append(f"simulated:    on {sim} in {layer.simulation_seconds:.2f} s")
    if layer.cycles is not None:
        lines += [
            f"cycles:       {layer.cycles:,} (ideal {layer.ideal_cycles:,} = {layer.macs:,} MACs "
            f"at full GEMM rate)",
            f"GEMM utilization: {100 * layer.gemm_utilization:.1f}%",
        ]
        if layer.modules:
            lines.append("module        busy   (waiting on memory)   waiting on a token")
            for module, figures in layer.modules.items():
                share = {kind: 100 * figures[kind] / layer.cycles for kind in figures}
                lines.append(f"  {module:<8} {share['busy']:6.1f}%   ({share['wait_mem']:5.1f}%)"
                             f"              {share['wait_token']:5.1f}%")
        if layer.dram_bytes_read is not None:
            lines.append(f"DRAM traffic: {_bytes(layer.dram_bytes_read)} read, "
                         f"{_bytes(layer.dram_bytes_written)} written")
    elif layer.error is None:
        lines.append(f"cycles:       n/a ({sim} is untimed; use --sim rtl for cycles); ideal "
                     f"{layer.ideal_cycles:,}")
    if layer.error:
        lines.append(f"FAIL: {layer.error}")
    elif layer.correct:
        lines.append("check:        PASS (output equals the numpy reference)")
    else:
        lines.append(f"check:        FAIL ({layer.mismatches:,} output elements differ from numpy)")
    return lines


@click.command("demo", cls=Command, short_help="Compile a ResNet-18 layer, run it, check it, report cycles.")
@click.option("--layer", default="C2", show_default=True, metavar="NAME",
              help=f"ResNet-18 layer ({', '.join(w.name for w in RESNET18)}).")
@click.option("--sim", default="rtl", show_default=True, metavar="NAME",
              help="Simulator: rtl (cycle-accurate) or fsim (functional, untimed).")
@config_option
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the inputs.")
def command(layer, sim, config, seed):
    """Compile a ResNet-18 layer, run it, check it against numpy, report cycles."""
    (workload,) = select_workloads([layer])
    check_sim(sim)
    click.echo(f"vdla demo: ResNet-18 {workload.name}: {workload.op.describe()}")
    click.echo(f"config:       {describe_config(config)}")
    options = prepare_backend(
        config, sim, lambda text: _say(f"{text}: the first run for this hardware takes "
                                       "about a minute, later runs reuse it..."))
    _say(f"compiling {workload.name} and running it on {sim}...")
    result = run_layer(workload, config, sim, seed=seed, backend_options=options)
    click.echo("\n".join(report_lines(result, sim)))
    if not result.correct:
        sys.exit(1)
