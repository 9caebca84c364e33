"""Why a program did not finish on the RTL: cycle limits and the hang report.

`default_cycle_limit` bounds a program's cycles from its instructions;
`hang_message` turns the chip's status outputs (queue occupancies,
instructions retired per module) and the DRAM model's queues into the
`sim.errors.DeadlockError` text naming where each module stopped and why.
"""

from __future__ import annotations

import numpy as np

from vdla.hw.config import HwConfig
from vdla.hw.counters import STATUS_BITS
from vdla.sim.rtl.model import RtlModel

__all__ = ["default_cycle_limit", "decode_instructions", "hang_message"]

# Cycle limit when the program cannot be decoded to estimate its length.
FALLBACK_CYCLE_LIMIT = 50_000_000
def decode_instructions(config: HwConfig, dram: np.ndarray, insn_offset: int,
                         insn_count: int) -> list | None:
    from vdla.hw import isa
    try:
        return isa.decode_program(dram[insn_offset:insn_offset + insn_count * isa.INSN_BYTES],
                                  config)
    except (isa.IsaError, ValueError):
        return None


def default_cycle_limit(config: HwConfig, instructions: list | None) -> int:
    """A generous bound on a program's cycles: 8x a serial estimate plus 100 k.

    The estimate charges every instruction a fixed overhead, every load and
    store row a full read latency, every element its bus beats and every
    micro-op one cycle, as if nothing overlapped.
    """
    from vdla.hw import isa
    if instructions is None:
        return FALLBACK_CYCLE_LIMIT
    latency = config.dram_read_latency
    estimate = 0
    for insn in instructions:
        estimate += 64 + latency
        if isinstance(insn, (isa.Load, isa.Store)):
            kind = insn.memory_type.kind
            estimate += insn.padded_y * (latency + 8 + insn.padded_x * config.beats(kind))
        elif isinstance(insn, (isa.Gemm, isa.Alu)):
            estimate += insn.iter_out * insn.iter_in * (max(0, insn.uop_end - insn.uop_begin) + 4)
    return 100_000 + 8 * estimate


def _blocked_instructions(instructions: list | None, status: dict[str, int],
                          tokens: dict[str, int], depth: int) -> tuple[list[str], int | None]:
    """Where each module stopped, from its retired count: ``["compute blocked at ..."]``."""
    from vdla.hw import isa
    from vdla.sim.errors import describe_instruction
    if instructions is None:
        return [], None
    order = isa.MODULES
    queues: dict[str, list[int]] = {module: [] for module in order}
    for index, insn in enumerate(instructions):
        queues[isa.MODULES[isa.module_of(insn)]].append(index)
    lines, first = [], None
    for position, module in enumerate(order):
        retired = status.get(f"retired_{module}")
        queue = queues[module]
        if retired is None or len(queue) >= 1 << STATUS_BITS:  # status counters wrap
            continue
        if retired >= len(queue):
            lines.append(f"{module} done ({len(queue)} instructions)")
            continue
        index = queue[retired]
        insn = instructions[index]
        first = index if first is None else min(first, index)
        waits, fulls = [], []
        for flag in isa.DEPENDENCY_FLAGS:
            queue = isa.flag_queue(position, flag) if getattr(insn, flag) else None
            if queue is None:
                continue
            label = "->".join(isa.MODULES[m] for m in queue)
            held = tokens.get(isa.TOKEN_QUEUES[queue], 0)
            if flag.startswith("pop") and held == 0:
                waits.append(f"{label} (empty)")
            elif flag.startswith("push") and held >= depth:
                fulls.append(f"{label} (full, {depth})")
        where = describe_instruction(index, insn)
        if waits:
            lines.append(f"{module} blocked at {where} waiting to pop from {', '.join(waits)}")
        elif fulls:
            lines.append(f"{module} blocked after {where} pushing into {', '.join(fulls)}")
        else:
            lines.append(f"{module} stopped at {where} (not waiting for a token)")
    return lines, first


def hang_message(config: HwConfig, model: RtlModel, insn_count: int, limit: int,
                 instructions: list | None) -> tuple[str, int | None]:
    """The `DeadlockError` text of a run that did not finish, and the index of the
    first instruction a module stopped at (None when unknown)."""
    status = model.status()
    queues = model.memory_queues()
    tokens = {name.removeprefix("tokens_"): value for name, value in status.items()
              if name.startswith("tokens_")}
    token_text = ", ".join(f"{name.replace('_to_', '->')} {value}"
                           for name, value in tokens.items())
    commands = ", ".join(f"{name.removeprefix('cmds_')} {status[name]}"
                         for name in status if name.startswith("cmds_"))
    retired = ", ".join(f"{name.removeprefix('retired_')} {status[name]}"
                        for name in status if name.startswith("retired_"))
    other = ", ".join(f"{name} {value}" for name, value in status.items()
                      if not name.startswith(("tokens_", "cmds_", "retired_", "fetched")))
    blocked, first = _blocked_instructions(instructions, status, tokens,
                                           config.token_queue_depth)
    lines = [
        f"the program did not finish within {limit} cycles (rtl, config {config.name!r}): "
        f"fetched {status.get('fetched', '?')} of {insn_count} instructions",
        *[f"  {line}" for line in blocked],
        f"  retired: {retired}",
        f"  token queues: {token_text}",
        f"  command queues waiting: {commands}",
        f"  DRAM: {queues['read_bursts_pending']} read bursts pending, "
        f"{queues['write_bursts_owed_data']} write bursts owed data"
        + (f", {queues['write_bursts_owed_response']} owed a response"
           if config.memory_system.write_response else ""),
    ]
    if other:
        lines.append(f"  other status: {other}")
    if not blocked:
        lines.append("  (a module waits for a dependency token that is never pushed, or the "
                     "program lacks FINISH)")
    return "\n".join(lines), first
