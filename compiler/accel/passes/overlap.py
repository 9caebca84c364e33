"""Overlap: the ALU runs resets and epilogues beside the other thread's GEMMs.

The compute module has two units, the GEMM core and the ALU. A GEMM or ALU
instruction with ``overlap`` set waits only for the earlier instructions of its
own unit; every other compute instruction (and uop/acc LOADs and FINISH, which
belong to both units) waits for everything earlier. Instructions issue in
program order, so a later instruction never starts before an earlier one.

Two steps make the ALU work of one virtual thread hide behind the GEMMs of the
other:

`hoist_resets` (before the uop kernels are placed) moves each tile's ALU reset
from just before its first GEMMs into the GEMM stage that precedes it in
program order -- the other thread's -- after the GEMM instruction at which the
previous store of the slot (which reads the out rows a reset overwrites, so the
reset pops its token) has most likely finished. The move is only made when no
instruction it jumps over touches the reset rows, so the program's sequential
meaning is unchanged. A tile with a residual (`compiler.accel.lower`) has its
residual GEMM and ALU SHL in the reset stage too: they move with the reset,
and the SHL, which must wait for the residual GEMM, goes one GEMM of the
other thread later, so that it runs beside that GEMM instead of holding up
the tile's own GEMMs; where the target stage has a single GEMM, its outer
loop is cut in two for this (`_split_gemm`).

`mark_overlap` (on the flat stream) then sets ``overlap`` greedily, in program
order, on every GEMM/ALU instruction for which it is safe: instruction ``i`` of
unit ``U`` may overlap when every earlier instruction ``j`` of the other unit
that conflicts with it on acc/out entries (either writes) has completed before
``i`` starts, i.e. some instruction ``k`` with ``j < k < i`` waits for ``j``
(``k`` does not overlap, or is of ``j``'s unit, or belongs to both units).
Two instructions also conflict when they use the same acc bank, which the
units cannot share while they run side by side (`hw.isa`); virtual threads
give each thread's acc slot a bank of its own for that reason.
The result, for two threads and a tile per slot::

    GEMM  t      (overlap)      GEMMs of tile t, slot A
    ALU   reset  t+1 (overlap)  slot B, beside tile t's GEMMs (pops store of t-1)
    ...
    ALU   REQUANT t             waits for tile t's GEMMs (and everything earlier)
    GEMM  t+1    (overlap)      slot B, beside the REQUANT of slot A

A REQUANT reads what its tile's GEMMs wrote, so it never overlaps: it is the
barrier that also orders the resets before the next tile's GEMMs.
"""

from __future__ import annotations

import numpy as np

from vdla.compiler.accel import ir
from vdla.compiler.accel.passes.latency_hiding import accesses
from vdla.hw import isa
from vdla.hw.isa import MemType

__all__ = ["hoist_resets", "mark_overlap", "compute_unit", "GEMM_UNIT", "ALU_UNIT", "BOTH_UNITS"]

GEMM_UNIT, ALU_UNIT, BOTH_UNITS = "gemm", "alu", "both"


def compute_unit(instruction: isa.Instruction) -> str | None:
    """The compute unit of an instruction (``None`` for load/store module instructions)."""
    if isinstance(instruction, isa.Gemm):
        return GEMM_UNIT
    if isinstance(instruction, isa.Alu):
        return ALU_UNIT
    if isinstance(instruction, isa.Finish):
        return BOTH_UNITS
    if isinstance(instruction, isa.Load) and instruction.memory_type in (MemType.UOP,
                                                                         MemType.ACC):
        return BOTH_UNITS
    return None


def _cycles(insn: ir.Insn) -> int:
    instruction = insn.instruction
    return instruction.micro_ops if isinstance(instruction, (isa.Gemm, isa.Alu)) else 0


def _touches(insn: ir.Insn, rows: list[tuple[str, int, int]]) -> bool:
    reads, writes = accesses(insn)
    for scope, low, high in reads + writes:
        for other_scope, other_low, other_high in rows:
            if scope == other_scope and low < other_high and other_low < high:
                return True
    return False


def _conflicts(insn: ir.Insn, writes: list, reads: list) -> bool:
    """Whether ``insn`` touches rows a moved stage writes, or writes rows it reads."""
    return _touches(insn, writes) or any(
        scope == other and low < other_high and other_low < high
        for scope, low, high in accesses(insn)[1] for other, other_low, other_high in reads)


def _unit(part: list) -> str | None:
    return compute_unit(part[0].instruction) if isinstance(part[0], ir.Insn) else None


def _split_gemm(insn: ir.Insn, cycles: int) -> list[ir.Insn] | None:
    """``insn`` (a GEMM with its kernel not yet placed) as two GEMMs, the second one's
    outer loop trips just enough to last ``cycles``; None when its outer loop is too short.

    The second runs the same micro-ops with their indices advanced by the first's trips
    times each loop factor: together they do what ``insn`` did, in the same order.
    """
    instruction = insn.instruction
    per_trip = instruction.micro_ops // max(1, instruction.iter_out)
    if insn.kernel is None or per_trip == 0:
        return None
    tail = -(-cycles // per_trip) + 1
    head = instruction.iter_out - tail
    if head < 1:
        return None
    dst, src, wgt = insn.kernel
    moved = (dst + head * instruction.dst_factor_out, src + head * instruction.src_factor_out,
             wgt + head * instruction.wgt_factor_out)
    return [ir.Insn(instruction.replace(iter_out=head), insn.tensor, insn.kernel, insn.note),
            ir.Insn(instruction.replace(iter_out=tail), insn.tensor, moved, insn.note)]


def _parts(body: list) -> list[list]:
    """A reset stage's runs of instructions of one compute unit, in order: the ALU reset,
    then for a residual (`compiler.accel.lower`) its GEMM and its ALU shift."""
    parts = []
    for stmt in body:
        unit = compute_unit(stmt.instruction) if isinstance(stmt, ir.Insn) else None
        if parts and unit == parts[-1][0]:
            parts[-1][1].append(stmt)
        else:
            parts.append((unit, [stmt]))
    return [part for _, part in parts]


def hoist_resets(function: ir.Function) -> ir.Function:
    """Move each reset into the preceding GEMM stage of another thread (see module doc)."""
    stats = {"hoisted": 0, "kept": 0}
    if function.plan.threads < 2 or not function.plan.schedule.latency_hiding:
        function.stats["overlap"] = stats
        return function
    config = function.config
    stages = function.stages
    store_bytes = config.element_bytes("out")
    for position, stage in enumerate(stages):
        if stage.role != "reset" or not stage.body:
            continue
        parts = _parts(stage.body)
        target = next((p for p in range(position - 1, -1, -1)
                       if stages[p].role == "gemm" and stages[p].thread != stage.thread), None)
        # The other thread's GEMMs the parts may follow: (stage, index in its body).
        gemms = [(target, i) for i, s in enumerate(stages[target].body)
                 if isinstance(s, ir.Insn) and isinstance(s.instruction, isa.Gemm)] \
            if target is not None else []
        if not gemms:
            stats["kept"] += 1
            continue
        parts = _parts(stage.body)
        if (len(gemms) == 1 and len(parts) >= 2 and _unit(parts[-2]) == GEMM_UNIT
                and _unit(parts[-1]) == ALU_UNIT):
            # A residual's GEMM and SHL (after its reset, unless `passes.gemm_reset` made
            # the GEMM overwrite), and one GEMM to hide them behind: cut off the end of
            # that GEMM for the SHL to run beside (`_split_gemm`).
            p, i = gemms[0]
            tail = _split_gemm(stages[p].body[i], sum(_cycles(insn) for insn in parts[-1]))
            if tail is not None:
                stages[p].body[i:i + 1] = tail
                gemms.append((p, i + 1))
                stats["split"] = stats.get("split", 0) + 1
        rows = [w for insn in stage.body for w in accesses(insn)[1]]
        reads = [r for insn in stage.body for r in accesses(insn)[0]]
        # The store the reset waits for: the slot's latest one before it.
        store = next((stages[p] for p in range(position - 1, -1, -1)
                      if stages[p].kind == "store" and stages[p].thread == stage.thread), None)
        store_cycles = 0
        if store is not None:
            for insn in store.body:
                i = insn.instruction
                store_cycles += 8 + i.y_size * i.x_size * store_bytes // config.dram_bus_bytes
        # The ALU work that must hide behind the GEMMs: the reset and a residual's shift.
        reset_cycles = sum(_cycles(insn) for insn in stage.body
                           if isinstance(insn.instruction, isa.Alu))
        done, total = [], sum(_cycles(stages[p].body[i]) for p, i in gemms)
        running = 0
        for p, i in gemms:
            running += _cycles(stages[p].body[i])
            done.append(running)

        # Front end blocked on the store token while the GEMM core runs out
        # of issued work, plus the reset outlasting the remaining GEMMs.
        costs = [max(0, store_cycles - finished)
                 + max(0, max(finished, store_cycles) + reset_cycles - total) for finished in done]
        # An ALU part after a GEMM part (a residual's SHL after its GEMM) goes one of the
        # other thread's GEMMs later than the parts before it, so that it runs beside that
        # GEMM instead of stalling the core between the residual's GEMM and the tile's.
        later = [sum(1 for a, b in zip(parts[:k], parts[1:k + 1]) if _unit(a) == GEMM_UNIT
                     and _unit(b) == ALU_UNIT) for k in range(len(parts))]
        candidates = costs[:max(1, len(gemms) - later[-1])]
        choice = candidates.index(min(candidates))  # the earliest of the cheapest
        first, index = gemms[choice]
        jumped = stages[first].body[index + 1:] + [s for p in range(first + 1, position)
                                                   for s in stages[p].body]
        if any(isinstance(s, ir.Insn) and _conflicts(s, rows, reads) for s in jumped):
            stats["kept"] += 1
            continue
        # Last part first, so that the positions of the earlier ones stay valid.
        for number in range(len(parts) - 1, -1, -1):
            p, i = gemms[min(choice + later[number], len(gemms) - 1)]
            stages[p].body[i + 1:i + 1] = parts[number]
        stage.body = []
        stats["hoisted"] += 1
    function.stats["overlap"] = stats
    return function


def mark_overlap(stream: list[ir.Insn], config) -> dict:
    """Set ``overlap`` on every GEMM/ALU instruction where it is safe (in place).

    Returns counts of overlapping GEMM and ALU instructions.
    """
    depth = config.depth("acc")
    units = (GEMM_UNIT, ALU_UNIT)
    last_write = {u: np.full(depth, -1, dtype=np.int64) for u in units}
    last_read = {u: np.full(depth, -1, dtype=np.int64) for u in units}
    # The units may share no acc bank while they run side by side (hw/isa.py).
    bank_rows = config.acc_bank_rows
    last_bank = {u: np.full(config.acc_banks, -1, dtype=np.int64) for u in units}
    # barrier[u]: latest instruction that waited for every earlier one of unit u.
    barrier = {u: -1 for u in units}
    counts = {GEMM_UNIT: 0, ALU_UNIT: 0}
    for index, insn in enumerate(stream):
        unit = compute_unit(insn.instruction)
        if unit is None:
            continue
        if unit == BOTH_UNITS:
            barrier = {u: index for u in units}
            continue
        other = ALU_UNIT if unit == GEMM_UNIT else GEMM_UNIT
        reads, writes = accesses(insn)
        reads = [r for r in reads if r[0] == "acc"]
        writes = [w for w in writes if w[0] == "acc"]     # out mirrors acc row for row
        needed = -1
        for _, low, high in reads:
            needed = max(needed, int(last_write[other][low:high].max(initial=-1)))
        for _, low, high in writes:
            needed = max(needed, int(last_write[other][low:high].max(initial=-1)),
                         int(last_read[other][low:high].max(initial=-1)))
        banks = sorted({bank for _, low, high in reads + writes if high > low
                        for bank in range(low // bank_rows, (high - 1) // bank_rows + 1)})
        needed = max(needed, int(last_bank[other][banks].max(initial=-1)))
        overlap = needed < 0 or needed < barrier[other]
        insn.instruction = insn.instruction.replace(overlap=overlap)
        if overlap:
            counts[unit] += 1
            barrier[unit] = index
        else:
            barrier = {u: index for u in units}
        for _, low, high in reads:
            last_read[unit][low:high] = index
        for _, low, high in writes:
            last_write[unit][low:high] = index
        last_bank[unit][banks] = index
    return counts
