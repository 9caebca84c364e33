"""The functional simulator: the ISA's semantics, executed bit-exactly in numpy.

`FunctionalSimulator` fetches the instruction stream from a DRAM image, sends
each instruction to the module that runs it (load, compute or store) and runs
the three in-order queues, synchronised only by the four dependency-token
queues, exactly as ``hw/isa.py`` describes. Each instruction executes
atomically, compute's in program order; the modules advance round-robin. It is
untimed (``cycles`` is None) but counts events.

Every rule a program must obey -- legal instructions and memory kinds, SRAM
and DRAM bounds, micro-op ranges, token balance, deadlock, and races between
modules and between compute's two units -- is checked by `sim.checker`, which
this simulator extends with the arithmetic: `_Machine` is a
`sim.checker.ProgramChecker` that also models the data SRAMs. So fsim and the
checker that guards every other tier can never disagree on what is legal.

GEMM and ALU instructions are vectorised over their whole loop nest (in chunks
that bound memory); see `_Machine._gemm` and `_Machine._alu` for when the ALU
must fall back to sequential order. The work is bounded up front (the
checker's micro-op limit) and a long run reports its progress.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from vdla.hw.config import HwConfig
from vdla.hw.isa import REQUANT_OPS, SHIFT_BITS, Alu, AluOp, REQUANT_RELU
from vdla.sim.backend import RunResult, register_backend
from vdla.sim.checker import MAX_UOP_EXECUTIONS, PROGRESS_SECONDS, ProgramChecker
from vdla.sim.errors import OptionError

__all__ = ["FunctionalSimulator"]

_SHIFT_MASK = (1 << SHIFT_BITS) - 1


def _wrap32(values: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of int64 values to int32."""
    return (values & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _imm_operand(insn: Alu) -> int:
    """The operand an ALU instruction with ``use_imm`` applies (REQUANT adds no bias)."""
    return 0 if insn.alu_op in REQUANT_OPS else insn.imm


def _alu_apply(op: AluOp, a: np.ndarray, b, imm: int) -> np.ndarray:
    """One ALU operation on int64 operands (sign-extended int32); result unwrapped.

    ``b`` is the operand (``imm``, ``acc[src]``, or 0 for REQUANT with
    ``use_imm``); REQUANT reads its shift and relu flag from ``imm``, and
    REQUANT_EVEN clears bit 0 of a tie (the bits its shift drops all zero).
    """
    if op in REQUANT_OPS:
        low = 0 if imm & REQUANT_RELU else -128
        total = _wrap32(a + b).astype(np.int64)
        shift = imm & _SHIFT_MASK
        shifted = total >> shift
        if op == AluOp.REQUANT_EVEN and shift:
            shifted = shifted & ~((total & ((1 << shift) - 1)) == 0).astype(np.int64)
        return np.clip(shifted, low, 127)
    if op == AluOp.MIN:
        return np.minimum(a, b)
    if op == AluOp.MAX:
        return np.maximum(a, b)
    if op == AluOp.ADD:
        return a + b
    if op == AluOp.SHR:
        return a >> (b & _SHIFT_MASK)
    if op == AluOp.SHL:
        return a << (b & _SHIFT_MASK)
    if op == AluOp.MUL:
        return a * b
    raise AssertionError(op)  # decode() already rejects unknown ALU ops


class FunctionalSimulator:
    """Bit-exact, untimed simulator of the accelerator (backend ``"fsim"``).

    Parameters
    ----------
    config : HwConfig
        The accelerator to simulate.
    check_races : bool, optional
        Track happens-before between modules and compute's two units and raise
        `RaceError` on a missing dependency token or a conflicting ``overlap``
        (default True). Turning it off saves a little time on programs already
        known to be correct.
    dump_sram : bool, optional
        Copy every SRAM's final contents into ``RunResult.details["sram"]``
        (``inp``, ``wgt``, ``acc``, ``out``, ``uop``; acc and out as
        ``(depth, batch, block_out)``), for tests that look inside.
    max_uop_executions : int, optional
        Refuse programs asking for more GEMM/ALU micro-op executions
        (`sim.checker.MAX_UOP_EXECUTIONS` by default).
    progress : callable, optional
        Told how many micro-op executions are done every ``progress_every``
        seconds of a long run (near the work limit, minutes).
    progress_every : float, optional
        Seconds between two progress lines (`sim.checker.PROGRESS_SECONDS`).
    **options
        Options of timed backends (``trace``, ``cycle_limit``) are rejected
        with a clear message: this tier has no cycles to trace or limit.
    """

    name = "fsim"
    checks_programs = True   # _Machine is a sim.checker.ProgramChecker

    def __init__(self, config: HwConfig, check_races: bool = True, dump_sram: bool = False,
                 max_uop_executions: int = MAX_UOP_EXECUTIONS,
                 progress: Callable[[str], None] | None = None,
                 progress_every: float | None = None, **options):
        if not isinstance(config, HwConfig):
            raise TypeError(f"fsim needs an HwConfig, got {type(config).__name__}")
        if options:
            raise OptionError(
                f"fsim does not support option(s) {', '.join(sorted(options))}: it is an "
                "untimed functional simulator (use a timed backend such as rtl for traces "
                "and cycle limits)")
        self.config = config
        self.check_races = bool(check_races)
        self.dump_sram = bool(dump_sram)
        self.max_uop_executions = int(max_uop_executions)
        self.progress = progress
        self.progress_every = PROGRESS_SECONDS if progress_every is None else progress_every

    def run(self, dram: np.ndarray, insn_offset: int, insn_count: int) -> RunResult:
        """Run the program in ``dram`` (1-D uint8, modified in place).

        Returns
        -------
        RunResult
            ``cycles`` is None; ``counters`` holds instructions per module,
            bytes moved per memory kind, micro-ops, MACs and token pushes.

        Raises
        ------
        InstructionError, AddressError, WorkLimitError, DeadlockError, RaceError, TokenError
            When the program cannot run as written (all `SimulationError`; the
            rules are `sim.checker`'s).
        """
        if not isinstance(dram, np.ndarray) or dram.dtype != np.uint8 or dram.ndim != 1:
            raise TypeError("fsim: the DRAM image must be a 1-D numpy uint8 array")
        if not dram.flags.c_contiguous or not dram.flags.writeable:
            raise ValueError("fsim: the DRAM image must be contiguous and writeable")
        machine = _Machine(self.config, dram, self.check_races, self.max_uop_executions,
                           self.progress, self.progress_every)
        machine.fetch(int(insn_offset), int(insn_count))
        machine.execute()
        details = {"finish_index": machine.finish_index, "instructions": int(insn_count)}
        if self.dump_sram:
            details["sram"] = {"inp": machine.inp.copy(), "wgt": machine.wgt.copy(),
                               "acc": machine.acc.reshape(len(machine.acc), self.config.batch,
                                                          -1).copy(),
                               "out": machine.out.reshape(len(machine.out), self.config.batch,
                                                          -1).copy(),
                               "uop": machine.uop.copy()}
        return RunResult(cycles=None, counters=dict(machine.counters), details=details)


class _Machine(ProgramChecker):
    """The state of one run: the checker's, plus the data SRAMs and the arithmetic."""

    activity = "fsim"

    def __init__(self, config: HwConfig, dram: np.ndarray, check_races: bool,
                 max_uop_executions: int, progress, progress_every: float):
        super().__init__(config, dram, check_races, max_uop_executions, progress, progress_every)
        for kind in ("inp", "wgt", "acc", "out"):
            self.sram[kind] = np.zeros((self.depth[kind], config.element_bytes(kind)), np.uint8)
        b, bi, bo = config.batch, config.block_in, config.block_out
        self.inp = self.sram["inp"].view(np.int8).reshape(-1, b, bi)
        self.wgt = self.sram["wgt"].view(np.int8).reshape(-1, bo, bi)
        self.acc = self.sram["acc"].view("<i4").reshape(-1, b * bo)
        self.out = self.sram["out"].view(np.int8).reshape(-1, b * bo)
        # GEMM partial sums, float64 (exact below 2^53); rows are zeroed after use.
        self.sums = np.zeros((self.depth["acc"], b * bo), np.float64)
        # float32 products are exact while one dot product stays below 2^24.
        self._product_dtype = np.float32 if bi <= 1024 else np.float64
        self._lane = np.arange(b * bo)
        self._overwrite = False     # of the GEMM running (`_gemm`)

    def _acc_written(self, entries) -> None:
        self.out[entries] = self.acc[entries].astype(np.int8)  # low 8 bits (hw/isa.py)

    def _gemm(self, index: int, insn, component: int, vc: np.ndarray) -> None:
        # The checker walks the loop nest; the chunks and the commit read the flag here.
        self._overwrite = insn.overwrite and not insn.reset
        super()._gemm(index, insn, component, vc)

    def _gemm_chunk(self, dst: np.ndarray, src: np.ndarray, wgt: np.ndarray) -> None:
        if self._overwrite:
            # Each entry keeps its last micro-op's product (chunks come in program order).
            reversed_first = np.unique(dst[::-1], return_index=True)[1]
            last = len(dst) - 1 - reversed_first
            dst, src, wgt = dst[last], src[last], wgt[last]
            self.sums[dst] = np.matmul(self.inp[src].astype(np.int64),
                                       self.wgt[wgt].astype(np.int64).transpose(0, 2, 1)
                                       ).reshape(len(dst), -1)
            return
        dtype, columns = self._product_dtype, len(self._lane)
        products = np.matmul(self.inp[src].astype(dtype),
                             self.wgt[wgt].astype(dtype).transpose(0, 2, 1))
        # One bincount over (row, lane) pairs of the touched span sums every
        # contribution to the same accumulator lane, in any order (exact).
        low, high = int(dst.min()), int(dst.max()) + 1
        slots = ((dst - low)[:, None] * columns + self._lane).reshape(-1)
        self.sums[low:high] += np.bincount(slots, weights=products.reshape(-1),
                                           minlength=(high - low) * columns).reshape(-1, columns)

    def _gemm_commit(self, touched: np.ndarray, reset: bool) -> None:
        if reset:
            self.acc[touched] = 0
            return
        old = 0 if self._overwrite else self.acc[touched].astype(np.int64)
        self.acc[touched] = _wrap32(old + self.sums[touched].astype(np.int64))
        self.sums[touched] = 0

    def _alu_chunk(self, insn: Alu, dst: np.ndarray, src: np.ndarray | None) -> None:
        """Apply one chunk of ALU micro-ops, vectorised whenever that keeps sequential order."""
        if insn.reset:
            self.acc[dst] = 0
            return
        depth = self.depth["acc"]
        op = insn.alu_op
        operand = np.int64(_imm_operand(insn)) if insn.use_imm else None
        count = len(dst)
        writes = np.bincount(dst, minlength=depth)
        if writes.max() <= 1:
            # Unique destinations: vectorising is exact unless a micro-op reads
            # an entry that an earlier micro-op of this chunk wrote.
            if src is not None:
                written_at = np.full(depth, count, dtype=np.int64)
                written_at[dst] = np.arange(count)
                if (written_at[src] < np.arange(count)).any():
                    return self._alu_sequential(insn, dst, src, operand)
                operand = self.acc[src].astype(np.int64)
            self.acc[dst] = _wrap32(_alu_apply(op, self.acc[dst].astype(np.int64), operand,
                                               insn.imm))
            return
        # Repeated destinations (e.g. max pooling): MIN/MAX/ADD commute, so an
        # unordered reduction is exact when no operand depends on this chunk.
        independent = src is None or not (writes[src] > 0).any()
        if op in (AluOp.MIN, AluOp.MAX, AluOp.ADD) and independent:
            if src is not None:
                operand = self.acc[src].astype(np.int64)
            ufunc = {AluOp.MIN: np.minimum, AluOp.MAX: np.maximum, AluOp.ADD: np.add}[op]
            touched = np.flatnonzero(writes)
            work = self.acc.astype(np.int64)
            ufunc.at(work, dst, operand)
            self.acc[touched] = _wrap32(work[touched])
            return
        self._alu_sequential(insn, dst, src, operand)

    def _alu_sequential(self, insn: Alu, dst, src, operand) -> None:
        acc = self.acc
        for k in range(len(dst)):
            value = operand if src is None else acc[src[k]].astype(np.int64)
            acc[dst[k]] = _wrap32(_alu_apply(insn.alu_op, acc[dst[k]].astype(np.int64), value,
                                             insn.imm))


register_backend("fsim", FunctionalSimulator,
                 run_options=("max_uop_executions", "progress", "progress_every"))
