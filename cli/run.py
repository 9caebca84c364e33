"""``vdla run``: run a compiled ``.vdla`` program, or a network, on its target.

A program runs on the target its file records: the accelerator on a
simulation backend (``--sim``, fsim by default), or the cpu or gpu target;
a network file runs each node where it was placed (`cli.net`). Inputs come
from ``.npy`` files (``--input NAME=FILE``), outputs go to ``.npy`` files;
the report (sim, cycles, instruction counts, GEMM utilization, counters:
`cli.run_report`) is human text or, with ``--json``, one JSON object on the last
line of stdout. ``--config`` is optional: a program file carries the config it
was compiled for, and a ``--config`` that names other hardware is refused.

The options that belong to one backend (``--trace``, ``--port``,
``--threads`` ...) are taken, refused and documented from the backends' own
declarations (`cli.backend_options`). ``--timeline`` (rtl) draws what the
load, compute and store modules did over the run (`bench.plots.timeline`),
optionally zoomed with ``--timeline-window``; the activity record itself is
left out of the JSON report (its segment counts stay). Every user error (bad
file, bad ``NAME=FILE``, mistyped tensor, a program that deadlocks) is one
line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click

from vdla.cli.arrays import output_paths, read_inputs, writable, write_outputs
from vdla.cli.backend_options import (BackendOption, backend_option, given_options, label,
                                      options_for, progress_options)
from vdla.cli.clock import clock_option, time_report
from vdla.cli.options import Command, check_sim, fail, program_config_option
from vdla.cli.run_report import run_report, text_lines
from vdla.compiler.runners import make_runner
from vdla.hw.boards.protocol import BAUD
from vdla.hw.boards.litedram_gen import MODULES as DRAM_MODULES
from vdla.runtime.program_file import load


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


@dataclasses.dataclass
class Request:
    """What ``vdla run`` was asked: the program and network paths both read it.

    ``sim`` and ``target`` are None where not given (a program runs on the
    target its file records; a simulator is ``fsim`` unless named);
    ``backend`` holds the backend options given (`cli.backend_options`).
    """

    program_file: str
    sim: str | None
    target: str | None
    inputs: dict[str, str]
    outputs: tuple[str, ...]
    clock_mhz: float | None
    as_json: bool
    config: Any
    backend: dict[BackendOption, Any]

    @property
    def simulator(self) -> str:
        return self.sim or "fsim"

    def option(self, flag: str):
        """The value of backend option ``flag`` (None where not given)."""
        return next((value for option, value in self.backend.items() if option.flag == flag),
                    None)


@click.command("run", cls=Command, short_help="Run a program on inputs from .npy files; report cycles.")
@click.argument("program_file", metavar="PROGRAM.vdla")
@click.option("--sim", default=None, metavar="NAME",
              help="The accelerator's simulation backend (any registered one, e.g. fsim, "
                   "rtl). Default: fsim.")
@click.option("--input", "inputs", multiple=True, metavar="NAME=FILE.npy",
              help="An input tensor from a .npy file; repeat for each input.")
@click.option("--output", "outputs", multiple=True, metavar="[NAME=]FILE.npy",
              help="Where to write an output tensor (NAME= only needed with several).")
@backend_option("--trace", keyword="trace", type=click.Path(dir_okay=False),
                help="Write a waveform of the run to this file.")
@backend_option("--cycle-limit", keyword="cycle_limit", type=click.IntRange(min=1),
                help="Stop the run after N cycles.")
@backend_option("--work-limit", keyword="max_uop_executions", type=click.IntRange(min=1),
                metavar="N",
                help="Refuse programs asking for more than N GEMM/ALU micro-op executions "
                     "(default 2^32).")
@backend_option("--timeline", "timeline_path", keyword="activity",
                convert=lambda path: True, type=click.Path(dir_okay=False), metavar="FILE.png",
                help="Draw each module's activity over the cycles of the run.")
@backend_option("--timeline-window", "timeline_window", keyword="activity_window",
                convert=_parse_window, metavar="START:END",
                help="Record and draw only cycles START to END (exclusive) of the run.")
@click.option("--target", type=click.Choice(["accel", "cpu", "gpu"]), default=None,
              help="Run on the simulated accelerator, on this CPU or on the CUDA GPU. "
                   "Default: the target the program was compiled for (a network: its "
                   "placement; --target cpu runs every layer as C).")
@backend_option("--threads", keyword="threads", type=click.IntRange(min=1),
                help="Threads of the cpu target (default 2).")
@backend_option("--port", keyword="port", metavar="DEVICE",
                help="The board's serial port (e.g. /dev/ttyUSB1).")
@backend_option("--baud", keyword="baud", type=click.IntRange(min=1),
                help=f"The bitstream's UART baud rate (default {BAUD}).")
@backend_option("--board-memory", keyword="memory_kind",
                type=click.Choice(sorted(DRAM_MODULES)),
                help="The DRAM behind a LiteDRAM controller (litedram-sdram: the ULX3S's "
                     "32 MiB SDRAM; litedram-ddr3: the ECPIX-5's 512 MiB DDR3; needs the dram "
                     "extra). Default: the memory of the config's board as its bitstream has "
                     "it (ulx3s: the SDRAM, ecpix5: the DDR3), else on-chip.")
@clock_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@program_config_option
def command(program_file, sim, inputs, outputs, target, clock_mhz, as_json, config,
            **_backend):
    """Run PROGRAM.vdla (a layer's program or a network) with inputs from .npy files and
    report cycles and counters."""
    from vdla.graph.network_file import is_network_file
    if sim is not None:
        check_sim(sim)
    request = Request(program_file, sim, target, _parse_pairs(inputs, "--input"), outputs,
                      clock_mhz, as_json, config, given_options(click.get_current_context()))
    if is_network_file(program_file):
        from vdla.cli.net import run_network
        return run_network(request)
    _run_program(request)


def _program_runner(request: Request, program) -> tuple[str, str | None]:
    """The runner of ``program``: its file's target (an explicit --target must agree) and,
    on the accelerator, the simulator."""
    target = program.target
    if request.target not in (None, target):
        fail(f"--target {request.target}: {request.program_file} was compiled for target "
             f"{target!r} (leave --target out to run it there)")
    if target != "accel" and request.sim is not None:
        fail(f"--sim {request.sim} does not apply to {label((target, None))} "
             f"({request.program_file} was compiled for it; it runs no simulator)")
    return target, (request.simulator if target == "accel" else None)


def _run_program(request: Request) -> None:
    program = load(request.program_file, request.config)
    runner = _program_runner(request, program)
    options = options_for(request.backend, [runner])[runner] | progress_options(runner)
    trace, timeline_path = request.option("--trace"), request.option("--timeline")
    window = options.get("activity_window")
    if window is not None and timeline_path is None:
        fail("--timeline-window needs --timeline FILE.png")
    output_files = output_paths(request.outputs, program)
    if trace is not None:
        _check_trace_path(trace)
    if timeline_path is not None:
        writable(timeline_path, "--timeline")
    arrays = read_inputs(request.inputs, {region.name: region for region in program.inputs})
    result = make_runner(runner[0], program.config, runner[1], **options).run(program, arrays)
    written = write_outputs(output_files, result.outputs)
    if trace is not None and not (Path(trace).is_file() and Path(trace).stat().st_size):
        fail(f"--trace {trace}: the simulator wrote no trace there")
    if window is not None and window[0] >= result.cycles:
        fail(f"--timeline-window {request.option('--timeline-window')}: the run took only "
             f"{result.cycles:,} cycles")
    report = run_report(request.program_file, program, result, written)
    if runner[0] == "accel":   # cycles become time at a clock only on the accelerator
        report["time"] = time_report(program.config, result.cycles, request.clock_mhz)
    lines = text_lines(report, program)
    if timeline_path is not None:
        drawn = _draw_timeline(timeline_path, result, program, window)
        report["timeline"] = {"file": str(timeline_path), "window": list(window) if window
                              else None, "resolution": drawn}
        span = f" (cycles {window[0]:,} to {window[1]:,})" if window else ""
        lines.append(f"timeline{span}, {drawn}: {timeline_path}")
    click.echo(json.dumps(report) if request.as_json else "\n".join(lines))
