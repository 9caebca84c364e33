"""Latency hiding: dependency tokens between the load, compute and store modules.

The stage order is the program's meaning: executed one instruction at a time
in that order, it computes the layer. The three modules, though, run their own
queues concurrently, so every pair of instructions on *different* modules that
touch the same SRAM entries (read after write, write after read, write after
write) must be ordered by a token. This pass derives those conflicts from the
instructions themselves (the SRAM ranges each LOAD, STORE, GEMM and ALU reads
and writes, micro-ops and loop factors included) and inserts the fewest
tokens that keep them:

* walking in program order, instruction ``I`` on module ``B`` must follow the
  latest conflicting instruction ``P`` on a neighbouring module ``A``;
* if ``P`` is not yet ordered before ``B``'s position (no earlier pop already
  covers it), ``I`` pops a token from ``A`` and ``P`` pushes one to ``B``.

Tokens are FIFO per queue and pushes are placed on the producers in order, so
the k-th pop always receives the k-th push; every push precedes its pop in
program order, so a stream that is in order cannot deadlock. Instructions on
the same module are ordered by their queue. Independent stages (a load into
thread 1's slot while compute reads thread 0's) get no token and overlap.

The stream ends with FINISH on compute, which pops from store (and load) when
their last instruction is not already ordered before it, so the program only
finishes once every store is done. ``serialize=True`` makes every instruction
wait for the previous instruction of each neighbouring module: the ablation
baseline without latency hiding.
"""

from __future__ import annotations

import numpy as np

from vdla.compiler.accel import ir
from vdla.compiler.errors import CompileError
from vdla.hw import isa

__all__ = ["insert_tokens", "accesses", "LOAD", "COMPUTE", "STORE"]

LOAD, COMPUTE, STORE = isa.LOAD_MODULE, isa.COMPUTE_MODULE, isa.STORE_MODULE


def _span(values: np.ndarray, instruction, name: str) -> tuple[int, int]:
    """Conservative [low, high) of an index over the uops and both loops."""
    low = int(values.min())
    high = int(values.max())
    for level, iters in (("out", instruction.iter_out), ("in", instruction.iter_in)):
        factor = getattr(instruction, f"{name}_factor_{level}")
        high += (iters - 1) * factor
    return low, high + 1


def accesses(insn: ir.Insn) -> tuple[list, list]:
    """``(reads, writes)`` of an instruction: lists of ``(scope, low, high)`` SRAM ranges.

    micro-op buffer accesses are left out: only compute touches it, in order.
    """
    instruction = insn.instruction
    if isinstance(instruction, isa.Load):
        span = (instruction.sram_base,
                instruction.sram_base + instruction.padded_y * instruction.padded_x)
        scope = instruction.memory_type.kind
        if scope == "uop":
            return [], []
        # An acc load may also refresh the out mirror: treat it as writing both.
        scopes = ("acc", "out") if scope == "acc" else (scope,)
        return [], [(s, *span) for s in scopes]
    if isinstance(instruction, isa.Store):
        return [("out", instruction.sram_base,
                 instruction.sram_base + instruction.y_size * instruction.x_size)], []
    if isinstance(instruction, (isa.Gemm, isa.Alu)):
        dst_values, src_values, wgt_values = insn.kernel
        dst = _span(dst_values, instruction, "dst")
        writes = [("acc", *dst), ("out", *dst)]
        reads = []
        if isinstance(instruction, isa.Gemm):
            if not instruction.reset:
                reads = [("acc", *dst), ("inp", *_span(src_values, instruction, "src")),
                         ("wgt", *_span(wgt_values, instruction, "wgt"))]
        elif not instruction.reset:
            reads = [("acc", *dst)]
            if not instruction.use_imm:
                reads.append(("acc", *_span(src_values, instruction, "src")))
        return reads, writes
    return [], []


def insert_tokens(function: ir.Function, serialize: bool = False) -> ir.Function:
    """Flatten the stages into ``function.instructions`` with dependency flags set."""
    config = function.config
    stream = [stmt for stage in function.all_stages() for stmt in stage.body]
    for stmt in stream:
        if not isinstance(stmt, ir.Insn):
            raise CompileError(f"latency hiding: unlowered statement {type(stmt).__name__}")
    stream.append(ir.Insn(isa.Finish(), note="finish"))
    # Only SRAMs two modules touch can race: inp/wgt (load writes, compute
    # reads) and out (compute writes, store reads). acc and uop belong to
    # compute alone. Load and store share nothing, so only neighbours conflict.
    shared = ("inp", "wgt", "out")
    # last_write[m][scope][entry] / last_read[...]: program index of the latest
    # access by module m (-1: none).
    last_write = [{s: np.full(config.depth(s), -1, dtype=np.int64) for s in shared}
                  for _ in range(3)]
    last_read = [{s: np.full(config.depth(s), -1, dtype=np.int64) for s in shared}
                 for _ in range(3)]
    last_any = [-1, -1, -1]
    covered = {}            # (producer module, consumer module) -> latest ordered index
    flags = [dict() for _ in stream]
    tokens = {"->".join(isa.MODULES[m] for m in queue): 0 for queue in isa.TOKEN_QUEUES}
    # The modules with a token queue into each module.
    producers = {module: tuple(p for p, c in isa.TOKEN_QUEUES if c == module)
                 for module in range(len(isa.MODULES))}
    for index, insn in enumerate(stream):
        module = isa.module_of(insn.instruction)
        is_finish = isinstance(insn.instruction, isa.Finish)
        reads, writes = accesses(insn)
        reads = [r for r in reads if r[0] in shared]
        writes = [w for w in writes if w[0] in shared]
        for other in producers[module]:
            already = covered.get((other, module), -1)
            if last_any[other] <= already:
                continue        # everything the other module did is already ordered
            if serialize or is_finish:
                needed = last_any[other]
            else:
                needed = -1
                for scope, low, high in reads:
                    needed = max(needed, int(last_write[other][scope][low:high].max(initial=-1)))
                for scope, low, high in writes:
                    needed = max(needed, int(last_write[other][scope][low:high].max(initial=-1)),
                                 int(last_read[other][scope][low:high].max(initial=-1)))
            if needed <= already:
                continue
            # The producer's instruction pushes, this one pops.
            push_flag, pop_flag = isa.QUEUE_FLAGS[(other, module)]
            flags[index][pop_flag] = True
            flags[needed][push_flag] = True
            covered[(other, module)] = needed
            tokens[f"{isa.MODULES[other]}->{isa.MODULES[module]}"] += 1
        for scope, low, high in reads:
            last_read[module][scope][low:high] = index
        for scope, low, high in writes:
            last_write[module][scope][low:high] = index
        last_any[module] = index
    for insn, flag in zip(stream, flags):
        if flag:
            insn.instruction = insn.instruction.replace(**flag)
    function.instructions = stream
    function.stats["latency_hiding"] = {"serialised": serialize, "tokens": tokens}
    return function
