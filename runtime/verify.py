"""The program verifier: what every tier checks before it runs a program.

A `Program` reaches a simulator only after `verify_program` accepted it, and
every ``.vdla`` file is checked by `verify_plan` as it is loaded. The checks:

* the header: a `HwConfig`, ``dram_bytes`` within `MAX_DRAM_BYTES` and the
  bytes the config's DRAM addresses reach (``dram_addr_bits``), and no
  larger than the plan needs (its last region, rounded up to the alignment);
* the DRAM plan: the instruction region, the micro-op region and every tensor
  aligned to ``config.dram_alignment``, inside the image and overlapping
  nothing else (but two inputs may be the very same bytes); tensors with
  unique names, a known role (`ROLES`), a known layout
  (`runtime.layout.LAYOUTS`) and a shape of that layout's rank with
  positive sizes; constants (role ``constant``) exactly the regions of a
  constant layout, with the shape it takes; at least one output;
* where instructions reach into DRAM: a uop LOAD reads only the micro-op
  region, an inp/wgt/acc LOAD only a tensor whose layout holds that memory
  kind, a STORE writes only an output (or scratch) tensor -- so a moved
  offset or an output over an input is caught before it runs, not seen as
  a wrong answer;
* the program itself: `sim.checker.check_program` (legal instructions and
  memory kinds, SRAM bounds, micro-op ranges, work limit, token balance,
  deadlock, races), the same rules the functional simulator applies.

The file's SHA-256 only proves the bytes are the ones written; this proves
they make a program the hardware can run.
"""

from __future__ import annotations

import numpy as np

from vdla.hw import isa
from vdla.hw.config import HwConfig
from vdla.ints import round_up
from vdla.runtime.errors import ProgramError
from vdla.runtime.layout import CONSTANT_LAYOUTS, LAYOUTS, LayoutError, check_constant, constant, \
    packed_nbytes
from vdla.runtime.program import Program

__all__ = ["verify_plan", "verify_program", "dram_image", "place_constant", "ROLES",
           "MAX_DRAM_BYTES"]

# A constant's bytes follow from its layout and shape (`runtime.layout.constant`): the
# image holds them, no caller passes them.
ROLES = ("input", "output", "scratch", "constant")
# The ISA addresses 2^32 bytes (HwConfig.DRAM_ADDR_BITS); the host simulators
# hold the whole image in memory, so vdla states a lower limit of 1 GiB.
MAX_DRAM_BYTES = 1 << 30


def _span_text(first: int, end: int) -> str:
    return f"bytes [{first}, {end})"


def _check_int(value, what: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise ProgramError(f"DRAM plan: {what} must be an integer, got {value!r}")
    return int(value)


def _regions(program: Program) -> list[tuple[str, int, int]]:
    """``(what, first byte, end)`` of every region of the plan, after checking each one."""
    config = program.config
    alignment = config.dram_alignment
    regions = [("instructions", _check_int(program.insn_offset, "insn_offset"),
                len(program.instructions) * isa.INSN_BYTES),
               ("micro-ops", _check_int(program.uop_offset, "uop_offset"),
                len(program.uops) * isa.UOP_BYTES)]
    names = set()
    for tensor in program.tensors:
        what = f"tensor {tensor.name!r:.40}"
        if not isinstance(tensor.name, str) or not tensor.name:
            raise ProgramError(f"DRAM plan: a tensor name must be a non-empty string, got "
                               f"{tensor.name!r}")
        if tensor.name in names:
            raise ProgramError(f"DRAM plan: two tensors are called {tensor.name!r}")
        names.add(tensor.name)
        for field in ("role", "layout"):
            if not isinstance(getattr(tensor, field), str):
                raise ProgramError(f"DRAM plan: {what} has a {field} that is no string: "
                                   f"{getattr(tensor, field)!r:.40}")
        if tensor.role not in ROLES:
            raise ProgramError(f"DRAM plan: {what} has role {tensor.role!r} (known: "
                               f"{', '.join(ROLES)})")
        if tensor.layout not in LAYOUTS:
            raise ProgramError(f"DRAM plan: {what} has layout {tensor.layout!r} (known: "
                               f"{', '.join(LAYOUTS)})")
        rank = LAYOUTS[tensor.layout][0]
        shape = tuple(tensor.shape)
        if (len(shape) != rank or any(isinstance(n, bool) or not isinstance(n, (int, np.integer))
                                      or n <= 0 for n in shape)):
            raise ProgramError(f"DRAM plan: {what} of layout {tensor.layout} needs {rank} "
                               f"positive sizes, got shape {shape}")
        if (tensor.role == "constant") != (tensor.layout in CONSTANT_LAYOUTS):
            raise ProgramError(f"DRAM plan: {what} has role {tensor.role} and layout "
                               f"{tensor.layout}: constants are exactly the regions of a "
                               f"constant layout ({', '.join(CONSTANT_LAYOUTS)})")
        if tensor.role == "constant":
            try:
                check_constant(tensor.layout, shape)
            except LayoutError as error:
                raise ProgramError(f"DRAM plan: {what}: {error}") from None
        # Sizes above the limit are refused before the product can get costly.
        if any(n > MAX_DRAM_BYTES for n in shape):
            raise ProgramError(f"DRAM plan: {what} of shape {shape} is larger than the "
                               f"{MAX_DRAM_BYTES}-byte DRAM limit")
        nbytes = packed_nbytes(tensor.layout, shape, config)
        if nbytes > MAX_DRAM_BYTES:
            raise ProgramError(f"DRAM plan: {what} of shape {shape} packs into {nbytes} bytes, "
                               f"more than the {MAX_DRAM_BYTES}-byte DRAM limit")
        regions.append((what, _check_int(tensor.dram_offset, f"{what}'s dram_offset"), nbytes))
    if not program.outputs:
        raise ProgramError("DRAM plan: the program has no output tensor")
    # Two inputs may be the same bytes (a conv adding its own input as the residual).
    inputs = {f"tensor {t.name!r:.40}" for t in program.tensors if t.role == "input"}
    spans = []
    for what, offset, size in regions:
        if offset % alignment:
            raise ProgramError(f"DRAM plan: {what} at byte {offset} is not aligned to the "
                               f"config's {alignment}-byte DRAM alignment")
        if offset < 0 or offset + size > program.dram_bytes:
            raise ProgramError(f"DRAM plan: {what} at {_span_text(offset, offset + size)}: "
                               f"outside the program's {program.dram_bytes}-byte DRAM image")
        spans.append((what, offset, offset + size))
    ordered = sorted((s for s in spans if s[2] > s[1]), key=lambda s: s[1])
    for (what, first, end), (other, other_first, other_end) in zip(ordered, ordered[1:]):
        if {what, other} <= inputs and (first, end) == (other_first, other_end):
            continue
        if other_first < end:
            raise ProgramError(f"DRAM plan: {what} at {_span_text(first, end)} overlaps "
                               f"{other} at {_span_text(other_first, other_end)}")
    return spans


def _check_dram_accesses(program: Program, spans: list[tuple[str, int, int]]) -> dict[int, str]:
    """Every LOAD/STORE reaches only into the region its memory kind belongs in.

    Returns the region each one reaches, by instruction index: ``"micro-ops"``
    or a tensor's name (regions do not overlap, so it is unique).
    """
    config = program.config
    by_name = {what: (first, end) for what, first, end in spans}
    readable: dict[str, list[str]] = {"uop": ["micro-ops"], "inp": [], "wgt": [], "acc": []}
    writable: list[str] = []   # STORE writes out elements into outputs and scratch only
    names = {"micro-ops": "micro-ops"}
    for tensor in program.tensors:
        kind, label = LAYOUTS[tensor.layout][2], f"tensor {tensor.name!r}"
        names[label] = tensor.name
        if kind == "out":
            if tensor.role != "input":
                writable.append(label)
        else:
            readable[kind].append(label)
    reached = {}
    for index, insn in enumerate(program.instructions):
        if not isinstance(insn, (isa.Load, isa.Store)) or not insn.y_size or not insn.x_size:
            continue
        kind = insn.memory_type.kind
        store = isinstance(insn, isa.Store)
        element = config.element_bytes(kind)
        first = insn.dram_base * element
        end = (insn.dram_base + (insn.y_size - 1) * insn.x_stride + insn.x_size) * element
        targets = writable if store else readable.get(kind, [])
        inside = [t for t in targets if by_name[t][0] <= first and end <= by_name[t][1]]
        if inside:
            reached[index] = names[inside[0]]
            continue
        where = " or ".join(targets) or f"every region (none holds {kind} data)"
        raise ProgramError(f"DRAM plan: instruction {index} ({insn.opcode.name} {kind}) "
                           f"{'writes' if store else 'reads'} {_span_text(first, end)}, "
                           f"outside {where}")
    return reached


def verify_plan(program: Program, *, shared: bool = False) -> dict[int, str]:
    """Check a program's header and DRAM plan (cheap: no instruction is executed).

    Parameters
    ----------
    program : Program
    shared : bool
        The program is one of several in a larger image (a network's arena,
        `graph.arena`): ``dram_bytes`` is that image's size, so it may exceed
        what this program's own regions need.

    Returns
    -------
    dict of int to str
        The region each LOAD/STORE reaches, by instruction index:
        ``"micro-ops"`` or a tensor's name.

    Raises
    ------
    ProgramError
        Naming the first problem found (module docstring).
    """
    if not isinstance(program.config, HwConfig):
        raise ProgramError(f"program config must be an HwConfig, got "
                           f"{type(program.config).__name__}")
    dram_bytes = _check_int(program.dram_bytes, "dram_bytes")
    if not 0 < dram_bytes <= MAX_DRAM_BYTES:
        raise ProgramError(f"DRAM plan: dram_bytes {dram_bytes} is outside 1..{MAX_DRAM_BYTES} "
                           "(vdla's DRAM image limit)")
    reach = 1 << program.config.dram_addr_bits
    if dram_bytes > reach:
        raise ProgramError(f"DRAM plan: dram_bytes {dram_bytes} is more than the {reach} bytes "
                           f"the config's {program.config.dram_addr_bits}-bit DRAM addresses "
                           "reach (dram_addr_bits)")
    if not isinstance(program.metadata, dict):
        raise ProgramError(f"program metadata must be a JSON object, got "
                           f"{type(program.metadata).__name__}")
    spans = _regions(program)
    alignment = program.config.dram_alignment
    needed = round_up(max(end for _, _, end in spans), alignment)
    if dram_bytes > needed and not shared:
        raise ProgramError(f"DRAM plan: dram_bytes {dram_bytes} is larger than the "
                           f"{needed} bytes its regions need")
    return _check_dram_accesses(program, spans)


def dram_image(program: Program) -> np.ndarray:
    """The program's DRAM image with instructions, micro-ops and constants placed, the
    other tensors zero.

    Raises
    ------
    ProgramError
        If an instruction or micro-op does not encode for the config.
    """
    config = program.config
    dram = np.zeros(int(program.dram_bytes), dtype=np.uint8)
    try:
        code = isa.encode_program(program.instructions, config)
        uops = isa.encode_uops(program.uops, config).astype("<u4").view(np.uint8)
    except isa.IsaError as error:
        raise ProgramError(f"program does not encode: {error}") from None
    dram[program.insn_offset:program.insn_offset + code.size] = code
    dram[program.uop_offset:program.uop_offset + uops.size] = uops
    for region in program.tensors:
        if region.role == "constant":
            place_constant(dram, region, config)
    return dram


def place_constant(dram: np.ndarray, region, config: HwConfig) -> None:
    """Write a constant region's bytes (`runtime.layout.constant`) into an image (verified
    plan: it fits)."""
    data = constant(region.layout, tuple(region.shape), config).reshape(-1).view(np.uint8)
    dram[region.dram_offset:region.dram_offset + data.size] = data


def verify_program(program: Program, **limits) -> dict[str, int]:
    """`verify_plan`, then every rule of `sim.checker` on the program's instructions.

    The data never changes what a program touches (addresses come from the
    instructions and the micro-op region, which no STORE may write), so one
    check with zero tensors holds for every input.

    Parameters
    ----------
    program : Program
    **limits
        ``max_uop_executions`` for `sim.checker.check_program`.

    Returns
    -------
    dict of str to int
        The counters a functional run reports (instructions, bytes, micro-ops).

    Raises
    ------
    ProgramError
        A bad header or DRAM plan.
    sim.errors.SimulationError
        A program that breaks a rule of the ISA, naming the instruction.
    """
    from vdla.sim.checker import check_program
    verify_plan(program)
    return check_program(program.config, dram_image(program), program.insn_offset,
                         len(program.instructions), **limits)
