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

import dataclasses
from typing import Any

import numpy as np

from vdla.hw import isa
from vdla.hw.config import HwConfig
from vdla.hw.isa import Alu, AluOp, Finish, Gemm, Instruction, Load, MemType, Store, Uop
from vdla.sim.errors import instruction_label
from vdla.hw.isa import COMPUTE_MODULE as COMPUTE, LOAD_MODULE as LOAD, MODULES, STORE_MODULE as STORE
from vdla.hw.isa import module_of

__all__ = ["GeneratorOptions", "RandomProgram", "generate", "check_token_discipline",
           "QUEUE_FLAGS"]

# (producer, consumer) -> (producer's push flag, consumer's pop flag)
QUEUE_FLAGS = {
    (LOAD, COMPUTE): ("push_next", "pop_prev"),
    (COMPUTE, LOAD): ("push_prev", "pop_next"),
    (COMPUTE, STORE): ("push_next", "pop_prev"),
    (STORE, COMPUTE): ("push_prev", "pop_next"),
}


@dataclasses.dataclass(frozen=True)
class GeneratorOptions:
    """Knobs of the generator (defaults exercise everything).

    Parameters
    ----------
    actions : (int, int)
        Range of random body actions (each one or two instructions).
    max_uops_per_insn : int
        Bound on ``iter_out * iter_in * (uop_end - uop_begin)`` of body GEMM/ALU.
    max_load_elements : int
        Bound on the padded size of one body load.
    eager_token_probability : float
        Chance that an instruction pushes a token nobody needs yet.
    eager_pop_probability : float
        Chance that an instruction pops a token in flight it does not need.
    max_pending_tokens : int
        Most tokens in flight per queue (also bounded by the queue depth).
    short_strides : bool
        Allow load strides shorter than a row (rows overlap in DRAM, or repeat).
    pad_uop_acc : bool
        Use padding on uop and acc loads as well as inp/wgt ones.
    dump_acc : bool
        Expose all four bytes of every accumulator at the end (else only out).
    feedback_stores : bool
        Let loads read back DRAM written by earlier stores (ordered through
        compute with a store -> compute -> load token chain).
    requant : bool
        Emit the fused ALU REQUANT (off for hardware without it).
    overlap : bool
        Set ``overlap`` on GEMM/ALU instructions where it is legal (hardware
        that runs compute in order may ignore the flag: results are the same).
    overlap_probability : float
        Chance that a GEMM/ALU where overlap is legal gets it.
    burst_probability : float
        Chance that a compute action is a burst of 2-4 GEMM/ALU instructions
        whose micro-ops come in one uop load (so the units can run together).
    """

    actions: tuple[int, int] = (20, 60)
    max_uops_per_insn: int = 64
    max_load_elements: int = 48
    eager_token_probability: float = 0.15
    eager_pop_probability: float = 0.5
    max_pending_tokens: int = 6
    short_strides: bool = True
    pad_uop_acc: bool = True
    dump_acc: bool = True
    feedback_stores: bool = True
    requant: bool = True
    overlap: bool = True
    overlap_probability: float = 0.7
    burst_probability: float = 0.35

    def replace(self, **changes) -> "GeneratorOptions":
        """A copy with ``changes`` applied (as `dataclasses.replace`)."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass
class RandomProgram:
    """A generated program and the DRAM image it runs in.

    Attributes
    ----------
    dram : numpy.ndarray
        The initial DRAM image (uint8). Backends modify images in place: run
        on ``dram.copy()``.
    insn_offset, insn_count : int
        Where the instruction stream sits (bytes) and how many instructions.
    instructions : list of Instruction
    regions : dict of str to (int, int)
        Byte ``(offset, size)`` of every DRAM region (``insn``, ``uop``,
        ``inp``, ``wgt``, ``acc``, ``result``, ``dump``).
    summary : dict
        Counts of instruction kinds, tokens and fillers (for reports).
    """

    config: HwConfig
    seed: int
    options: GeneratorOptions
    dram: np.ndarray
    insn_offset: int
    insn_count: int
    instructions: list[Instruction]
    regions: dict[str, tuple[int, int]]
    summary: dict[str, Any]

    def run(self, backend) -> tuple[np.ndarray, Any]:
        """Run on a backend; returns ``(final DRAM image, RunResult)``."""
        image = self.dram.copy()
        result = backend.run(image, self.insn_offset, self.insn_count)
        return image, result

    def describe_difference(self, expected: np.ndarray, actual: np.ndarray) -> str:
        """Where two final DRAM images differ, by region and element (for failure messages)."""
        diff = np.flatnonzero(expected != actual)
        if not len(diff):
            return "images equal"
        lines = [f"{len(diff)} byte(s) differ"]
        for name, (offset, size) in self.regions.items():
            inside = diff[(diff >= offset) & (diff < offset + size)]
            if len(inside):
                first = int(inside[0])
                lines.append(f"  {name}: {len(inside)} bytes, first at +{first - offset} "
                             f"(byte {first}): expected {expected[first]:#04x}, "
                             f"got {actual[first]:#04x}")
        return "\n".join(lines)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs ``(start, length)`` of True in a boolean array."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b - a)) for a, b in zip(edges[::2], edges[1::2])]


class _Generator:
    def __init__(self, config: HwConfig, seed: int, options: GeneratorOptions):
        self.config = config
        self.seed = seed
        self.options = options
        self.rng = np.random.default_rng(seed)
        self.stream: list[list] = []            # [module, instruction]
        self.module_positions: list[list[int]] = [[], [], []]  # local index -> stream position
        # token queues: push stream positions and local indices, pops done
        self.push_positions = {q: [] for q in QUEUE_FLAGS}
        self.push_locals = {q: [] for q in QUEUE_FLAGS}
        self.pop_positions = {q: [] for q in QUEUE_FLAGS}
        self.covered = {q: -1 for q in QUEUE_FLAGS}   # producer local index known done
        self.token_depth = config.token_queue_depth
        self.max_pending = max(0, min(options.max_pending_tokens, self.token_depth - 1))
        self.eager = options.eager_token_probability if self.max_pending > 0 else 0.0
        self.counts = {"fillers": 0, "eager_pushes": 0, "retro_pushes": 0,
                       "feedback_loads": 0, "dram_relays": 0, "overlaps": 0,
                       "concurrent_overlaps": 0, "overlaps_refused": 0, "bursts": 0}
        self.stores_done = 0

        depth = {kind: config.depth(kind) for kind in ("uop", "inp", "wgt", "acc")}
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

    # ------------------------------------------------------------------ DRAM plan
    def _plan_dram(self):
        config, rng = self.config, self.rng
        align = config.dram_alignment
        self.regions: dict[str, tuple[int, int]] = {}
        self.region_elements: dict[str, int] = {}
        chunks: list[tuple[int, np.ndarray]] = []
        cursor = int(rng.integers(0, 4)) * align   # data does not always start at 0

        def place(name, nbytes, data=None):
            nonlocal cursor
            offset = cursor
            self.regions[name] = (offset, nbytes)
            if data is not None:
                chunks.append((offset, data))
            cursor = -(-(offset + nbytes + int(rng.integers(0, 3)) * align) // align) * align
            return offset

        for kind, count in (("inp", int(rng.integers(32, 160))),
                            ("wgt", int(rng.integers(16, 64))),
                            ("acc", int(rng.integers(16, 96)))):
            nbytes = count * config.element_bytes(kind)
            if kind == "acc":
                values = self._random_acc_values(count * config.element_bytes("acc") // 4)
                data = values.astype("<i4").view(np.uint8)
            else:
                data = rng.integers(-128, 128, size=nbytes, dtype=np.int64).astype(np.int8).view(np.uint8)
            place(kind, nbytes, data)
            self.region_elements[kind] = count
        out_bytes = config.element_bytes("out")
        self.result_elements = int(rng.integers(64, 256))
        place("result", self.result_elements * out_bytes,
              rng.integers(0, 256, size=self.result_elements * out_bytes,
                           dtype=np.int64).astype(np.uint8))
        dumps = 5 if self.options.dump_acc else 1
        self.dump_elements = self.depth["acc"] * dumps
        place("dump", self.dump_elements * out_bytes)
        self.filler_sink = place("filler_sink", max(align, out_bytes))
        # last store writing / load or compute instruction reading each result byte
        result_bytes = self.regions["result"][1]
        self.result_writer = np.full(result_bytes, -1, np.int64)
        self.result_load_reader = np.full(result_bytes, -1, np.int64)
        self.result_compute_reader = np.full(result_bytes, -1, np.int64)
        # The micro-op pool comes last but one: it grows as instructions need
        # micro-ops, and the instructions follow it once its size is known. It
        # starts with junk words (valid index fields, nothing above them) that
        # random uop loads may pick up.
        self.uop_offset = cursor
        self.uop_mask = (1 << config.uop_index_bits) - 1
        junk = int(rng.integers(8, 64))
        self.uop_pool = [int(w) & self.uop_mask
                         for w in rng.integers(0, 1 << HwConfig.UOP_BITS, size=junk, dtype=np.uint64)]
        self.chunks = chunks

    def _random_acc_values(self, count: int) -> np.ndarray:
        rng = self.rng
        style = rng.integers(0, 3)
        if style == 0:
            return rng.integers(-(1 << 31), 1 << 31, size=count, dtype=np.int64)
        if style == 1:
            return rng.integers(-300, 300, size=count, dtype=np.int64)
        values = rng.integers(-(1 << 31), 1 << 31, size=count, dtype=np.int64)
        small = rng.random(count) < 0.5
        values[small] = rng.integers(-4, 4, size=int(small.sum()))
        return values

    def _element_base(self, region: str, kind: str) -> int:
        offset = self.regions[region][0]
        return offset // self.config.element_bytes(kind)

    # ------------------------------------------------------------------ tokens
    def _pending(self, queue) -> int:
        return len(self.push_positions[queue]) - len(self.pop_positions[queue])

    def _bound_ok_with_push_at(self, queue, position: int) -> bool:
        """Whether an extra push at stream ``position`` keeps the queue within its depth.

        The quantity bounded is, for every push at stream position s, the pushes
        at positions <= s minus the pops at positions < s: the most tokens the
        queue can hold when that push happens, whatever the timing.
        """
        pushes = sorted(self.push_positions[queue] + [position])
        pops = sorted(self.pop_positions[queue])
        popped = 0
        for count, where in enumerate(pushes, start=1):
            while popped < len(pops) and pops[popped] < where:
                popped += 1
            if count - popped > self.token_depth:
                return False
        return True

    def _set_flag(self, position: int, flag: str):
        module, insn = self.stream[position]
        assert not getattr(insn, flag), (position, flag)
        self.stream[position][1] = insn.replace(**{flag: True})

    def _append(self, module: int, insn: Instruction, needs: dict[int, int],
                allow_eager: bool = True, access=None) -> int:
        """Append an instruction of ``module`` that must follow, for each adjacent
        module ``N`` in ``needs``, N's instruction of local index ``needs[N]``.

        ``access`` is ``(acc entries read, acc entries written)`` of a GEMM/ALU,
        which then may get ``overlap``. Returns the new instruction's local index.
        """
        rng = self.rng
        pops = []
        for producer, needed in sorted(needs.items()):
            queue = (producer, module)
            if needed <= self.covered[queue]:
                continue
            while self._pending(queue) and \
                    self.push_locals[queue][len(self.pop_positions[queue])] < needed:
                self._filler(module, pop_from=queue)
            if not self._pending(queue):
                last_local = len(self.module_positions[producer]) - 1
                assert last_local >= needed
                position = self.module_positions[producer][last_local]
                push_flag = QUEUE_FLAGS[queue][0]
                if not getattr(self.stream[position][1], push_flag) and \
                        self._bound_ok_with_push_at(queue, position):
                    self._set_flag(position, push_flag)
                    self.push_positions[queue].append(position)
                    self.push_locals[queue].append(last_local)
                    self.counts["retro_pushes"] += 1
                else:
                    self._filler(producer, push_to=queue)
            pops.append(queue)
        if allow_eager:
            for queue in QUEUE_FLAGS:
                if queue[1] == module and queue not in pops and self._pending(queue) \
                        and rng.random() < self.options.eager_pop_probability:
                    pops.append(queue)
        pushes = []
        if allow_eager and self.eager:
            for queue in QUEUE_FLAGS:
                if queue[0] == module and self._pending(queue) < self.max_pending \
                        and rng.random() < self.eager:
                    pushes.append(queue)
                    self.counts["eager_pushes"] += 1
        return self._emit(module, insn, pops, pushes, access)

    def _emit(self, module: int, insn: Instruction, pops, pushes, access=None) -> int:
        position = len(self.stream)
        local = len(self.module_positions[module])
        flags = {}
        if module == COMPUTE:
            flags.update(self._units(insn, access))
        for queue in pops:
            flags[QUEUE_FLAGS[queue][1]] = True
            self.covered[queue] = max(self.covered[queue],
                                      self.push_locals[queue][len(self.pop_positions[queue])])
            self.pop_positions[queue].append(position)
        for queue in pushes:
            flags[QUEUE_FLAGS[queue][0]] = True
            self.push_positions[queue].append(position)
            self.push_locals[queue].append(local)
        self.stream.append([module, insn.replace(**flags)])
        self.module_positions[module].append(position)
        return local

    def _units(self, insn: Instruction, access) -> dict:
        """Decide ``overlap`` for a compute instruction and update what each unit may
        still be running (see the module docstring); returns the flag to set."""
        if not isinstance(insn, (Gemm, Alu)):   # uop/acc LOAD, FINISH: wait for both units
            self.unit_busy = [None, None]
            return {}
        unit = 0 if isinstance(insn, Gemm) else 1
        depth = self.depth["acc"]
        if access is None:   # accesses unknown: take every entry, never overlap
            everything = np.ones(depth, dtype=bool)
            self.unit_busy = [None, None]
            self.unit_busy[unit] = (everything, everything)
            return {"overlap": False}
        reads, writes = np.zeros(depth, dtype=bool), np.zeros(depth, dtype=bool)
        reads[access[0]] = True
        writes[access[1]] = True
        other = self.unit_busy[1 - unit]
        legal = other is None or not (
            (writes & (other[0] | other[1])).any() or (reads & other[1]).any())
        overlap = False
        if self.options.overlap:
            wanted = self.rng.random() < self.options.overlap_probability
            overlap = legal and wanted
            if wanted and not legal:
                self.counts["overlaps_refused"] += 1
        if overlap:
            self.counts["overlaps"] += 1
            self.counts["concurrent_overlaps"] += other is not None
        else:   # waits for both units: nothing earlier runs beside later ones
            self.unit_busy[1 - unit] = None
        self.unit_busy[unit] = (reads, writes)
        return {"overlap": overlap}

    def _filler(self, module: int, pop_from=None, push_to=None):
        """A harmless instruction of ``module`` that only carries a token."""
        self.counts["fillers"] += 1
        config = self.config
        if module == LOAD:
            insn = Load(memory_type=MemType.INP, sram_base=self.depth["inp"] - 1,
                        dram_base=self._element_base("inp", "inp")
                        + int(self.rng.integers(0, self.region_elements["inp"])))
        elif module == COMPUTE:
            insn = self._uop_filler()
        else:
            sink = self.filler_sink // config.element_bytes("out")
            insn = Store(memory_type=MemType.OUT, sram_base=self.reserved_acc, dram_base=sink)
        if push_to is not None:
            assert self._pending(push_to) < self.token_depth
        self._emit(module, insn, [pop_from] if pop_from else [], [push_to] if push_to else [])

    # ------------------------------------------------------------------ micro-ops
    @property
    def _uop_base(self) -> int:
        return self.uop_offset // isa.UOP_BYTES

    def _pool_alloc(self, words: np.ndarray, rows: int = 1, gap: int = 0) -> tuple[int, int]:
        """Append micro-op words to the DRAM pool as ``rows`` rows with ``gap`` junk
        words between them. Returns (element base, stride)."""
        count = len(words)
        cols = count // rows
        stride = cols + gap
        base = len(self.uop_pool)
        for r in range(rows):
            self.uop_pool.extend(int(w) for w in words[r * cols:(r + 1) * cols])
            if r < rows - 1:
                self.uop_pool.extend(int(w) & self.uop_mask for w in
                                     self.rng.integers(0, 1 << HwConfig.UOP_BITS, size=gap, dtype=np.uint64))
        return self._uop_base + base, stride

    def _load_fresh_uops(self, uops: list[Uop]) -> int | None:
        """Emit a uop load placing ``uops`` contiguously in the uop buffer; returns uop_begin."""
        rng = self.rng
        words = isa.encode_uops(uops, self.config)
        count = len(words)
        if count > self.uop_usable:
            return None
        rows = 1
        if count > 1 and rng.random() < 0.4:
            divisors = [d for d in range(2, count + 1) if count % d == 0]
            rows = int(rng.choice(divisors))
        gap = int(rng.integers(0, 3)) if rows > 1 else 0
        dram_base, stride = self._pool_alloc(words, rows, gap)
        begin = int(rng.integers(0, self.uop_usable - count + 1))
        insn = Load(memory_type=MemType.UOP, sram_base=begin, dram_base=dram_base,
                    y_size=rows, x_size=count // rows, x_stride=stride)
        self._append(COMPUTE, insn, {})
        self.uop_words[begin:begin + count] = words
        self.init["uop"][begin:begin + count] = True
        return begin

    # ------------------------------------------------------------------ random choices
    def _pick_run(self, mask: np.ndarray, usable: int) -> tuple[int, int] | None:
        runs = [(a, min(a + n, usable) - a) for a, n in _runs(mask[:usable]) if a < usable]
        runs = [r for r in runs if r[1] > 0]
        if not runs:
            return None
        weights = np.array([n for _, n in runs], dtype=float) ** 0.5
        return runs[int(self.rng.choice(len(runs), p=weights / weights.sum()))]

    def _loop_shape(self, budget: int) -> tuple[int, int, int]:
        """(iter_out, iter_in, uop count) with product <= budget."""
        rng = self.rng
        while True:
            choice = rng.random()
            if choice < 0.15:
                iter_out, iter_in, count = 1, 1, int(rng.integers(1, 9))
            elif choice < 0.3:   # long loops, one micro-op
                iter_out, iter_in, count = int(rng.integers(1, 17)), int(rng.integers(1, 17)), 1
            else:
                iter_out, iter_in, count = (int(rng.integers(1, 6)), int(rng.integers(1, 6)),
                                            int(rng.integers(1, 7)))
            if iter_out * iter_in * count <= budget:
                return iter_out, iter_in, count

    def _factors(self, iter_out: int, iter_in: int, span_max: int, field_max: int):
        """Random (factor_out, factor_in) with (iter_out-1)*fo + (iter_in-1)*fi <= span_max.

        A factor whose loop runs once is irrelevant: give it a random value to
        check the hardware ignores it.
        """
        rng = self.rng

        def pick(limit: int) -> int:
            if limit <= 0:
                return 0
            r = rng.random()
            if r < 0.25:
                return 0
            if r < 0.5:
                return min(1, limit)
            if r < 0.75:
                return int(rng.integers(0, min(limit, 4) + 1))
            return int(rng.integers(0, limit + 1))

        order = [0, 1] if rng.random() < 0.5 else [1, 0]
        iters = (iter_out, iter_in)
        values = [0, 0]
        remaining = span_max
        for k in order:
            if iters[k] > 1:
                values[k] = pick(remaining // (iters[k] - 1))
                remaining -= values[k] * (iters[k] - 1)
            else:
                values[k] = int(rng.integers(0, field_max + 1))
        return values[0], values[1]

    def _index_plan(self, iter_out, iter_in, count, mask, usable, need_init, field_max):
        """Bases for ``count`` micro-ops and factors for one index kind.

        Returns (bases, factor_out, factor_in) or None if nothing initialised fits.
        """
        rng = self.rng
        if need_init:
            run = self._pick_run(mask, usable)
            if run is None:
                return None
            start, length = run
        else:
            start, length = 0, usable
        # sometimes use only a piece of the run
        if length > 1 and rng.random() < 0.5:
            piece = int(rng.integers(1, length + 1))
            start += int(rng.integers(0, length - piece + 1))
            length = piece
        factor_out, factor_in = self._factors(iter_out, iter_in, length - 1, field_max)
        span = (iter_out - 1) * factor_out + (iter_in - 1) * factor_in
        room = length - 1 - span
        style = rng.random()
        if style < 0.2:          # every micro-op the same index: read-modify-write chains
            bases = np.full(count, start + int(rng.integers(0, room + 1)))
        elif style < 0.5 and room + 1 >= count:   # consecutive
            first = start + int(rng.integers(0, room - count + 2))
            bases = first + np.arange(count)
        else:
            bases = start + rng.integers(0, room + 1, size=count)
        return bases.astype(np.int64), factor_out, factor_in

    @staticmethod
    def _indices(bases, factor_out, factor_in, iter_out, iter_in) -> np.ndarray:
        i = np.arange(iter_out)[:, None, None]
        j = np.arange(iter_in)[None, :, None]
        return (bases[None, None, :] + i * factor_out + j * factor_in).reshape(-1)

    # ------------------------------------------------------------------ actions
    def _source_region(self, kind: str) -> tuple[str, int, int]:
        """DRAM region a load of ``kind`` reads: its own data, or (feedback) the
        result area that stores write. Returns (region, element base, elements)."""
        if self.options.feedback_stores and self.stores_done and self.rng.random() < 0.25:
            offset, size = self.regions["result"]
            elements = size // self.config.element_bytes(kind)
            if elements:
                return "result", self._element_base("result", kind), elements
        return kind, self._element_base(kind, kind), self.region_elements[kind]

    def _result_bytes(self, insn, kind: str) -> np.ndarray:
        """Byte offsets within the result area a LOAD/STORE touches."""
        element_bytes = self.config.element_bytes(kind)
        first = insn.dram_base * element_bytes - self.regions["result"][0]
        rows = first + np.arange(insn.y_size)[:, None] * insn.x_stride * element_bytes
        return (rows + np.arange(insn.x_size * element_bytes)[None, :]).reshape(-1)

    def _compute_after(self, producer: int, needed: int) -> int:
        """Local index of a compute instruction ordered after ``producer``'s
        instruction ``needed``: the relay of a load <-> store dependency through DRAM."""
        self.counts["dram_relays"] += 1
        return self._append(COMPUTE, self._uop_filler(), {producer: needed})

    def _uop_filler(self) -> Load:
        """A compute instruction that changes nothing read: one pool word into the
        reserved uop entry."""
        return Load(memory_type=MemType.UOP, sram_base=self.reserved_uop_filler,
                    dram_base=self._uop_base + int(self.rng.integers(0, len(self.uop_pool))))

    def _load_inp_wgt(self, kind: str) -> bool:
        options = self.options
        usable = self.inp_usable if kind == "inp" else self.depth[kind]
        region, element_base, elements = self._source_region(kind)
        memory_type = MemType.INP if kind == "inp" else MemType.WGT
        insn = self._random_load(memory_type, usable, elements, element_base,
                                 padding=True, limit=options.max_load_elements)
        if insn is None:
            return False
        entries = np.arange(insn.sram_base, insn.sram_base + insn.padded_x * insn.padded_y)
        needed = int(self.last_compute_read[kind][entries].max())
        if region == "result":
            touched = self._result_bytes(insn, kind)
            writer = int(self.result_writer[touched].max())
            if writer >= 0:
                needed = max(needed, self._compute_after(STORE, writer))
            self.counts["feedback_loads"] += 1
        local = self._append(LOAD, insn, {COMPUTE: needed})
        if region == "result":
            self.result_load_reader[touched] = local
        self.last_load_write[kind][entries] = local
        self.init[kind][entries] = True
        return True

    def _random_load(self, memory_type, usable, elements, element_base, padding, limit):
        rng = self.rng
        for _ in range(20):
            y_size = int(rng.integers(1, 5)) if rng.random() < 0.7 else int(rng.integers(1, 9))
            x_size = int(rng.integers(1, 9)) if rng.random() < 0.8 else int(rng.integers(1, 17))
            pads = [0, 0, 0, 0]
            if padding and rng.random() < 0.6:
                pads = [int(rng.integers(0, 3)) if rng.random() < 0.5 else 0 for _ in range(4)]
                if rng.random() < 0.1:
                    pads[int(rng.integers(0, 4))] = int(rng.integers(0, 16))
            top, bottom, left, right = pads
            padded = (top + y_size + bottom) * (left + x_size + right)
            if padded > min(limit, usable):
                continue
            r = rng.random()
            if r < 0.5 or y_size == 1:
                stride = x_size
            elif r < 0.8 or not self.options.short_strides:
                stride = x_size + int(rng.integers(1, 5))
            else:
                stride = int(rng.integers(0, x_size))
            extent = (y_size - 1) * stride + x_size
            if extent > elements:
                continue
            dram_base = element_base + int(rng.integers(0, elements - extent + 1))
            sram_base = int(rng.integers(0, usable - padded + 1))
            return Load(memory_type=memory_type, sram_base=sram_base, dram_base=dram_base,
                        y_size=y_size, x_size=x_size, x_stride=stride, y_pad_top=top,
                        y_pad_bottom=bottom, x_pad_left=left, x_pad_right=right)
        return None

    def _load_acc(self) -> bool:
        region, element_base, elements = self._source_region("acc")
        insn = self._random_load(MemType.ACC, self.acc_usable, elements, element_base,
                                 padding=self.options.pad_uop_acc,
                                 limit=self.options.max_load_elements)
        if insn is None:
            return False
        entries = np.arange(insn.sram_base, insn.sram_base + insn.padded_x * insn.padded_y)
        needed = int(self.last_store_read_out[entries].max())
        if region == "result":
            touched = self._result_bytes(insn, "acc")
            needed = max(needed, int(self.result_writer[touched].max()))
            self.counts["feedback_loads"] += 1
        local = self._append(COMPUTE, insn, {STORE: needed})
        if region == "result":
            self.result_compute_reader[touched] = local
        self.last_compute_write_out[entries] = local
        self.init["acc"][entries] = True
        return True

    def _load_uop_random(self) -> bool:
        """A uop load for coverage of the uop path (padding, strides); its words
        are valid micro-ops only if they happen to be, which the reuse path checks."""
        rng = self.rng
        # put some real micro-ops into the pool first so the load carries useful ones
        count = int(rng.integers(1, 9))
        uops = [Uop(dst=int(rng.integers(0, self.acc_usable)),
                    src=int(rng.integers(0, self.inp_usable)),
                    wgt=int(rng.integers(0, self.depth["wgt"]))) for _ in range(count)]
        self._pool_alloc(isa.encode_uops(uops, self.config))
        insn = self._random_load(MemType.UOP, self.uop_usable, len(self.uop_pool), self._uop_base,
                                 padding=self.options.pad_uop_acc, limit=32)
        if insn is None:
            return False
        self._append(COMPUTE, insn, {})
        base = insn.dram_base - self._uop_base
        image = np.zeros((insn.padded_y, insn.padded_x), dtype=np.uint32)
        for y in range(insn.y_size):
            row = base + y * insn.x_stride
            image[insn.y_pad_top + y, insn.x_pad_left:insn.x_pad_left + insn.x_size] = \
                self.uop_pool[row:row + insn.x_size]
        n = insn.padded_x * insn.padded_y
        self.uop_words[insn.sram_base:insn.sram_base + n] = image.reshape(-1)
        self.init["uop"][insn.sram_base:insn.sram_base + n] = True
        return True

    def _compute_choice(self, kind: str):
        """Random (reset, alu_op, use_imm) of a GEMM or ALU instruction."""
        rng = self.rng
        reset = rng.random() < (0.2 if kind == "gemm" else 0.08)
        if self.options.requant and rng.random() < 0.25:
            alu_op = AluOp.REQUANT
        else:
            alu_op = AluOp(int(rng.integers(0, AluOp.REQUANT)))
        use_imm = kind == "alu" and rng.random() < 0.5
        return reset, alu_op, use_imm

    def _compute_loops(self, kind: str) -> bool:
        """One GEMM or ALU instruction over fresh or already loaded micro-ops."""
        rng = self.rng
        reset, alu_op, use_imm = self._compute_choice(kind)
        plan = None
        if rng.random() < 0.3:
            plan = self._reuse_uops(kind, reset, use_imm)
        if plan is None:
            plan = self._fresh_uops(kind, reset, use_imm)
        if plan is None and not reset:   # nothing initialised fits: a reset always does
            reset = True
            plan = self._fresh_uops(kind, reset, use_imm)
        if plan is None:
            return False
        self._emit_compute(kind, reset, alu_op, use_imm, plan)
        return True

    def _compute_burst(self) -> bool:
        """2-4 GEMM/ALU instructions, mostly alternating units, whose micro-ops one
        uop load brings in first: nothing but their own conflicts keeps the two
        compute units from running them side by side."""
        rng = self.rng
        kind = "gemm" if rng.random() < 0.5 else "alu"
        collected: list[Uop] = []
        members = []
        for _ in range(int(rng.integers(2, 5))):
            reset, alu_op, use_imm = self._compute_choice(kind)
            plan = self._fresh_uops(kind, reset, use_imm, collect=collected)
            if plan is None and not reset:
                reset = True
                plan = self._fresh_uops(kind, reset, use_imm, collect=collected)
            if plan is not None:
                members.append((kind, reset, alu_op, use_imm, plan))
                # later members may read what this one writes (acc, and out with it)
                self.init["acc"][plan[1]] = True
            if rng.random() < 0.75:
                kind = "alu" if kind == "gemm" else "gemm"
        if not members:
            return False
        begin = self._load_fresh_uops(collected)
        assert begin is not None, "a burst's micro-ops always fit the uop buffer"
        for kind, reset, alu_op, use_imm, (fields, dst, src, wgt) in members:
            fields = dict(fields, uop_begin=fields["uop_begin"] + begin,
                          uop_end=fields["uop_end"] + begin)
            self._emit_compute(kind, reset, alu_op, use_imm, (fields, dst, src, wgt))
        self.counts["bursts"] += 1
        return True

    def _emit_compute(self, kind, reset, alu_op, use_imm, plan) -> None:
        fields, dst_idx, src_idx, wgt_idx = plan
        needs = {STORE: int(self.last_store_read_out[dst_idx].max())}
        if kind == "gemm" and not reset:
            needs[LOAD] = max(int(self.last_load_write["inp"][src_idx].max()),
                              int(self.last_load_write["wgt"][wgt_idx].max()))
        reads_acc = kind == "alu" and not reset and not use_imm
        access = (src_idx if reads_acc else np.zeros(0, np.int64), dst_idx)
        if kind == "gemm":
            insn = Gemm(reset=reset, **fields)
        else:
            imm = self._random_imm(alu_op)
            insn = Alu(reset=reset, alu_op=alu_op, use_imm=use_imm, imm=imm, **fields)
        local = self._append(COMPUTE, insn, needs, access=access)
        if kind == "gemm" and not reset:
            self.last_compute_read["inp"][src_idx] = local
            self.last_compute_read["wgt"][wgt_idx] = local
        self.last_compute_write_out[dst_idx] = local
        self.init["acc"][dst_idx] = True

    def _random_imm(self, op: AluOp) -> int:
        rng = self.rng
        r = rng.random()
        if op == AluOp.REQUANT:
            # shift in bits 4:0 (the ends often), relu in bit 5, sometimes junk above
            if r < 0.15:
                shift = 0
            elif r < 0.25:
                shift = 31
            elif r < 0.7:
                shift = int(rng.integers(0, 13))
            else:
                shift = int(rng.integers(0, 32))
            imm = isa.requant_imm(shift, relu=rng.random() < 0.5)
            if rng.random() < 0.2:   # junk above the relu bit, which REQUANT ignores
                junk_lsb = isa.SHIFT_BITS + 1
                imm |= int(rng.integers(1, 1 << (isa.IMM_BITS - junk_lsb))) << junk_lsb
                if imm >= 1 << (isa.IMM_BITS - 1):   # the field is signed
                    imm -= 1 << isa.IMM_BITS
            return imm
        if op in (AluOp.SHR, AluOp.SHL) and r < 0.7:
            return int(rng.integers(-40, 40))
        if r < 0.4:
            return int(rng.integers(-8, 9))
        return int(rng.integers(-(1 << (isa.IMM_BITS - 1)), 1 << (isa.IMM_BITS - 1)))

    def _needs_of(self, kind, reset, use_imm):
        """Which index kinds must point at initialised entries."""
        dst_init = not reset
        src_kind = "inp" if kind == "gemm" else "acc"
        src_used = (kind == "gemm" and not reset) or (kind == "alu" and not reset and not use_imm)
        wgt_used = kind == "gemm" and not reset
        return dst_init, src_kind, src_used, wgt_used

    def _fresh_uops(self, kind, reset, use_imm, collect: list | None = None):
        """Plan an instruction over new micro-ops: loaded by a uop load right away,
        or (``collect``) appended to a list a later load brings in, the returned
        ``uop_begin`` then counting from the list's start."""
        config = self.config
        iter_out, iter_in, count = self._loop_shape(self.options.max_uops_per_insn)
        dst_init, src_kind, src_used, wgt_used = self._needs_of(kind, reset, use_imm)
        acc_bits = (1 << config.acc_index_bits) - 1
        src_bits = (1 << config.uop_src_bits) - 1
        wgt_bits = (1 << config.wgt_index_bits) - 1
        dst = self._index_plan(iter_out, iter_in, count, self.init["acc"], self.acc_usable,
                               dst_init, acc_bits)
        if dst is None:
            return None
        src_usable = self.inp_usable if src_kind == "inp" else self.acc_usable
        src = self._index_plan(iter_out, iter_in, count, self.init[src_kind], src_usable,
                               src_used, src_bits)
        wgt = self._index_plan(iter_out, iter_in, count, self.init["wgt"], self.depth["wgt"],
                               wgt_used, wgt_bits)
        if src is None or wgt is None:
            return None
        uops = [Uop(dst=int(d), src=int(s), wgt=int(w))
                for d, s, w in zip(dst[0], src[0], wgt[0])]
        if collect is not None:
            begin = len(collect)
            collect.extend(uops)
        else:
            begin = self._load_fresh_uops(uops)
        if begin is None:
            return None
        fields = dict(uop_begin=begin, uop_end=begin + count, iter_out=iter_out, iter_in=iter_in,
                      dst_factor_out=dst[1], dst_factor_in=dst[2],
                      src_factor_out=src[1], src_factor_in=src[2])
        if kind == "gemm":
            fields.update(wgt_factor_out=wgt[1], wgt_factor_in=wgt[2])
        indices = [self._indices(*plan, iter_out, iter_in) for plan in (dst, src, wgt)]
        return (fields, *indices)

    def _reuse_uops(self, kind, reset, use_imm):
        """Loop over micro-ops already in the uop buffer, if random factors keep them valid."""
        rng, config = self.rng, self.config
        run = self._pick_run(self.init["uop"], self.uop_usable)
        if run is None:
            return None
        dst_init, src_kind, src_used, wgt_used = self._needs_of(kind, reset, use_imm)
        for _ in range(8):
            start, length = run
            count = int(rng.integers(1, min(length, 8) + 1))
            begin = start + int(rng.integers(0, length - count + 1))
            dst_b, src_b, wgt_b = isa.decode_uops(self.uop_words[begin:begin + count], config)
            iter_out, iter_in = int(rng.integers(1, 5)), int(rng.integers(1, 5))
            if iter_out * iter_in * count > self.options.max_uops_per_insn:
                continue
            factors = [(int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(3)]
            idx = [self._indices(b, fo, fi, iter_out, iter_in)
                   for b, (fo, fi) in zip((dst_b, src_b, wgt_b), factors)]
            checks = [(idx[0], self.init["acc"], self.acc_usable, dst_init),
                      (idx[1], self.init[src_kind],
                       self.inp_usable if src_kind == "inp" else self.acc_usable, src_used),
                      (idx[2], self.init["wgt"], self.depth["wgt"], wgt_used)]
            ok = True
            for values, mask, usable, need_init in checks:
                if need_init and (values.max() >= usable or not mask[values].all()):
                    ok = False
                elif not need_init and values is idx[0] and values.max() >= usable:
                    ok = False
            if not ok:
                continue
            # irrelevant index kinds still must fit the field widths of the factors
            fields = dict(uop_begin=begin, uop_end=begin + count, iter_out=iter_out,
                          iter_in=iter_in, dst_factor_out=factors[0][0],
                          dst_factor_in=factors[0][1], src_factor_out=factors[1][0],
                          src_factor_in=factors[1][1])
            if kind == "gemm":
                fields.update(wgt_factor_out=factors[2][0], wgt_factor_in=factors[2][1])
            # indices that the instruction does not use are clipped for tracking only
            src_idx = idx[1] if src_used else np.zeros(0, np.int64)
            wgt_idx = idx[2] if wgt_used else np.zeros(0, np.int64)
            return fields, idx[0], src_idx, wgt_idx
        return None

    def _store(self) -> bool:
        rng = self.rng
        # every acc write also writes out: initialised acc entries are initialised out ones
        run = self._pick_run(self.init["acc"], self.acc_usable)
        if run is None:
            return False
        start, length = run
        for _ in range(10):
            y_size = int(rng.integers(1, 5))
            x_size = int(rng.integers(1, 9))
            if y_size * x_size > length:
                continue
            stride = x_size + (int(rng.integers(0, 4)) if rng.random() < 0.5 else 0)
            extent = (y_size - 1) * stride + x_size
            if extent > self.result_elements:
                continue
            sram_base = start + int(rng.integers(0, length - y_size * x_size + 1))
            dram_base = self._element_base("result", "out") + \
                int(rng.integers(0, self.result_elements - extent + 1))
            entries = np.arange(sram_base, sram_base + y_size * x_size)
            insn = Store(memory_type=MemType.OUT, sram_base=sram_base, dram_base=dram_base,
                         y_size=y_size, x_size=x_size, x_stride=stride)
            touched = self._result_bytes(insn, "out")
            needed = max(int(self.last_compute_write_out[entries].max()),
                         int(self.result_compute_reader[touched].max()))
            reader = int(self.result_load_reader[touched].max())
            if reader >= 0:   # a load read these bytes: it must finish first (WAR in DRAM)
                needed = max(needed, self._compute_after(LOAD, reader))
            local = self._append(STORE, insn, {COMPUTE: needed})
            self.last_store_read_out[entries] = local
            self.result_writer[touched] = local
            self.stores_done += 1
            return True
        return False

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

    def _dump_out(self, index: int):
        """Store the whole out buffer to dump slot ``index``."""
        depth = self.depth["acc"]
        x_size = min(depth, 1 << 12)
        y_size = depth // x_size
        base = self._element_base("dump", "out") + index * depth
        insn = Store(memory_type=MemType.OUT, sram_base=0, dram_base=base, y_size=y_size,
                     x_size=x_size, x_stride=x_size)
        entries = np.arange(depth)
        local = self._append(STORE, insn, {COMPUTE: int(self.last_compute_write_out.max())},
                             allow_eager=False)
        self.last_store_read_out[entries] = local

    def _epilogue(self):
        # Pop every token still in flight so the queues end empty.
        for queue in QUEUE_FLAGS:
            while self._pending(queue):
                self._filler(queue[1], pop_from=queue)
        # Every out entry gets a defined value: reset what was never written (every
        # acc write, loads included, also writes out, so written acc means written out).
        uop_slot = 0
        self._whole_acc_loop(lambda f: Gemm(reset=True, **f), _runs(~self.init["acc"]),
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

    def _image(self, instructions) -> RandomProgram:
        config = self.config
        align = config.dram_alignment
        program = isa.encode_program(instructions, config)
        insn_bytes = len(program)
        pool = np.array(self.uop_pool, dtype="<u4").view(np.uint8)
        insn_offset = -(-(self.uop_offset + len(pool)) // align) * align \
            + int(self.rng.integers(0, 2)) * align
        total = -(-(insn_offset + insn_bytes) // align) * align + align
        dram = np.zeros(total, dtype=np.uint8)
        for offset, data in self.chunks:
            dram[offset:offset + len(data)] = data
        dram[self.uop_offset:self.uop_offset + len(pool)] = pool
        dram[insn_offset:insn_offset + insn_bytes] = program
        regions = dict(self.regions)
        regions["uop"] = (self.uop_offset, len(pool))
        regions["insn"] = (insn_offset, insn_bytes)
        kinds: dict[str, int] = {}
        for insn in instructions:
            label = instruction_label(insn)
            kinds[label] = kinds.get(label, 0) + 1
        summary = {"instructions": len(instructions), "kinds": kinds,
                   "tokens": {f"{MODULES[p]}->{MODULES[c]}": len(self.push_positions[(p, c)])
                              for p, c in QUEUE_FLAGS},
                   **self.counts,
                   "micro_ops": int(sum(getattr(i, "micro_ops", 0) for i in instructions))}
        return RandomProgram(config=config, seed=self.seed, options=self.options, dram=dram,
                             insn_offset=insn_offset, insn_count=len(instructions),
                             instructions=instructions, regions=regions, summary=summary)


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


def check_token_discipline(instructions: list[Instruction], token_queue_depth: int) -> None:
    """Assert the stream's tokens make it deadlock-free for any timing.

    Checks that every pop takes (FIFO) a token pushed by an instruction earlier
    in the stream, that for every push the pushes up to it minus the pops before
    it never exceed ``token_queue_depth`` (so a push never waits on a later
    instruction), that all tokens are popped by the end, that load never uses
    its ``prev`` side nor store its ``next`` side, and that FINISH is last.

    Raises
    ------
    AssertionError
        Naming the instruction that breaks the rule.
    """
    pushes = {q: [] for q in QUEUE_FLAGS}
    popped = {q: 0 for q in QUEUE_FLAGS}
    for position, insn in enumerate(instructions):
        module = module_of(insn)
        if module == LOAD:
            assert not insn.pop_prev and not insn.push_prev, f"{position}: load uses prev"
        if module == STORE:
            assert not insn.pop_next and not insn.push_next, f"{position}: store uses next"
        for queue, (push_flag, pop_flag) in QUEUE_FLAGS.items():
            if queue[1] == module and getattr(insn, pop_flag):
                assert popped[queue] < len(pushes[queue]), \
                    f"{position}: pops {queue} with no earlier push"
                popped[queue] += 1
        for queue, (push_flag, pop_flag) in QUEUE_FLAGS.items():
            if queue[0] == module and getattr(insn, push_flag):
                pushes[queue].append(position)
                assert len(pushes[queue]) - popped[queue] <= token_queue_depth, \
                    f"{position}: {queue} may hold more than {token_queue_depth} tokens"
    for queue in QUEUE_FLAGS:
        assert popped[queue] == len(pushes[queue]), f"tokens left in {queue}"
    assert isinstance(instructions[-1], Finish), "FINISH is not last"
    assert sum(isinstance(i, Finish) for i in instructions) == 1, "more than one FINISH"
