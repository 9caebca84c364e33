"""Random legal programs for differential testing of the simulation tiers.

`generate(config, seed)` builds a DRAM image holding random data regions, a
micro-op pool and an instruction stream that exercises every instruction kind
the ISA has: inp/wgt loads with random padding, strides (also strides shorter
than a row) and sizes; uop and acc loads on compute; GEMM (accumulating and
reset) and every ALU op -- REQUANT included, with every shift, with and without
relu and bias register -- with immediate or register operands over random
micro-op ranges, loop counts and factors; stores of random out regions to a
result area of DRAM. GEMM and ALU instructions get ``overlap`` wherever it is
legal, and "bursts" of several GEMM/ALU instructions behind one uop load give
the two compute units something to run side by side. The same seed always
gives the same program.

Every program is legal by construction:

* Each SRAM entry a module reads was written earlier in the same program (the
  result never depends on the SRAMs' contents at start), every index stays in
  its buffer and every DRAM region in the image.
* Race-free: a dependency tracker keeps, per SRAM entry shared by two modules
  (inp, wgt: load -> compute; out: compute -> store), the last instruction of
  each module that wrote or read it. An instruction that conflicts with an
  earlier one of the other module gets a token: the producer's latest
  instruction pushes (or a token already in flight is popped) and the new
  instruction pops. Random extra ("eager") tokens make queues hold several
  tokens at once; filler instructions pop tokens that are in the way.
* Overlap only where legal: compute runs GEMM and ALU on two units, and an
  instruction with ``overlap`` waits only for its own unit. The generator
  keeps, per unit, the acc entries its latest instruction reads and writes
  while it may still be running for the other unit's later instructions
  (until an instruction without overlap, or a uop/acc LOAD, waits for both);
  ``overlap`` is set only when the new instruction's accesses and the other
  unit's kept ones are disjoint wherever either writes.
* Deadlock-free: every pop takes a token pushed by an instruction earlier in
  the stream, and no queue ever needs to hold more than ``token_queue_depth``
  tokens, whatever the command-queue depths and timing (see
  `check_token_discipline`). All tokens are popped by the end, FINISH is last.

At the end the program makes the final SRAM state visible in DRAM: every out
entry gets written (reset or copied from acc), the whole out buffer is stored
to a dump area, and (``dump_acc``) ALU shifts by 0, 8, 16 and 24 bits are each
followed by a store of the whole out buffer, exposing all 32 bits of every
accumulator. Comparing DRAM images therefore compares acc/out contents too.
"""

from __future__ import annotations

import numpy as np

from vdla.hw import isa
from vdla.hw.config import SRAM_KINDS, HwConfig
from vdla.hw.isa import (COMPUTE_MODULE as COMPUTE, QUEUE_FLAGS, STORE_MODULE as STORE, Alu,
                         AluOp, Finish, Gemm, Load, MemType, Store, Uop)
from vdla.testing.programs.compute import ComputeActions
from vdla.testing.programs.dram_image import DramImage
from vdla.testing.programs.loads import LoadActions
from vdla.testing.programs.micro_ops import MicroOps, true_runs
from vdla.testing.programs.options import GeneratorOptions, RandomProgram
from vdla.testing.programs.stores import StoreActions
from vdla.testing.programs.tokens import TokenStream

__all__ = ["generate"]


class _Generator(TokenStream, DramImage, MicroOps, LoadActions, ComputeActions, StoreActions):
    """One program's generation: the state every part shares, and the driver."""

    def __init__(self, config: HwConfig, seed: int, options: GeneratorOptions):
        self.config = config
        self.seed = seed
        self.options = options
        self.rng = np.random.default_rng(seed)
        self._init_tokens()
        self.counts = {"fillers": 0, "eager_pushes": 0, "retro_pushes": 0,
                       "feedback_loads": 0, "dram_relays": 0, "overlaps": 0,
                       "concurrent_overlaps": 0, "overlaps_refused": 0, "bursts": 0}
        self.stores_done = 0

        depth = {kind: config.depth(kind) for kind in SRAM_KINDS}
        self.depth = depth
        # Reserved entries: fillers use them, random instructions never touch them.
        self.inp_usable = depth["inp"] - 1        # inp[last]: load filler target
        self.uop_usable = depth["uop"] - 2        # uop[last]: compute filler target,
        self.acc_usable = depth["acc"] - 1        # uop[last-1]/acc[last]: store filler source
        self.reserved_uop_filler = depth["uop"] - 1
        self.reserved_uop_prologue = depth["uop"] - 2
        self.reserved_acc = depth["acc"] - 1
        # SRAM models
        self.init = {kind: np.zeros(depth[kind], dtype=bool) for kind in depth}
        self.uop_words = np.zeros(depth["uop"], dtype=np.uint32)
        # last local index of each module touching a shared entry
        self.last_load_write = {k: np.full(depth[k], -1, np.int64) for k in ("inp", "wgt")}
        self.last_compute_read = {k: np.full(depth[k], -1, np.int64) for k in ("inp", "wgt")}
        self.last_compute_write_out = np.full(depth["acc"], -1, np.int64)
        self.last_store_read_out = np.full(depth["acc"], -1, np.int64)
        # Per compute unit (GEMM, ALU): acc entries (read, written) of its latest
        # instruction while later instructions of the other unit may run beside
        # it; None once an instruction waiting for both units came after it.
        self.unit_busy: list[tuple[np.ndarray, np.ndarray] | None] = [None, None]
        self._plan_dram()

    # ------------------------------------------------------------------ program
    def _prologue(self):
        """Initialise the reserved out entry the store fillers read."""
        uop = Uop(dst=self.reserved_acc, src=0, wgt=0)
        placed = self._pool_alloc(isa.encode_uops([uop], self.config))
        self._emit(COMPUTE, Load(memory_type=MemType.UOP, sram_base=self.reserved_uop_prologue,
                                 dram_base=placed[0]), [], [])
        local = self._emit(COMPUTE, Gemm(reset=True, uop_begin=self.reserved_uop_prologue,
                                         uop_end=self.reserved_uop_prologue + 1), [], [])
        self.last_compute_write_out[self.reserved_acc] = local
        self.init["acc"][self.reserved_acc] = True
        self._append(STORE, Store(memory_type=MemType.OUT, sram_base=self.reserved_acc,
                                  dram_base=self.filler_sink // self.config.element_bytes("out")),
                     {COMPUTE: local}, allow_eager=False)

    def _whole_acc_loop(self, make, dst_runs, uop_slot: int):
        """Emit ``make(fields)`` instructions covering acc runs, one uop at ``uop_slot``."""
        limit = (1 << isa.ITER_BITS) - 1
        for start, length in dst_runs:
            position = start
            while position < start + length:
                chunk = min(limit, start + length - position)
                uop = Uop(dst=position, src=0, wgt=0)
                placed = self._pool_alloc(isa.encode_uops([uop], self.config))
                self._append(COMPUTE, Load(memory_type=MemType.UOP, sram_base=uop_slot,
                                           dram_base=placed[0]), {}, allow_eager=False)
                entries = np.arange(position, position + chunk)
                fields = dict(uop_begin=uop_slot, uop_end=uop_slot + 1, iter_out=chunk,
                              dst_factor_out=1)
                local = self._append(COMPUTE, make(fields),
                                     {STORE: int(self.last_store_read_out[entries].max())},
                                     allow_eager=False)
                self.last_compute_write_out[entries] = local
                self.init["acc"][entries] = True
                position += chunk

    def _epilogue(self):
        # Pop every token still in flight so the queues end empty.
        for queue in QUEUE_FLAGS:
            while self._pending(queue):
                self._filler(queue[1], pop_from=queue)
        # Every out entry gets a defined value: reset what was never written (every
        # acc write, loads included, also writes out, so written acc means written out).
        uop_slot = 0
        self._whole_acc_loop(lambda f: Gemm(reset=True, **f), true_runs(~self.init["acc"]),
                             uop_slot)
        self._dump_out(0)
        if self.options.dump_acc:
            for k, shift in enumerate((0, 8, 8, 8), start=1):
                self._whole_acc_loop(lambda f, s=shift: Alu(alu_op=AluOp.SHR, use_imm=True,
                                                            imm=s, **f),
                                     [(0, self.acc_usable)], uop_slot)
                self._dump_out(k)
        for queue in QUEUE_FLAGS:
            assert self._pending(queue) == 0, queue
        self._emit(COMPUTE, Finish(), [], [])

    def build(self) -> RandomProgram:
        rng = self.rng
        self._prologue()
        actions = int(rng.integers(self.options.actions[0], self.options.actions[1] + 1))
        kinds = ["inp", "wgt", "acc", "uop", "gemm", "alu", "store"]
        weights = np.array([3, 2, 1.5, 0.7, 4, 3, 2.5])
        # per-program bias so some programs are load-heavy, some compute-heavy
        weights = weights * rng.uniform(0.3, 1.7, size=len(weights))
        # the first actions give compute something to work on
        forced = [str(k) for k in rng.permutation(["inp", "wgt", "acc"])] + ["gemm", "alu"]
        done = 0
        attempts = 0
        while done < actions and attempts < actions * 20:
            attempts += 1
            if forced:
                kind = forced.pop(0)
            else:
                kind = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
            if kind in ("inp", "wgt"):
                ok = self._load_inp_wgt(kind)
            elif kind == "acc":
                ok = self._load_acc()
            elif kind == "uop":
                ok = self._load_uop_random()
            elif kind in ("gemm", "alu"):
                if rng.random() < self.options.burst_probability:
                    ok = self._compute_burst()
                else:
                    ok = self._compute_loops(kind)
            else:
                ok = self._store()
            done += bool(ok)
        self._epilogue()
        instructions = [insn for _, insn in self.stream]
        return self._image(instructions)


def generate(config: HwConfig, seed: int, options: GeneratorOptions | None = None) -> RandomProgram:
    """A random legal program for ``config``; the same seed gives the same program.

    Parameters
    ----------
    config : HwConfig
    seed : int
    options : GeneratorOptions, optional

    Returns
    -------
    RandomProgram
    """
    return _Generator(config, int(seed), options or GeneratorOptions()).build()
