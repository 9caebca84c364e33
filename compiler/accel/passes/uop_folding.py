"""Micro-op folding and the micro-op cache.

GEMM and ALU instructions run ``for i in iter_out: for j in iter_in: for u in
uops`` with each index advanced by ``i * factor_out + j * factor_in``. This
pass turns each compute loop nest (affine ``dst``/``src``/``wgt`` indices) into
as few instructions and micro-ops as the fields allow:

1. loops of extent 1 vanish and loops whose strides chain (``coef_outer ==
   coef_inner * extent_inner`` for every index, e.g. output rows and columns
   of a whole-width accumulator tile) fuse into one;
2. a loop longer than the 14-bit ``iter_*`` fields is split into two by a
   divisor; then the two longest loops whose strides fit the factor fields
   become the instruction's outer and inner loop;
3. the remaining loops are enumerated into the micro-op kernel; if that kernel
   is larger than a quarter of the uop buffer, outer remaining loops become
   separate instructions (each with its own kernel).

Accumulation is integer and wraps, so loop order never changes a result and
any loop may be chosen for folding.

`place_uops` then manages the uop buffer as a cache of kernels: identical
kernels (same micro-op words) share one copy in DRAM and are loaded into the
uop buffer only when not already resident (bump allocation; when full the
cache is flushed). The uop loads run on the compute module, in order with the
GEMMs, so they need no dependency tokens.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from vdla.compiler.accel import ir
from vdla.compiler.errors import CompileError
from vdla.hw import isa
from vdla.hw.isa import MemType, Opcode

__all__ = ["fold_uops", "fold_nest", "place_uops", "encode_kernel", "kernel_budget"]

MAX_ITER = (1 << isa.ITER_BITS) - 1


def kernel_budget(config) -> int:
    """Largest micro-op kernel one instruction gets: a quarter of the uop buffer.

    A quarter leaves room for several resident kernels in the cache
    (`place_uops`); the schedule's cost model counts instructions with the
    same budget.
    """
    return max(1, config.depth("uop") // 4)
_INDICES = ("dst", "src", "wgt")


@dataclasses.dataclass
class _Loop:
    name: str
    extent: int
    coefs: tuple[int, int, int]      # per index: dst, src, wgt


def fold_uops(function: ir.Function, max_folds: int = 2, max_kernel: int | None = None,
              cache: bool = True, place: bool = True) -> ir.Function:
    """Fold every compute nest into GEMM/ALU instructions, then place their kernels.

    Parameters
    ----------
    max_folds : int
        How many loops may go into ``iter_out``/``iter_in`` (2 normally; fewer
        only to measure what folding buys).
    max_kernel : int, optional
        Largest kernel per instruction; default `kernel_budget`.
    cache : bool
        Reuse resident kernels (False reloads the kernel before every instruction).
    place : bool
        Run `place_uops` at the end (False leaves it to the caller, for passes
        that move instructions between folding and placement).
    """
    config = function.config
    if max_kernel is None:
        max_kernel = kernel_budget(config)
    stats = {"nests": 0, "instructions": 0, "uops_executed": 0, "fused_loops": 0}
    # Tiles of the same shape on the same slot give identical nests: fold once.
    folded_by_signature = {}
    for stage in function.all_stages():
        body = []
        for stmt in stage.body:
            leaf = ir.loop_nest(stmt)[1] if isinstance(stmt, ir.Loop) else stmt
            if isinstance(leaf, (ir.Gemm, ir.Alu)):
                signature = _signature(stmt)
                if signature not in folded_by_signature:
                    folded_by_signature[signature] = fold_nest(stmt, config, max_folds,
                                                               max_kernel)
                templates, fused = folded_by_signature[signature]
                instructions = [ir.Insn(t.instruction, kernel=t.kernel, note=t.note)
                                for t in templates]
                stats["nests"] += 1
                stats["instructions"] += len(instructions)
                stats["fused_loops"] += fused
                stats["uops_executed"] += sum(i.instruction.micro_ops for i in instructions)
                body.extend(instructions)
            else:
                body.append(stmt)
        stage.body = body
    function.stats["uop_folding"] = stats
    return place_uops(function, cache=cache) if place else function


@functools.lru_cache(maxsize=64)
def _signature(stmt) -> tuple:
    """A hashable description of a nest that determines its folded instructions."""
    loops, leaf = ir.loop_nest(stmt) if isinstance(stmt, ir.Loop) else ([], stmt)
    accesses = [leaf.dst, leaf.src] + ([leaf.wgt] if isinstance(leaf, ir.Gemm) else [])
    return (tuple((loop.var, loop.extent) for loop in loops), type(leaf).__name__,
            getattr(leaf, "reset", None), getattr(leaf, "overwrite", None),
            getattr(leaf, "op", None), getattr(leaf, "imm", None),
            tuple(None if a is None else
                  (a.buffer.base, tuple(sorted(a.index.terms.items())), a.index.const)
                  for a in accesses))


def _factor_bits(config, opcode: Opcode) -> dict[str, int]:
    return {field.name: field.bits for field in isa.formats(config)[opcode]}


def fold_nest(stmt, config, max_folds: int = 2, max_kernel: int = 1 << 30):
    """Instructions (with unplaced kernels) for one GEMM/ALU loop nest.

    Returns
    -------
    (list of ir.Insn, int)
        The instructions in execution order and how many loop fusions happened.
    """
    loops, leaf = ir.loop_nest(stmt) if isinstance(stmt, ir.Loop) else ([], stmt)
    exprs = _absolute_indices(leaf)
    base = tuple(e.const for e in exprs)
    work = [_Loop(loop.var, loop.extent, tuple(e.coef(loop.var) for e in exprs))
            for loop in loops if loop.extent > 1]
    fusions = _fuse(work)
    work = _split_long(work)
    opcode = Opcode.GEMM if isinstance(leaf, ir.Gemm) else Opcode.ALU
    bits = _factor_bits(config, opcode)
    folded = _choose_folds(work, bits, opcode, max_folds)
    rest = [loop for loop in work if loop not in folded]
    outer, kernel_loops = _split_kernel(rest, max_kernel)
    fold_out = folded[0] if folded else None
    fold_in = folded[1] if len(folded) > 1 else None
    fields = {}
    for prefix, loop in (("out", fold_out), ("in", fold_in)):
        fields[f"iter_{prefix}"] = loop.extent if loop else 1
        for name, coef in zip(_INDICES, loop.coefs if loop else (0, 0, 0)):
            if opcode == Opcode.ALU and name == "wgt":
                continue
            fields[f"{name}_factor_{prefix}"] = coef
    # uop_begin/uop_end are placeholders until place_uops gives the kernel its place.
    fields["uop_end"] = math.prod(loop.extent for loop in kernel_loops)
    if opcode == Opcode.GEMM:
        template = isa.Gemm(reset=leaf.reset, overwrite=leaf.overwrite, **fields)
    else:
        template = isa.Alu(reset=leaf.reset, alu_op=leaf.op, use_imm=leaf.src is None,
                           imm=leaf.imm if leaf.imm is not None else 0, **fields)
    # Enumerate every (instruction, micro-op) index at once.
    loop_list = outer + kernel_loops
    shape = [loop.extent for loop in loop_list] or [1]
    count = math.prod(loop.extent for loop in outer)
    arrays = []
    for which in range(3):
        values = np.full(shape, base[which], dtype=np.int64)
        for axis, loop in enumerate(loop_list):
            if loop.coefs[which]:
                view = [1] * len(shape)
                view[axis] = loop.extent
                values = values + loop.coefs[which] * np.arange(loop.extent).reshape(view)
        arrays.append(values.reshape(count, -1))
    note = _describe(leaf)
    instructions = [ir.Insn(template, kernel=(arrays[0][i], arrays[1][i], arrays[2][i]),
                            note=note) for i in range(count)]
    return instructions, fusions


def _absolute_indices(leaf) -> list[ir.Affine]:
    """dst, src, wgt as absolute SRAM indices (0 where the intrinsic has none)."""
    def absolute(access):
        return access.index + access.buffer.base if access is not None else ir.Affine()
    if isinstance(leaf, ir.Gemm):
        return [absolute(leaf.dst), absolute(leaf.src), absolute(leaf.wgt)]
    return [absolute(leaf.dst), absolute(leaf.src), ir.Affine()]


def _fuse(loops: list[_Loop]) -> int:
    """Fuse loop pairs whose strides chain, in place; returns the number of fusions."""
    fusions = 0
    changed = True
    while changed:
        changed = False
        for outer in loops:
            for inner in loops:
                if outer is inner:
                    continue
                if all(co == ci * inner.extent for co, ci in zip(outer.coefs, inner.coefs)):
                    # The fused loop sits where the outer one was.
                    outer.name = f"{outer.name}.{inner.name}"
                    outer.extent *= inner.extent
                    outer.coefs = inner.coefs
                    loops.remove(inner)
                    fusions += 1
                    changed = True
                    break
            if changed:
                break
    return fusions


def _split_long(loops: list[_Loop]) -> list[_Loop]:
    """Split loops longer than the iter fields so that both halves can still fold."""
    result = []
    for loop in loops:
        if loop.extent <= MAX_ITER:
            result.append(loop)
            continue
        inner = _largest_divisor(loop.extent, MAX_ITER)
        if inner == 1:
            result.append(loop)     # a prime trip count: left to the kernel
            continue
        result.append(_Loop(loop.name + ".o", loop.extent // inner,
                            tuple(c * inner for c in loop.coefs)))
        result.append(_Loop(loop.name + ".i", inner, loop.coefs))
    return result


def _largest_divisor(value: int, limit: int) -> int:
    """Largest divisor of ``value`` that is at most ``limit``."""
    best = 1
    for candidate in range(1, math.isqrt(value) + 1):
        if value % candidate == 0:
            for divisor in (candidate, value // candidate):
                if divisor <= limit:
                    best = max(best, divisor)
    return best


def _choose_folds(loops: list[_Loop], bits: dict[str, int], opcode: Opcode,
                  max_folds: int) -> list[_Loop]:
    """The longest loops whose trip count and strides fit the instruction's fields."""
    def fits(loop: _Loop) -> bool:
        if loop.extent > MAX_ITER:
            return False
        for name, coef in zip(_INDICES, loop.coefs):
            if opcode == Opcode.ALU and name == "wgt":
                if coef:
                    return False
                continue
            if coef < 0 or coef >= 1 << bits[f"{name}_factor_out"]:
                return False
        return True
    candidates = sorted((loop for loop in loops if fits(loop)), key=lambda loop: -loop.extent)
    return candidates[:max_folds]


def _split_kernel(rest: list[_Loop], max_kernel: int) -> tuple[list[_Loop], list[_Loop]]:
    """Split remaining loops into instruction-level loops and kernel loops."""
    outer, kernel = [], list(rest)
    while kernel and math.prod(loop.extent for loop in kernel) > max_kernel:
        if len(kernel) > 1:
            outer.append(kernel.pop(0))
            continue
        loop = kernel[0]
        # One loop too long for a kernel: strip-mine it by its largest fitting divisor.
        inner = _largest_divisor(loop.extent, max_kernel)
        outer.append(_Loop(loop.name + ".o", loop.extent // inner,
                           tuple(c * inner for c in loop.coefs)))
        kernel = [_Loop(loop.name + ".i", inner, loop.coefs)]
    return outer, kernel


def _describe(leaf) -> str:
    if leaf.reset:
        return "reset"
    if isinstance(leaf, ir.Gemm):
        return "gemm overwrite" if leaf.overwrite else "gemm"
    return f"alu {leaf.op.name.lower()}"


def encode_kernel(kernel, config) -> np.ndarray:
    """Micro-op words (uint32) of a kernel, vectorised; checks every index fits.

    Raises
    ------
    CompileError
        If an index is negative or too wide for its micro-op field.
    """
    fields = isa.uop_fields(config)
    offsets = isa.field_offsets(fields)
    words = np.zeros(len(kernel[0]), dtype=np.uint64)
    for field, values in zip(fields, kernel):
        lsb, width = offsets[field.name]
        if len(values) and (values.min() < 0 or values.max() >= 1 << width):
            raise CompileError(f"micro-op {field.name} index {int(values.max())} does not fit "
                               f"its {width}-bit field")
        words |= values.astype(np.uint64) << np.uint64(lsb)
    return words.astype(np.uint32)


def place_uops(function: ir.Function, cache: bool = True) -> ir.Function:
    """Give every GEMM/ALU its uop range, inserting LOAD uop instructions as needed.

    When every distinct kernel fits the uop buffer at once (the usual case),
    one LOAD before the first GEMM/ALU brings them all in: a uop LOAD waits for
    every earlier compute instruction, so one in the steady state would stop
    the ALU from running beside the GEMM core.
    """
    config = function.config
    depth = config.depth("uop")
    dram_offsets, chunks, dram_size = {}, [], 0
    resident, next_free = {}, 0
    encoded = {}        # id(kernel) -> (kernel, words); kernels are shared between copies
    stats = {"kernels": 0, "uop_loads": 0, "uops_loaded": 0, "cache_hits": 0, "flushes": 0,
             "preloaded": False}
    if cache:
        for stage in function.all_stages():
            for stmt in stage.body:
                if isinstance(stmt, ir.Insn) and stmt.kernel is not None:
                    if id(stmt.kernel) not in encoded:
                        encoded[id(stmt.kernel)] = (stmt.kernel,
                                                    encode_kernel(stmt.kernel, config))
                    key = encoded[id(stmt.kernel)][1].tobytes()
                    if key not in dram_offsets:
                        dram_offsets[key] = dram_size
                        chunks.append(encoded[id(stmt.kernel)][1])
                        dram_size += len(chunks[-1])
        if 0 < dram_size <= depth:
            # Kernels sit in the uop buffer where they sit in DRAM.
            resident, next_free = dict(dram_offsets), dram_size
            stats.update(kernels=len(chunks), uop_loads=1, uops_loaded=dram_size,
                         preloaded=True)
            preload = ir.Insn(isa.Load(memory_type=MemType.UOP, sram_base=0, dram_base=0,
                                       y_size=1, x_size=dram_size, x_stride=dram_size),
                              tensor="uops", note="uop")
        else:
            dram_offsets, chunks, dram_size = {}, [], 0
    for stage in function.all_stages():
        body = []
        for stmt in stage.body:
            if not (isinstance(stmt, ir.Insn) and stmt.kernel is not None):
                body.append(stmt)
                continue
            if id(stmt.kernel) not in encoded:
                encoded[id(stmt.kernel)] = (stmt.kernel, encode_kernel(stmt.kernel, config))
            words = encoded[id(stmt.kernel)][1]
            size = len(words)
            if size > depth:
                raise CompileError(f"a {size}-uop kernel exceeds the {depth}-entry uop buffer")
            key = words.tobytes()
            if key not in dram_offsets:
                dram_offsets[key] = dram_size
                chunks.append(words)
                dram_size += size
                stats["kernels"] += 1
            if stats["preloaded"] and preload is not None:
                body.append(preload)
                preload = None
            if cache and key in resident:
                begin = resident[key]
                stats["cache_hits"] += 1
            else:
                if next_free + size > depth:
                    resident, next_free = {}, 0
                    stats["flushes"] += 1
                begin = next_free
                next_free += size
                resident[key] = begin
                body.append(ir.Insn(isa.Load(memory_type=MemType.UOP, sram_base=begin,
                                             dram_base=dram_offsets[key], y_size=1,
                                             x_size=size, x_stride=size),
                                    tensor="uops", note="uop"))
                stats["uop_loads"] += 1
                stats["uops_loaded"] += size
            stmt.instruction = stmt.instruction.replace(uop_begin=begin, uop_end=begin + size)
            body.append(stmt)
        stage.body = body
    function.uop_words = (np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint32))
    function.stats["uop_cache"] = stats
    return function
