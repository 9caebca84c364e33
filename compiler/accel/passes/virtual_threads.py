"""Virtual threads: replicated SRAM slots and interleaved stages.

With ``V`` virtual threads every tile buffer (inp, wgt, acc/out, a residual's
tile) is replicated
into ``V`` slots at disjoint SRAM ranges, and tile ``j`` runs on thread
``j mod V`` within groups of ``V`` consecutive tiles. Inside a group the
threads' reduction steps are interleaved chunk by chunk (thread 0 chunk 0,
thread 1 chunk 0, thread 0 chunk 1, ...), so consecutive steps use different
slots.

The stage order then software-pipelines the loads: the loads of a step are
issued as soon as the compute of the previous step *on the same slot* has been
issued (never earlier, which would overwrite data still to be read in program
order). With two threads this gives ``L0 L1 C0 L2 C1 L3 C2 ...``: thread t+1's
loads run while thread t computes. With one thread the order is
``L0 C0 L1 C1 ...`` and nothing overlaps. The tokens that make the overlap
safe are inserted later by latency hiding, from the actual buffer accesses.
"""

from __future__ import annotations

import dataclasses

from vdla.compiler.accel import ir
from vdla.compiler.accel.schedule import AccLayout, acc_layout

__all__ = ["assign_virtual_threads"]

_REPLICATED = ("inp_tile", "wgt_tile", "acc_tile", "res_tile")


def assign_virtual_threads(function: ir.Function) -> ir.Function:
    """Replicate buffers per thread, rewrite tiles to use them, order the stages."""
    threads = function.plan.threads
    slots = _replicate(function, threads)
    units = []          # (thread, load stage, compute stages following it)
    memo = {}
    tiles = function.tiles
    for group_start in range(0, len(tiles), threads):
        group = tiles[group_start:group_start + threads]
        for thread, tile in enumerate(group):
            tile.thread = thread
            _retarget(tile, slots[thread], memo)
        chunks = max(len(tile.steps) for tile in group)
        for chunk in range(chunks):
            for tile in group:
                if chunk >= len(tile.steps):
                    continue
                load, compute = tile.steps[chunk]
                after = [compute]
                if chunk == 0 and tile.reset is not None:
                    after.insert(0, tile.reset)
                if chunk == len(tile.steps) - 1:
                    after += [tile.epilogue, tile.store]
                units.append((tile.thread, load, after))
    function.stages = _pipeline(units)
    function.stats["virtual_threads"] = {
        "threads": threads,
        "slot_entries": {b.name.split(".")[0]: b.entries for b in function.buffers
                         if b.name.endswith(".t0")},
    }
    return function


def _acc_layout(function: ir.Function, threads: int) -> AccLayout | None:
    """`compiler.accel.schedule.acc_layout` of this function's acc buffers."""
    slot = sum(b.entries for b in function.buffers
               if b.scope == "acc" and b.name in _REPLICATED)
    shared = sum(b.entries for b in function.buffers
                 if b.scope == "acc" and b.name not in _REPLICATED)
    return acc_layout(function.config, threads, slot, shared)


def _replicate(function: ir.Function, threads: int) -> list[dict[str, ir.Buffer]]:
    """Give each thread its own copy of each tile buffer; the bias stays shared
    unless each thread keeps a copy of it in its own acc banks (`acc_layout`)."""
    layout = _acc_layout(function, threads)
    replicated = _REPLICATED + (("bias",) if layout and layout.shared_copied else ())
    per_thread = [dict() for _ in range(threads)]
    buffers, next_base = [], {"inp": 0, "wgt": 0, "acc": 0}
    for buffer in function.buffers:
        if buffer.name not in replicated:
            continue
        for thread in range(threads):
            base = next_base[buffer.scope]
            if buffer.scope == "acc" and layout is not None:
                base += thread * layout.stride      # offset within the thread's banks
            else:
                next_base[buffer.scope] += buffer.entries
            copy = ir.Buffer(f"{buffer.name}.t{thread}", buffer.scope, buffer.entries, base)
            per_thread[thread][buffer.name] = copy
            buffers.append(copy)
        if buffer.scope == "acc" and layout is not None:
            next_base["acc"] += buffer.entries
    if layout is not None:
        next_base["acc"] = threads * layout.stride
    for buffer in function.buffers:
        if buffer.name not in replicated:
            buffer.base = next_base[buffer.scope]
            next_base[buffer.scope] += buffer.entries
            buffers.append(buffer)
    function.buffers = buffers
    return per_thread


def _retarget(tile: ir.Tile, slot: dict[str, ir.Buffer], memo: dict) -> None:
    """Point every buffer reference of a tile at its thread's slot.

    Statements are rebuilt, never mutated: tiles share identical nests, and
    one shared nest maps to one rebuilt nest per thread (``memo``).
    """
    stages = ([stage for step in tile.steps for stage in step] + [tile.epilogue, tile.store]
              + ([tile.reset] if tile.reset is not None else []))
    for stage in stages:
        stage.thread = tile.thread
        stage.body = [_rebuild(stmt, slot, tile.thread, memo) for stmt in stage.body]


def _rebuild(stmt, slot: dict[str, ir.Buffer], thread: int, memo: dict):
    key = (id(stmt), thread)
    if key in memo:
        return memo[key][1]
    def move(access):
        if access is None:
            return None
        return ir.Access(slot.get(access.buffer.name, access.buffer), access.index, access.lanes)
    if isinstance(stmt, ir.Loop):
        new = ir.Loop(stmt.var, stmt.extent, [_rebuild(s, slot, thread, memo) for s in stmt.body])
    elif isinstance(stmt, ir.Copy):
        new = dataclasses.replace(stmt, buffer=slot.get(stmt.buffer.name, stmt.buffer))
    elif isinstance(stmt, ir.Epilogue):
        new = dataclasses.replace(stmt, acc=slot.get(stmt.acc.name, stmt.acc))
    elif isinstance(stmt, ir.Mac):
        new = ir.Mac(move(stmt.acc), move(stmt.inp), move(stmt.wgt))
    elif isinstance(stmt, ir.Gemm):
        new = ir.Gemm(move(stmt.dst), move(stmt.src), move(stmt.wgt), stmt.reset)
    elif isinstance(stmt, ir.Alu):
        new = ir.Alu(stmt.op, move(stmt.dst), move(stmt.src), stmt.imm, stmt.reset)
    else:
        new = stmt
    memo[key] = (stmt, new)     # keeps stmt alive so its id stays unique
    return new


def _pipeline(units: list[tuple[int, ir.Stage, list[ir.Stage]]]) -> list[ir.Stage]:
    """Issue each unit's load right after the compute of the previous unit on its slot."""
    previous_same, last_on = [], {}
    for index, (thread, _, _) in enumerate(units):
        previous_same.append(last_on.get(thread, -1))
        last_on[thread] = index
    order, next_load, issued = [], 0, -1

    def issue_loads():
        nonlocal next_load
        while next_load < len(units) and previous_same[next_load] <= issued:
            order.append(units[next_load][1])
            next_load += 1

    issue_loads()
    for index, (_, _, after) in enumerate(units):
        assert next_load > index, "a step's loads must precede its compute"
        order.extend(after)
        issued = index
        issue_loads()
    return order
