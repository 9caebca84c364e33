"""Whether a design can fit a part, answered in seconds, before any tool runs.

`estimate_rtlil` reads the RTLIL that Amaranth writes (the text Yosys is given)
and counts what Yosys will make of it by the rules Yosys's own mapping follows:

block RAMs
    Each memory (``memory width W size D``) goes where ``memory_libmap``
    finds it cheapest, at the costs of Yosys's library files: a block RAM
    costs 128 on ECP5 (``lattice/brams_16kd.txt``; 16K x 1, 8K x 2, 4K x 4,
    2K x 9, 1K x 18 or 512 x 36) and 64 on iCE40 (``ice40/brams.txt``; 2K x 2
    ... 256 x 16), a 16 x 4 ECP5 LUT RAM 4 (``lattice/lutrams_trellis.txt``),
    an iCE40 UltraPlus single-port RAM (16K x 16) 2048, a bit of flip-flops 1
    (``memory_libmap -logic-cost-ram``). Each read port past the first is a
    copy. What ``memory_libmap`` maps, exactly; Yosys later drops the cells
    of data bits that nothing reads (a submodule's unused uop fields), so the
    final count can be a block RAM lower (benchmarks/README.md, "Fit before
    synthesis"): the estimate errs on the safe side.
DSPs
    Each ``$mul`` whose operands are both signals at least 2 bits wide is cut
    by ``mul2dsp`` into 18 x 18 pieces, one ECP5 MULT18X18D each (iCE40: 16 x
    16 SB_MAC16, products of at least 11 bits, and only on parts with DSPs),
    less the pieces whose product lies above every bit that is read (a 32 x 32
    product of which the low 32 bits are kept: 3 of 4), less the products
    ``HwConfig.lut_products`` builds from LUTs (`LUT_PRODUCT` in the text).
LUTs
    Roughly: a cost per bit of each arithmetic, compare, multiplexer and shift
    cell, LUT RAMs at 4 LUTs each, calibrated on the shipped presets; Yosys
    and ABC merge and trim, so the figure is within about a third. Only a
    design over the part by more than `LUT_MARGIN` is refused on it.

`check_fits` turns an estimate over the part's capacity into `DoesNotFit`,
naming each resource and by how much: a design that cannot fit is refused
before Yosys and nextpnr run, which on the VTA-size ``default`` take a long
time to fail (benchmarks/README.md, "Synthesis, Fmax and time").
"""

from __future__ import annotations

import dataclasses
import math
import re

from vdla.hw.synth.parts import FpgaPart
from vdla.hw.synth.reports import RESOURCE_NAMES
from vdla.hw.synth.tools import SynthError

__all__ = ["FitEstimate", "DoesNotFit", "estimate_rtlil", "check_fits", "LUT_MARGIN"]

# The LUT estimate refuses only beyond the part's LUTs by this factor (its error).
LUT_MARGIN = 1.35

# Block RAM geometries (depth, width) and costs, as in Yosys's library files.
_BRAM = {"ecp5": (((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)), 128),
         "ice40": (((2048, 2), (1024, 4), (512, 8), (256, 16)), 64)}
_LUTRAM = (16, 4, 4)          # ECP5 TRELLIS_DPR16X4: depth, width, cost
_SPRAM = (16384, 16, 2048)    # iCE40 UltraPlus SB_SPRAM256KA
# mul2dsp's pieces (A, B widths) and the narrowest operands and product it maps.
_DSP = {"ecp5": (18, 18, 2, 0), "ice40": (16, 16, 2, 11)}
# Estimated LUTs per bit of a cell's widest port (see the module's doc; fitted on
# the shipped presets' Yosys reports).
_LUTS_PER_BIT = {"$add": 1.0, "$sub": 1.0, "$neg": 1.0, "$lt": 0.6, "$le": 0.6, "$gt": 0.6,
                 "$ge": 0.6, "$eq": 0.4, "$ne": 0.4, "$mux": 0.7, "$pmux": 0.7, "$shl": 2.0,
                 "$shr": 2.0, "$sshr": 2.0, "$sshl": 2.0, "$shift": 2.0, "$shiftx": 2.0,
                 "$and": 0.15, "$or": 0.15, "$xor": 0.5, "$not": 0.0,
                 "$reduce_and": 0.3, "$reduce_or": 0.3, "$reduce_bool": 0.3,
                 "$logic_not": 0.3, "$logic_and": 0.1, "$logic_or": 0.1}
_SHIFTS = ("$shl", "$shr", "$sshr", "$sshl", "$shift", "$shiftx")
# A LUT multiplier of A x B bits: about this many LUTs per partial-product bit; a
# GEMM product built from LUTs (a signed 8x8 ``booth`` multiplier): Yosys's LUTs,
# carry cells as 2, fitted on `tiny` with 10 of them (benchmarks/README.md, "Fit
# before synthesis").
_LUTS_PER_PRODUCT_BIT = 2.1
_LUTS_PER_LUT_PRODUCT = 136
# Yosys's LUTs per estimated LUT, by family (ECP5: carry cells count 2; fitted on
# the shipped presets, benchmarks/README.md "Fit before synthesis").
_LUT_SCALE = {"ecp5": 1.3, "ice40": 1.05}

_CONSTANT = re.compile(r"^-?\d+'[01xz-]+$")


class DoesNotFit(SynthError):
    """The design needs more of a resource than the part has."""


@dataclasses.dataclass(frozen=True)
class FitEstimate:
    """Resources a design will need, counted from its RTLIL (`estimate_rtlil`).

    Attributes
    ----------
    brams, dsps, luts, lutrams, sprams : int
        Block RAMs, multiplier blocks, LUTs (rough), LUT RAM cells and iCE40
        single-port RAMs.
    memories : tuple of (str, int, int, str, int)
        Each memory: name, depth, width, where it goes (``bram``, ``lutram``,
        ``spram``, ``logic``) and how many cells.
    """

    brams: int
    dsps: int
    luts: int
    lutrams: int = 0
    sprams: int = 0
    memories: tuple = ()


def _memory_cells(target: str, part: FpgaPart | None, depth: int, width: int, reads: int,
                  single_port: bool, style: str | None) -> tuple[str, int]:
    """Where ``memory_libmap`` puts one memory, and how many cells: the cheapest, or
    the kind its ``ram_style`` attribute asks for."""
    geometries, bram_cost = _BRAM[target]
    blocks = min(math.ceil(depth / d) * math.ceil(width / w) for d, w in geometries)
    options = [(bram_cost * blocks * reads, "bram", blocks * reads),
               (depth * width * reads, "logic", 0)]
    if target == "ecp5":
        d, w, cost = _LUTRAM
        cells = math.ceil(depth / d) * math.ceil(width / w) * reads
        options.append((cost * cells, "lutram", cells))
    if target == "ice40" and part is not None and part.sprams and single_port:
        d, w, cost = _SPRAM
        cells = math.ceil(depth / d) * math.ceil(width / w)
        options.append((cost * cells, "spram", cells))
    asked = {"block": "bram", "distributed": "lutram", "logic": "logic"}.get(style or "")
    options = [option for option in options if option[1] == asked] or options
    _, kind, cells = min(options, key=lambda option: option[0])
    return kind, cells


def _cells(rtlil: str):
    """Each memory and cell of the text, with its module: ``("memory", module, name,
    width, depth, ram_style attribute or None)`` or ``("cell", module, type,
    parameters, connections)``."""
    module, cell_type, params, connects, style = "", None, {}, {}, None
    for raw in rtlil.splitlines():
        line = raw.strip()
        if line.startswith("module "):
            module = line.split()[1]
        elif line.startswith("attribute \\ram_style "):
            style = line.split(None, 2)[2].strip('"')
        elif line.startswith("memory "):
            words = line.split()
            fields = dict(zip(words[1:-1:2], words[2:-1:2]))
            yield "memory", module, words[-1], int(fields["width"]), int(fields["size"]), style
        elif line.startswith("cell "):
            cell_type, params, connects = line.split()[1], {}, {}
        elif cell_type is None:
            continue
        elif line.startswith("parameter "):
            _, name, value = line.split(None, 2)
            params[name.lstrip("\\")] = value
        elif line.startswith("connect "):
            _, port, value = line.split(None, 2)
            connects[port.lstrip("\\")] = value
        elif line == "end":
            yield "cell", module, cell_type, params, connects
            cell_type = None
        if not line.startswith("attribute "):
            style = None   # an attribute belongs to the next declaration only


_SIGNAL = re.compile(r"(\\\S+|\$\S+)(?: \[(\d+)(?::(\d+))?\])?")


def _bits_read(rtlil: str, wires: set[tuple[str, str]]) -> dict[tuple[str, str], set[int]]:
    """For each (module, wire) of ``wires``: the bits any connection or process of its
    module reads (a memory's write data aside); absent where one reads it whole."""
    used: dict[tuple[str, str], set[int]] = {key: set() for key in wires}
    whole: set[tuple[str, str]] = set()
    module = ""
    for raw in rtlil.splitlines():
        line = raw.strip()
        if line.startswith("module "):
            module = line.split()[1]
        words = line.split(None, 2)
        if (len(words) < 3 or words[0] not in ("connect", "assign", "switch", "case")
                or words[1] in ("\\Y", "\\Q", "\\DATA")):
            continue   # not a connection, or a cell's output (Y, Q, a read port's DATA)
        for match in _SIGNAL.finditer(line[len(words[0]):]):
            key = (module, match.group(1))
            if key in used:
                if match.group(2) is None:
                    whole.add(key)
                else:
                    high = int(match.group(2))
                    low = high if match.group(3) is None else int(match.group(3))
                    used[key].update(range(low, high + 1))
    return {key: bits for key, bits in used.items() if key not in whole}


def _int(value: str) -> int:
    """An RTLIL parameter as an integer (``8``, ``32'00000000000000000000000000001000``)."""
    if "'" in value:
        return int(value.split("'")[1].replace("x", "0"), 2)
    return int(value)


def estimate_rtlil(rtlil: str, target: str, part: FpgaPart | None = None) -> FitEstimate:
    """Block RAMs, DSPs and (roughly) LUTs Yosys will map ``rtlil`` to on ``target``.

    Parameters
    ----------
    rtlil : str
        The design as `amaranth.back.rtlil.convert` writes it (every module
        instantiated once, as Amaranth writes them).
    target : {"ecp5", "ice40"}
    part : FpgaPart, optional
        The part: iCE40 single-port RAMs and DSPs only where it has them.

    Returns
    -------
    FitEstimate
    """
    from vdla.hw.gemm import LUT_PRODUCT  # Amaranth loads only when synthesising
    memories: dict[tuple[str, str], list] = {}   # width, depth, read ports, addresses
    a_max, b_max, min_operand, min_product = _DSP[target]
    # iCE40 parts without DSPs are synthesised without ``-dsp`` (`synth_options`).
    maps_dsps = not (target == "ice40" and part is not None and not part.dsps)
    dsps = luts = 0.0
    multipliers: dict[tuple[str, str], tuple[int, int, int]] = {}   # by output wire
    for kind, module, *rest in _cells(rtlil):
        if kind == "memory":
            name, width, depth, style = rest
            memories[module, name] = [width, depth, 0, set(), style]
            continue
        cell_type, params, connects = rest
        if cell_type in ("$memrd_v2", "$memrd", "$memwr_v2", "$memwr"):
            memid = params.get("MEMID", "").strip('"').replace("\\\\", "\\")
            memory = memories.get((module, memid))
            if memory is not None:
                memory[2] += cell_type.startswith("$memrd")
                memory[3].add(connects.get("ADDR"))
            continue
        widths = [_int(params[p]) for p in ("A_WIDTH", "B_WIDTH", "Y_WIDTH", "WIDTH")
                  if p in params]
        if cell_type == "$mul":
            a, b, y = (_int(params[p]) for p in ("A_WIDTH", "B_WIDTH", "Y_WIDTH"))
            constant = any(_CONSTANT.match(connects.get(p, "")) for p in ("A", "B"))
            if constant or not maps_dsps or min(a, b) < min_operand or y < min_product:
                luts += _LUTS_PER_PRODUCT_BIT * a * b * (not constant)
            else:
                multipliers[module, connects["Y"]] = (a, b, y)
        elif cell_type in _LUTS_PER_BIT and widths:
            # A shift by a constant is wiring; a bitwise operation with a constant
            # folds into its neighbours.
            constant = _CONSTANT.match(connects.get("B", "")) and (
                cell_type in _SHIFTS or cell_type in ("$and", "$or", "$xor"))
            luts += 0 if constant else _LUTS_PER_BIT[cell_type] * max(widths)
    # mul2dsp cuts each multiplier into pieces of at most a_max x b_max bits; Yosys
    # then drops the pieces whose product lies wholly above the bits that are read.
    read = _bits_read(rtlil, set(multipliers))
    for key, (a, b, y) in multipliers.items():
        bits_read = max(read[key], default=-1) + 1 if key in read else y
        dsps += sum(a_max * i + b_max * j < bits_read
                    for i in range(math.ceil(a / a_max)) for j in range(math.ceil(b / b_max)))
    # The products built from LUTs: 8x8 multipliers, not DSPs.
    lut_products = len(re.findall(rf"attribute \\{LUT_PRODUCT} ", rtlil)) * maps_dsps
    dsps -= lut_products
    totals = {"bram": 0, "lutram": 0, "spram": 0}
    placed = []
    for (module, name), (width, depth, reads, addresses, style) in memories.items():
        single_port = len(addresses - {None}) == 1
        kind, cells = _memory_cells(target, part, depth, width, max(1, reads), single_port,
                                    style)
        totals[kind] = totals.get(kind, 0) + cells
        if kind == "logic":
            luts += depth * width / 2   # a read multiplexer over the bits
        placed.append((f"{module}.{name}".replace("\\", ""), depth, width, kind, cells))
    luts += 4 * totals["lutram"]
    return FitEstimate(brams=totals["bram"], dsps=max(0, round(dsps)),
                       luts=round(luts * _LUT_SCALE[target] + lut_products * _LUTS_PER_LUT_PRODUCT),
                       lutrams=totals["lutram"],
                       sprams=totals["spram"], memories=tuple(placed))


def check_fits(estimate: FitEstimate, part: FpgaPart, what: str) -> None:
    """Raise `DoesNotFit` if ``estimate`` is over ``part``'s capacity.

    Block RAMs, DSPs and single-port RAMs are counted exactly, LUTs roughly:
    they refuse only beyond `LUT_MARGIN` times the part's.

    Parameters
    ----------
    estimate : FitEstimate
    part : FpgaPart
    what : str
        The design, for the message (``config default``).

    Raises
    ------
    DoesNotFit
        One line: each resource over, by how much.
    """
    over = []
    for key in ("brams", "dsps", "sprams", "luts"):
        used, capacity = getattr(estimate, key), getattr(part, key)
        limit = capacity * LUT_MARGIN if key == "luts" else capacity
        if used > limit:
            about = "about " if key == "luts" else ""
            over.append(f"{RESOURCE_NAMES[key]}: {about}{used} of {capacity} "
                        f"({used - capacity} over)")
    if over:
        raise DoesNotFit(f"{what} cannot fit the {part.name}: {'; '.join(over)} "
                         "(estimated before synthesis)")
