"""``vdla bench``: run a network's layers on the accelerator and report cycles.

``vdla bench resnet18`` compiles ResNet-18's C2–C11 with the default schedule,
runs each on a simulator (rtl by default: cycle-accurate) with seeded random
inputs, checks each against numpy and prints a per-layer table and the
network total next to VTA's. ``--json FILE`` writes the full report,
``--ablation`` adds the same layers without latency hiding, ``--roofline``
draws the layers on the accelerator's roofline, ``--check-baseline`` compares
cycles with the committed baseline and ``--update-baseline`` rewrites it.

The exit status is non-zero when a layer's output is wrong or a layer
regressed against the baseline (after the whole report is printed). Bad input
is one line on stderr.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from vdla.bench import suite
from vdla.bench.baseline import (baseline_path, check_baseline, check_baseline_target,
                                 load_baseline, write_baseline)
from vdla.bench.executor import make_executor
from vdla.bench.records import VTA_RESNET18_CYCLES, BenchResult, LayerResult
from vdla.bench.report import bench_report
from vdla.bench.suite import BenchError
from vdla.cli.clock import clock_option, time_report, time_text
from vdla.cli.options import Command, check_sim, config_option, fail, write_output
from vdla.hw.config import HwConfig
from vdla.hw.isa import MODULES

UNTIMED_SIMS = ("fsim",)


# --------------------------------------------------------------------------- text
def _bytes(count: int | None) -> str:
    if count is None:
        return "-"
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} B"


def _int(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def describe_config(config: HwConfig) -> str:
    """One line: the accelerator's shape."""
    return (f"{config.name} ({config.batch}x{config.block_in}x{config.block_out} GEMM, "
            f"{config.macs_per_cycle} MACs/cycle, {config.dram_bus_bits}-bit DRAM port, "
            f"{config.dram_read_latency}-cycle read latency)")


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(row[i])) for row in [headers] + rows) for i in range(len(headers))]

    def line(cells):
        return "  ".join(str(cell).rjust(width) if i in right else str(cell).ljust(width)
                         for i, (cell, width) in enumerate(zip(cells, widths))).rstrip()
    return [line(headers), line(["-" * width for width in widths])] + [line(r) for r in rows]


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"


def _failure(layer: LayerResult) -> str:
    """The report line of a layer that failed or computed a wrong output."""
    reason = layer.error or f"{layer.mismatches:,} output element(s) differ from numpy"
    return f"FAIL {layer.name} (latency hiding {_on_off(layer.latency_hiding)}): {reason}"


def _check(layer: LayerResult) -> str:
    if layer.error:
        return "ERROR"
    return "ok" if layer.correct else "FAIL"


def layer_table(result: BenchResult) -> list[str]:
    """The per-layer table of a run."""
    headers = ["layer", "uses", "cycles", "ideal", "GEMM util", "DRAM read", "DRAM written",
               "insns", "compile s", "sim s", "numpy"]
    rows = [[layer.name, layer.uses, _int(layer.cycles), _int(layer.ideal_cycles),
             _percent(layer.gemm_utilization), _bytes(layer.dram_bytes_read),
             _bytes(layer.dram_bytes_written), _int(layer.instructions),
             _seconds(layer.compile_seconds), _seconds(layer.simulation_seconds), _check(layer)]
            for layer in result.layers]
    return _table(headers, rows, right=set(range(1, 10)))


def module_table(result: BenchResult) -> list[str]:
    """Each module's share of the layer's cycles: busy (waiting on memory) / token waits.

    The RTL counts memory waits inside busy cycles (a module waits on DRAM
    while it executes a load or store), so busy + token waits + idle = 100 %.
    """
    if not any(layer.modules for layer in result.layers):
        return []
    headers = ["layer"] + [f"{module} busy (mem) / token" for module in MODULES]
    rows = []
    for layer in result.layers:
        row = [layer.name]
        for module in MODULES:
            figures = (layer.modules or {}).get(module)
            if not figures or not layer.cycles:
                row.append("-")
                continue
            busy, mem, token = (100 * figures[kind] / layer.cycles
                                for kind in ("busy", "wait_mem", "wait_token"))
            row.append(f"{busy:5.1f}% ({mem:4.1f}%) / {token:4.1f}%")
        rows.append(row)
    return ["", "module cycles as a share of each layer's: busy (of which waiting on memory) / "
            "waiting on a token; the rest is idle"] + _table(headers, rows, right=set())


def total_lines(result: BenchResult) -> list[str]:
    """The network figures: total vs ideal vs VTA."""
    names = ", ".join(layer.name for layer in result.layers)
    scope = (f"{result.benchmark} C2–C11" if result.complete and result.benchmark == "resnet18"
             else f"{names} only, not the whole network")
    lines = [""]
    total = result.total_cycles
    if total is None:
        lines.append(f"total ({scope}): no cycles"
                     + (" (untimed simulator: correctness only)" if not any(
                         layer.error for layer in result.layers) else " (a layer failed)"))
    else:
        lines.append(f"total ({scope}, each layer x its uses): {total:,} cycles; ideal "
                     f"{result.ideal_cycles:,} ({_percent(result.gemm_utilization)} GEMM "
                     f"utilization); geomean layer utilization "
                     f"{_percent(result.geomean_utilization)}")
        vta = result.vta_cycles
        if vta is not None:
            relation = "fewer" if total <= vta else "more"
            lines.append(f"VTA: {vta / 1e6:.2f} M cycles; this design: {total / 1e6:.2f} M "
                         f"({abs(1 - total / vta):.1%} {relation}, {vta / total:.2f}x VTA's "
                         "speed)")
        elif result.complete and result.benchmark == "resnet18":
            lines.append(f"(VTA's {VTA_RESNET18_CYCLES / 1e6:.2f} M cycles are for a "
                         "1x16x16 GEMM; not compared with this shape)")
    wrong = [layer for layer in result.layers if not layer.correct]
    if not wrong:
        lines.append(f"all {len(result.layers)} layer(s) match numpy "
                     f"({result.sim}, latency hiding {_on_off(result.latency_hiding)})")
    return lines + [_failure(layer) for layer in wrong]


def ablation_lines(report: dict, benchmark: str) -> list[str]:
    """With and without latency hiding, side by side."""
    headers = ["layer", "uses", "cycles with", "cycles without", "speed-up", "util with",
               "util without", "numpy"]
    rows = [[row["name"], row["uses"], _int(row["cycles"]),
             _int(row["cycles_without_latency_hiding"]),
             "-" if row["speedup"] is None else f"{row['speedup']:.2f}x",
             _percent(row["gemm_utilization"]),
             _percent(row["gemm_utilization_without_latency_hiding"]),
             "ok" if row["correct"] else "FAIL"] for row in report["layers"]]
    total_on = report[f"{benchmark}_total_cycles"]
    total_off = report[f"{benchmark}_total_cycles_without_latency_hiding"]
    rows.append(["total", "", _int(total_on), _int(total_off),
                 "-" if report["speedup"] is None else f"{report['speedup']:.2f}x", "", "", ""])
    return ["", "latency hiding ablation (speed-up = cycles without / cycles with):"] + \
        _table(headers, rows, right=set(range(1, 7)))


def report_lines(result: BenchResult, report: dict) -> list[str]:
    """The whole human report of a run (and its ablation, when ``report`` has one)."""
    lines = [f"{result.benchmark} on {result.sim}, config {describe_config(result.config)}, "
             f"latency hiding {_on_off(result.latency_hiding)}, seed {result.seed}, "
             f"{result.seconds:.1f} s", ""]
    lines += layer_table(result) + module_table(result) + total_lines(result)
    if "ablation" in report:
        lines += ablation_lines(report["ablation"], result.benchmark)
        without = [LayerResult.from_dict(layer)
                   for layer in report["ablation"]["without_latency_hiding"]]
        lines += [_failure(layer) for layer in without if not layer.correct]
    return lines


# --------------------------------------------------------------------------- command
def _progress_bar(total: int, description: str):
    from tqdm import tqdm
    tqdm.monitor_interval = 0  # no monitor thread: workers may be forked
    return tqdm(total=total, desc=description, unit="layer", file=sys.stderr, leave=False,
                dynamic_ncols=True)


@click.command("bench", cls=Command, short_help="Run NETWORK's layers, check them and report cycles.")
@click.argument("benchmark", metavar="NETWORK")
@click.option("--sim", default="rtl", show_default=True, metavar="NAME",
              help="Simulator: rtl (cycle-accurate) or fsim (functional: correctness only).")
@config_option
@click.option("--layers", default=None, metavar="C2,C5",
              help="Run only these layers (comma-separated).")
@click.option("--json", "json_path", default=None, metavar="FILE",
              help="Write the report as JSON to FILE ('-': stdout, instead of the text).")
@click.option("--no-latency-hiding", is_flag=True,
              help="Compile without latency hiding (one thread, serialising tokens).")
@click.option("--ablation", is_flag=True,
              help="Run with and without latency hiding and compare them.")
@click.option("--roofline", "roofline_path", default=None, type=click.Path(dir_okay=False),
              help="Draw the layers on the roofline into this PNG.")
@click.option("--check-baseline", "check_path", is_flag=False, flag_value="", default=None,
              metavar="[FILE]", help="Fail if a layer's cycles grew by more than 1% over the "
              "baseline (default: bench/baselines/<config name>.json).")
@click.option("--update-baseline", "update_path", is_flag=False, flag_value="", default=None,
              metavar="[FILE]", help="Record this run's cycles as the baseline (default file "
              "as for --check-baseline).")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Layers simulated at once (worker processes).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Run the layers on this Dask scheduler instead (needs 'distributed').")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the random inputs.")
@clock_option
def command(benchmark, sim, config, layers, json_path, no_latency_hiding, ablation,
            roofline_path, check_path, update_path, jobs, scheduler, seed, clock_mhz):
    """Run NETWORK's layers (resnet18: C2–C11), check them and report cycles."""
    request = _validate(benchmark, sim, config, layers, json_path, no_latency_hiding, ablation,
                        roofline_path, check_path, update_path, jobs, scheduler, seed, clock_mhz)
    if not _report(request, _run(request)):
        sys.exit(1)


@dataclasses.dataclass(frozen=True)
class _Request:
    """What the options ask for, checked: the run, its outputs and its baseline."""

    benchmark: str
    workloads: list
    config: HwConfig
    sim: str
    variants: tuple[bool, ...]
    seed: int
    jobs: int
    scheduler: str | None
    json_path: str | None
    roofline_path: str | None
    baseline: dict | None           # the baseline to check against
    baseline_file: Path | None      # checked or updated
    update_baseline: bool
    clock_mhz: float | None

    @property
    def ablation(self) -> bool:
        return len(self.variants) == 2

    @property
    def to_stdout(self) -> bool:
        """The JSON report replaces the text on stdout."""
        return self.json_path == "-"


def _validate(benchmark, sim, config, layers, json_path, no_latency_hiding, ablation,
              roofline_path, check_path, update_path, jobs, scheduler, seed,
              clock_mhz) -> _Request:
    """Check the options together (one-line errors) and load the baseline to check, before
    anything runs."""
    workloads = suite.select_workloads(layers, benchmark)
    check_sim(sim)
    _check_combination(sim, no_latency_hiding, ablation, roofline_path, check_path, update_path,
                       jobs, scheduler)
    baseline, baseline_file = _baseline(config, benchmark, check_path, update_path)
    for option, value in (("--roofline", roofline_path), ("--json", json_path),
                          ("--update-baseline", update_path and baseline_file)):
        if value and value != "-" and not Path(value).parent.is_dir():
            fail(f"{option} {value}: the folder {Path(value).parent} does not exist")
    variants = (True, False) if ablation else (not no_latency_hiding,)
    return _Request(benchmark, workloads, config, sim, variants, seed, jobs, scheduler,
                    json_path, roofline_path, baseline, baseline_file, update_path is not None,
                    clock_mhz)


def _check_combination(sim, no_latency_hiding, ablation, roofline_path, check_path,
                       update_path, jobs, scheduler) -> None:
    """Fail on options that exclude each other."""
    timed_only = [flag for flag, value in (("--roofline", roofline_path),
                                           ("--check-baseline", check_path),
                                           ("--update-baseline", update_path)) if value is not None]
    if sim in UNTIMED_SIMS and timed_only:
        fail(f"{timed_only[0]} needs cycles, but --sim {sim} is untimed; use --sim rtl")
    if ablation and no_latency_hiding:
        fail("--ablation already runs without latency hiding; drop --no-latency-hiding")
    if check_path is not None and update_path is not None:
        fail("--check-baseline and --update-baseline exclude each other")
    if (check_path is not None or update_path is not None) and no_latency_hiding:
        fail("baselines record the default compile; drop --no-latency-hiding")
    if scheduler is not None and jobs != 1:
        fail("--jobs sets local workers; a --scheduler cluster has its own")


def _baseline(config: HwConfig, benchmark: str, check_path: str | None,
              update_path: str | None) -> tuple[dict | None, Path | None]:
    """``(baseline to check, its file)``: the file checked (loaded and matched to this
    hardware now, so a mismatch costs nothing) or updated ('': the committed one)."""
    if check_path is not None:
        baseline_file = Path(check_path) if check_path else baseline_path(config)
        baseline = load_baseline(baseline_file)
        check_baseline_target(baseline, config, benchmark, baseline_file)
        return baseline, baseline_file
    if update_path is not None:
        return None, Path(update_path) if update_path else baseline_path(config)
    return None, None


def _run(request: _Request) -> list[BenchResult]:
    """Run the layers (a progress bar on stderr); one `BenchResult` per variant."""
    executor = None
    try:
        if request.scheduler is not None:
            executor = make_executor(scheduler=request.scheduler)
        bar = _progress_bar(len(request.workloads) * len(request.variants),
                            f"{request.benchmark} on {request.sim} ({request.config.name})")

        def progress(layer: LayerResult):
            suffix = "" if layer.latency_hiding else " (no latency hiding)"
            state = f"{layer.cycles:,} cycles" if layer.cycles is not None else _check(layer)
            bar.set_postfix_str(f"{layer.name}{suffix}: {state}")
            bar.update(1)

        def message(text: str):
            bar.clear()
            click.echo(f"{text} (first run for this hardware only, about a minute)", err=True)

        try:
            return suite.run_benches(request.workloads, request.config, request.sim,
                                     variants=request.variants, seed=request.seed,
                                     jobs=request.jobs, executor=executor,
                                     benchmark=request.benchmark, progress=progress,
                                     message=message)
        finally:
            bar.close()
    except KeyboardInterrupt:
        raise click.Abort() from None
    finally:
        if executor is not None:
            executor.shutdown(wait=False)


def _report(request: _Request, results: list[BenchResult]) -> bool:
    """Print the report and write the files asked for; whether every layer passed
    (correct, and no regression against the baseline)."""
    main = results[0]
    without = results[1] if request.ablation else None
    report = bench_report(main, without, jobs=request.jobs)
    lines = report_lines(main, report)
    time = time_report(main.config, main.total_cycles, request.clock_mhz)
    if time is not None:
        report["time"] = time
        lines.append(f"total {main.total_cycles:,} cycles = {time_text(time)}")

    passed = all(result.all_correct for result in results)
    if request.baseline is not None:
        check = check_baseline(main, request.baseline, request.baseline_file)
        report["baseline"] = check.to_dict()
        lines += [""] + check.lines()
        passed = passed and check.ok

    _write(request, report, lines, main, without, time)
    return passed


def _write(request: _Request, report: dict, lines: list[str], main: BenchResult,
           without: BenchResult | None, time: dict | None) -> None:
    """The text on stdout (unless the JSON goes there), then each file asked for."""
    if not request.to_stdout:
        click.echo("\n".join(lines))
    if request.json_path is not None:
        text = json.dumps(report, indent=2)
        if request.to_stdout:
            click.echo(text)
        else:
            write_output(request.json_path, text + "\n", "--json")
            click.echo(f"report written to {request.json_path}")
    if request.roofline_path is not None:
        _roofline(request, main, without, time)
    if request.update_baseline:
        try:
            written = write_baseline(main, request.baseline_file)
        except (BenchError, OSError) as error:
            fail(f"--update-baseline: {error}")
        if not request.to_stdout:
            click.echo(f"baseline written to {written} ({len(main.layers)} layer(s) recorded)")


def _roofline(request: _Request, main: BenchResult, without: BenchResult | None,
              time: dict | None) -> None:
    """Draw the run (and its ablation) on the roofline, at the clock when one is known."""
    from vdla.bench.plots import PlotError, roofline
    path = request.roofline_path
    try:
        roofline(main, main.config, path, compare=without,
                 clock=(time["clock_mhz"], time["clock"]) if time is not None else None)
    except (PlotError, OSError) as error:
        fail(f"--roofline {path}: {error}")
    if not request.to_stdout:
        click.echo(f"roofline written to {path}")
