"""Happens-before of an instruction stream, computed independently of the compiler.

`run_tokens` plays the three module queues with FIFO token queues (no data),
giving each instruction a vector clock; it fails on deadlock or a pop without
a push. `exact_accesses` lists every SRAM entry an instruction touches by
enumerating its loops (no conservative ranges), for checking that every
cross-module conflict is ordered.
"""

from __future__ import annotations

from vdla.hw import isa
from vdla.hw.isa import MemType

LOAD, COMPUTE, STORE = 0, 1, 2


def module(instruction) -> int:
    if isinstance(instruction, isa.Load):
        return LOAD if instruction.memory_type in (MemType.INP, MemType.WGT) else COMPUTE
    if isinstance(instruction, isa.Store):
        return STORE
    return COMPUTE


def run_tokens(instructions):
    """Vector clocks ``[load, compute, store]`` (instructions done per module) per instruction.

    Returns ``(clocks, pushes, pops)`` with per-queue token counts.
    """
    queues = {m: [i for i, insn in enumerate(instructions) if module(insn) == m] for m in range(3)}
    tokens = {(a, b): [] for a, b in ((0, 1), (1, 0), (1, 2), (2, 1))}   # clocks in flight
    pushes = {q: 0 for q in tokens}
    pops = {q: 0 for q in tokens}
    position = [0, 0, 0]
    clock_of_module = [[0, 0, 0] for _ in range(3)]
    clocks = [None] * len(instructions)
    while any(position[m] < len(queues[m]) for m in range(3)):
        progressed = False
        for m in range(3):
            if position[m] >= len(queues[m]):
                continue
            index = queues[m][position[m]]
            insn = instructions[index]
            needed = []
            if insn.pop_prev:
                assert m > 0, "load pops from a previous module"
                needed.append((m - 1, m))
            if insn.pop_next:
                assert m < 2, "store pops from a next module"
                needed.append((m + 1, m))
            if any(not tokens[q] for q in needed):
                continue
            clock = list(clock_of_module[m])
            for q in needed:
                other = tokens[q].pop(0)
                pops[q] += 1
                clock = [max(a, b) for a, b in zip(clock, other)]
            clock[m] = position[m] + 1
            clocks[index] = clock
            clock_of_module[m] = clock
            if insn.push_prev:
                tokens[(m, m - 1)].append(clock)
                pushes[(m, m - 1)] += 1
            if insn.push_next:
                tokens[(m, m + 1)].append(clock)
                pushes[(m, m + 1)] += 1
            position[m] += 1
            progressed = True
        if not progressed:
            raise AssertionError(f"deadlock at module positions {position}")
    return clocks, pushes, pops, queues


def exact_accesses(instruction, uops):
    """``(reads, writes)`` as sets of ``(scope, entry)``."""
    reads, writes = set(), set()
    if isinstance(instruction, isa.Load):
        if instruction.memory_type == MemType.UOP:
            return reads, writes
        scope = instruction.memory_type.kind
        count = instruction.padded_y * instruction.padded_x
        writes = {(scope, instruction.sram_base + e) for e in range(count)}
        return reads, writes
    if isinstance(instruction, isa.Store):
        count = instruction.y_size * instruction.x_size
        return {("out", instruction.sram_base + e) for e in range(count)}, writes
    if isinstance(instruction, (isa.Gemm, isa.Alu)):
        i = instruction
        for outer in range(i.iter_out):
            for inner in range(i.iter_in):
                for u in uops[i.uop_begin:i.uop_end]:
                    dst = u.dst + outer * i.dst_factor_out + inner * i.dst_factor_in
                    src = u.src + outer * i.src_factor_out + inner * i.src_factor_in
                    writes |= {("acc", dst), ("out", dst)}
                    if isinstance(i, isa.Gemm):
                        if not i.reset:
                            wgt = u.wgt + outer * i.wgt_factor_out + inner * i.wgt_factor_in
                            reads |= {("inp", src), ("wgt", wgt)}
                    elif not i.use_imm:
                        reads.add(("acc", src))
    return reads, writes


def unordered_conflicts(instructions, uops):
    """Cross-module conflicting pairs (earlier, later) that happens-before does not order."""
    clocks, *_ = run_tokens(instructions)
    modules = [module(i) for i in instructions]
    position = {}
    counters = [0, 0, 0]
    for index, m in enumerate(modules):
        counters[m] += 1
        position[index] = counters[m]
    access = [exact_accesses(i, uops) for i in instructions]
    problems = []
    for later in range(len(instructions)):
        reads, writes = access[later]
        for earlier in range(later):
            if modules[earlier] == modules[later]:
                continue
            e_reads, e_writes = access[earlier]
            conflict = (reads & e_writes) or (writes & e_writes) or (writes & e_reads)
            # out entries are only checked where the store reads them.
            if conflict and clocks[later][modules[earlier]] < position[earlier]:
                problems.append((earlier, later))
    return problems


# ------------------------------------------------------------------ overlap
GEMM_UNIT, ALU_UNIT, BOTH_UNITS = "gemm", "alu", "both"


def compute_unit(instruction):
    """GEMM or ALU unit of a compute instruction; uop/acc LOADs and FINISH belong to both."""
    if isinstance(instruction, isa.Gemm):
        return GEMM_UNIT
    if isinstance(instruction, isa.Alu):
        return ALU_UNIT
    if module(instruction) == COMPUTE:
        return BOTH_UNITS
    return None


def waits_for(later, earlier) -> bool:
    """Does compute instruction ``later`` wait for the completion of the earlier ``earlier``?

    ISA: an instruction with ``overlap`` waits only for earlier instructions of
    its own unit (uop/acc LOADs belong to both); every other one waits for all.
    """
    if not getattr(later, "overlap", False):
        return True
    unit_later, unit_earlier = compute_unit(later), compute_unit(earlier)
    return BOTH_UNITS in (unit_later, unit_earlier) or unit_later == unit_earlier


def compute_done_before(instructions):
    """For each compute instruction ``i``: the earlier compute instructions complete when it starts.

    Instructions start in program order, so ``j`` is complete when ``i``
    starts iff some ``k`` with ``j < k <= i`` waits for ``j``. Returned as a
    dict ``i -> set of j``.
    """
    compute = [i for i, insn in enumerate(instructions) if module(insn) == COMPUTE]
    done = {}
    for position, i in enumerate(compute):
        finished = set()
        for j in compute[:position]:
            if any(waits_for(instructions[k], instructions[j])
                   for k in compute[compute.index(j) + 1:position + 1]):
                finished.add(j)
        done[i] = finished
    return done


def unordered_compute_conflicts(instructions, uops):
    """Pairs of compute instructions that may run at once and touch a common acc/out
    entry where either writes (the races the ISA forbids)."""
    done = compute_done_before(instructions)
    access = {i: exact_accesses(instructions[i], uops) for i in done}
    problems = []
    for i in done:
        reads, writes = access[i]
        for j in done:
            if j >= i or j in done[i]:
                continue
            e_reads, e_writes = access[j]
            if (reads & e_writes) or (writes & e_writes) or (writes & e_reads):
                problems.append((j, i))
    return problems
