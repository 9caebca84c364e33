"""``vdla run``: run a compiled ``.vdla`` program on a simulation backend.

Inputs come from ``.npy`` files (``--input NAME=FILE``), outputs go to ``.npy``
files; the report (sim, cycles, instruction counts, GEMM utilization, counters:
`cli.run_report`) is human text or, with ``--json``, one JSON object on the last
line of stdout. ``--config`` is optional: a program file carries the config it
was compiled for, and a ``--config`` that names other hardware is refused. ``--timeline``
(rtl only) draws what the load, compute and store modules did over the run
(`bench.plots.timeline`), optionally zoomed with ``--timeline-window``; the
activity record itself is left out of the JSON report (its segment counts
stay). Every user error
(bad file, bad ``NAME=FILE``, mistyped tensor, a program that deadlocks) is one
line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np

from vdla.cli.arrays import output_paths, read_npy, writable
from vdla.cli.clock import clock_option, time_report, time_text
from vdla.cli.options import Command, check_sim, fail, program_config_option, write_output
from vdla.cli.run_report import run_report, text_lines
from vdla.compiler.runners import make_runner
from vdla.hw.board_protocol import BAUD
from vdla.hw.litedram_gen import MODULES as DRAM_MODULES
from vdla.runtime.program_file import load

# Seconds between progress lines of a long run (rtl cycles, fsim micro-ops).
PROGRESS_SECONDS = 10


def _parse_pairs(values, option: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            fail(f"{option} {value!r}: expected NAME=FILE")
        if name in pairs:
            fail(f"{option} {name!r} given twice")
        pairs[name] = path
    return pairs


def _read_inputs(pairs: dict[str, str], program) -> dict[str, np.ndarray]:
    expected = {region.name: region for region in program.inputs}
    for name in pairs:          # before any file is read: only a known shape bounds a read
        if name not in expected:
            fail(f"unknown input {name!r}: the program's inputs are "
                 f"{', '.join(sorted(expected)) or 'none'}")
    return {name: read_npy(path, f"input {name!r}", expected[name])
            for name, path in pairs.items()}


def _check_trace_path(trace: str) -> None:
    """Fail unless ``trace`` is a regular file we can create: the FST writer aborts
    the process on a write error, so a special file is refused up front."""
    import os
    path = writable(trace, "--trace", exists_ok_special=False)
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        fail(f"--trace {path}: cannot write there (permission denied)")


def _parse_window(value: str | None) -> tuple[int, int] | None:
    """``START:END`` (cycles since start, END exclusive) for ``--timeline-window``."""
    if value is None:
        return None
    start, sep, end = value.partition(":")
    try:
        window = (int(start.replace("_", "")), int(end.replace("_", "")))
    except ValueError:
        window = None
    if not sep or window is None or not 0 <= window[0] < window[1]:
        fail(f"--timeline-window {value!r}: expected START:END cycles with 0 <= START < END")
    return window


def _draw_timeline(path: str, result, program, window) -> str:
    from vdla.bench.plots import PlotError, timeline
    activity = result.details.get("activity")
    if activity is None:
        fail(f"--timeline: the {result.sim} simulator recorded no module activity")
    layer = program.metadata.get("op_description") or program.metadata.get("layer", "program")
    hiding = (program.metadata.get("schedule") or {}).get("latency_hiding")
    how = {True: ", latency hiding", False: ", no latency hiding"}.get(hiding, "")
    where = f", cycles {window[0]:,}-{window[1]:,}" if window else ""
    title = f"{layer}\non {program.config.name}{how}: {result.cycles:,} cycles{where}"
    bins = max(result.details.get("activity_bin_cycles", {}).values(), default=1)
    if bins > 1:
        title += f" (binned, {bins:,} cycles per bin)"
    try:
        timeline(activity, path, cycles=result.cycles, title=title,
                 window=(window[0], min(window[1], result.cycles)) if window else None)
    except PlotError as error:
        fail(f"--timeline: {error}")
    except OSError as error:
        fail(f"--timeline: cannot write {path} ({error.strerror or error})")
    return "exact" if bins == 1 else f"binned, {bins:,} cycles per bin"


@click.command("run", cls=Command)
@click.argument("program_file", metavar="PROGRAM.vdla")
@click.option("--sim", default="fsim", show_default=True, metavar="NAME",
              help="Simulation backend (any registered one, e.g. fsim, rtl).")
@click.option("--input", "inputs", multiple=True, metavar="NAME=FILE.npy",
              help="An input tensor from a .npy file; repeat for each input.")
@click.option("--output", "outputs", multiple=True, metavar="[NAME=]FILE.npy",
              help="Where to write an output tensor (NAME= only needed with several).")
@click.option("--trace", type=click.Path(dir_okay=False), default=None,
              help="Waveform/trace file, for backends that trace (passed as trace=).")
@click.option("--cycle-limit", type=click.IntRange(min=1), default=None,
              help="Stop a timed backend after N cycles (passed as cycle_limit=).")
@click.option("--work-limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Refuse programs asking for more than N GEMM/ALU micro-op executions "
                   "(default 2^32).")
@click.option("--timeline", "timeline_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE.png",
              help="Draw each module's activity over the cycles of the run (rtl only).")
@click.option("--timeline-window", "timeline_window", default=None, metavar="START:END",
              help="Record and draw only cycles START to END (exclusive) of the run.")
@click.option("--target", type=click.Choice(["accel", "cpu", "gpu"]), default="accel",
              show_default=True,
              help="Run on the simulated accelerator, on this CPU or on the CUDA GPU.")
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True,
              help="Threads of --target cpu.")
@click.option("--port", default=None, metavar="DEVICE",
              help="--sim board: the board's serial port (e.g. /dev/ttyUSB1).")
@click.option("--baud", type=click.IntRange(min=1), default=None,
              help=f"--sim board: the bitstream's UART baud rate (default {BAUD}).")
@click.option("--board-memory", type=click.Choice(sorted(DRAM_MODULES)), default=None,
              help="--sim board-sim: the DRAM behind a LiteDRAM controller (litedram-sdram: "
                   "the ULX3S's 32 MiB SDRAM; litedram-ddr3: the ECPIX-5's 512 MiB DDR3; "
                   "needs the dram extra). Default: the memory of the config's board as its "
                   "bitstream has it (ulx3s: the SDRAM, ecpix5: the DDR3), else on-chip.")
@clock_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@program_config_option
def command(program_file, sim, inputs, outputs, trace, cycle_limit, work_limit, timeline_path,
            timeline_window, target, threads, port, baud, board_memory, clock_mhz, as_json,
            config):
    """Run PROGRAM.vdla with inputs from .npy files and report cycles and counters."""
    check_sim(sim)
    if timeline_path is not None and sim != "rtl":
        fail(f"--timeline needs cycle-accurate module activity, which only --sim rtl records "
              f"(got --sim {sim})")
    if timeline_window is not None and timeline_path is None:
        fail("--timeline-window needs --timeline FILE.png")
    window = _parse_window(timeline_window)
    input_paths = _parse_pairs(inputs, "--input")
    from vdla.graph.network_file import is_network_file
    if is_network_file(program_file):
        from vdla.cli.net import run_network
        return run_network(program_file, sim, input_paths, outputs, target, threads, as_json,
                           config, {} if cycle_limit is None else {"cycle_limit": cycle_limit},
                           clock_mhz)
    program = load(program_file, config)
    output_files = output_paths(outputs, program)
    if trace is not None:
        _check_trace_path(trace)
    if timeline_path is not None:
        writable(timeline_path, "--timeline")
    arrays = _read_inputs(input_paths, program)
    options = {}
    if (port is not None or baud is not None) and sim != "board":
        fail(f"--port and --baud are for --sim board (got --sim {sim})")
    if board_memory is not None:
        if sim != "board-sim":
            fail(f"--board-memory is for --sim board-sim (got --sim {sim})")
        options["memory_kind"] = board_memory
    if port is not None:
        options["port"] = port
    if baud is not None:
        options["baud"] = baud
    if trace is not None:
        options["trace"] = trace
    if cycle_limit is not None:
        options["cycle_limit"] = cycle_limit
    if work_limit is not None:
        options["max_uop_executions"] = work_limit
    if timeline_path is not None:
        options["activity"] = True
        if window is not None:
            options["activity_window"] = window
    if sim in ("rtl", "fsim") and target == "accel":
        # A cold Verilator build (about a minute) and long runs say so first.
        def progress(text: str) -> None:
            if text.startswith("building"):
                text += " (first run for this hardware only, about a minute)..."
            click.echo(text, err=True)
        options["progress"] = progress
        options["progress_every"] = PROGRESS_SECONDS
    if target == "cpu":
        if options:
            fail("--trace, --cycle-limit and --timeline are simulator options; "
                 "--target cpu runs no simulator")
        options = {"threads": threads}
    elif target == "gpu":
        if options:
            fail("--trace, --cycle-limit and --timeline are simulator options; "
                 "--target gpu runs no simulator")
    runner = make_runner(target, program.config, sim, **options)
    result = runner.run(program, arrays)
    written = {}
    for name, path in output_files.items():
        # Through a handle: np.save(path) would append ".npy" to other names.
        write_output(path, lambda handle, array=result.outputs[name]: np.save(
            handle, array, allow_pickle=False), f"output {name!r}")
        written[name] = str(path)
    if trace is not None and not (Path(trace).is_file() and Path(trace).stat().st_size):
        fail(f"--trace {trace}: the simulator wrote no trace there")
    drawn = None
    if window is not None and window[0] >= result.cycles:
        fail(f"--timeline-window {timeline_window}: the run took only {result.cycles:,} cycles")
    if timeline_path is not None:
        drawn = _draw_timeline(timeline_path, result, program, window)
    report = run_report(program_file, program, result, written)
    # cycles become time at a clock only on the accelerator; the cpu target is timed
    report["time"] = None if target != "accel" else time_report(program.config, result.cycles,
                                                              clock_mhz)
    if as_json:
        if timeline_path is not None:
            report["timeline"] = {"file": str(timeline_path), "window": list(window) if window
                                  else None, "resolution": drawn}
        click.echo(json.dumps(report))
        return
    click.echo("\n".join(text_lines(report, program)))
    if result.sim == "cpu":
        click.echo(f"time: {result.details['seconds'] * 1e3:.3f} ms ({result.details['threads']} "
                   f"threads, {result.details['mode']}, {result.details['isa']})")
    if result.sim == "gpu":
        click.echo(f"time: {result.details['seconds'] * 1e3:.3f} ms with copies "
                   f"({result.details['device']}, {result.details['mode']})")
    if report["time"] is not None:
        click.echo(f"time: {time_text(report['time'])}")
    if timeline_path is not None:
        span = f" (cycles {window[0]:,} to {window[1]:,})" if window else ""
        click.echo(f"timeline{span}, {drawn}: {timeline_path}")
