"""What the tools say about a design: `SynthReport`, resources from Yosys's cell
counts, what is over a part's capacity, and nextpnr's critical paths."""

from __future__ import annotations

import dataclasses
import re

from vdla.hw.synth.parts import PARTS, FpgaPart

__all__ = ["SynthReport", "count_resources", "overflows", "critical_paths", "DOES_NOT_FIT",
           "UTILISATION", "utilization", "RESOURCE_NAMES"]


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
        The part (a `PARTS` name).
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
    over : list of str
        The resources of Yosys's counts over the part (`overflows`); place and
        route then stops before nextpnr.
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
    over: list[str] = dataclasses.field(default_factory=list)
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
        device = PARTS[self.device]
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
        if self.over:
            parts.append(f"({'; '.join(self.over)})")
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



def count_resources(target: str, cells: dict[str, int]) -> dict[str, int]:
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


# What each counted resource is called in messages, in the order they are checked.
RESOURCE_NAMES = {"brams": "block RAMs", "dsps": "DSPs", "luts": "LUTs", "ffs": "flip-flops",
                  "sprams": "single-port RAMs"}


def overflows(counts: dict[str, int], part: FpgaPart) -> list[str]:
    """The resources of ``counts`` over ``part``'s capacity, each as ``"block RAMs: 237
    of 208 (29 over)"``; empty when the design fits."""
    over = []
    for key, name in RESOURCE_NAMES.items():
        used, capacity = counts.get(key, 0), getattr(part, key)
        if used > capacity:
            over.append(f"{name}: {used} of {capacity} ({used - capacity} over)")
    return over


# nextpnr's words when a design is too big for the part (not a tool failure).
DOES_NOT_FIT = re.compile(r"exceeds|Unable to place|Unable to find a placement|not enough|"
                           r"failed to place|Failed to route|Failed to expand region",
                           re.IGNORECASE)


# A line of nextpnr's "Device utilisation" block: "Info:  ICESTORM_LC:  7981/  5280  151%".
UTILISATION = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", re.MULTILINE)


def utilization(log: str) -> dict[str, dict[str, int]]:
    """nextpnr's "Device utilisation" in ``log``: each cell type it uses -> ``{"used",
    "available"}``."""
    return {name: {"used": int(used), "available": int(available)}
            for name, used, available in UTILISATION.findall(log) if int(used)}



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

