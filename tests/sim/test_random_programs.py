"""Random legal programs (`vdla.testing.programs`) against fsim and a reference.

The reference here is independent of fsim: a plain loop-by-loop interpreter of
the ISA semantics (hw/isa.py docstring) that runs the three module queues in a
random legal interleaving (tokens and queue depths honoured). Load and store
instructions run atomically; compute issues in program order onto its two
units, a GEMM or ALU with ``overlap`` as soon as its own unit is free (others
once both are), and the two units advance micro-op by micro-op in random
order, pushing tokens in program order once an instruction and all earlier
ones are done. A race-free program gives the same DRAM image under every
interleaving, so several schedules per program check the generator's
dependency tokens and overlap flags (also for DRAM: stores read back by later
loads), and the image checks fsim bit for bit.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

from vdla.hw import isa
from vdla.hw.config import PRESETS, HwConfig
from vdla.hw.isa import QUEUE_FLAGS, REQUANT_OPS, Alu, AluOp, Finish, Gemm, Load, MemType, Store
from vdla.sim.backends import get_backend
from vdla.sim.errors import DeadlockError, RaceError, TokenError
from vdla.testing.programs import GeneratorOptions, check_token_discipline, generate
from vdla.testing import oracles

TINY, DEFAULT = PRESETS["tiny"], PRESETS["default"]
# A third shape: wide bus (sub-beat elements), batch 2, shallow queues.
ODD = PRESETS["odd"]

LOAD, COMPUTE, STORE = isa.LOAD_MODULE, isa.COMPUTE_MODULE, isa.STORE_MODULE


# ---------------------------------------------------------------- reference
class Reference:
    """Sequential ISA interpreter with a random scheduler over the module queues."""

    def __init__(self, config: HwConfig, dram: np.ndarray):
        self.config = config
        self.dram = dram
        b, bi, bo = config.batch, config.block_in, config.block_out
        self.inp = np.zeros((config.depth("inp"), b, bi), np.int64)
        self.wgt = np.zeros((config.depth("wgt"), bo, bi), np.int64)
        self.acc = np.zeros((config.depth("acc"), b * bo), np.int64)
        self.out = np.zeros((config.depth("acc"), b * bo), np.int64)
        self.uop = np.zeros(config.depth("uop"), np.int64)

    def _uop(self, word: int):
        c = self.config
        dst = word & ((1 << c.acc_index_bits) - 1)
        src = (word >> c.acc_index_bits) & ((1 << c.uop_src_bits) - 1)
        wgt = (word >> (c.acc_index_bits + c.uop_src_bits)) & ((1 << c.wgt_index_bits) - 1)
        return dst, src, wgt

    def _element(self, kind: str, index: int) -> np.ndarray:
        size = self.config.element_bytes(kind)
        raw = self.dram[index * size:(index + 1) * size]
        assert len(raw) == size, f"DRAM element {index} of {kind} outside the image"
        if kind == "acc":
            return raw.view("<i4").astype(np.int64)
        if kind == "uop":
            return raw.view("<u4").astype(np.int64)
        return raw.view(np.int8).astype(np.int64)

    def execute(self, insn):
        c = self.config
        if isinstance(insn, Load):
            kind = insn.memory_type.kind
            target = {"inp": self.inp, "wgt": self.wgt, "acc": self.acc, "uop": self.uop}[kind]
            entry = insn.sram_base
            for y in range(insn.padded_y):
                for x in range(insn.padded_x):
                    dy, dx = y - insn.y_pad_top, x - insn.x_pad_left
                    if 0 <= dy < insn.y_size and 0 <= dx < insn.x_size:
                        value = self._element(kind, insn.dram_base + dy * insn.x_stride + dx)
                        target[entry] = value.reshape(target[entry].shape)
                    else:
                        target[entry] = 0
                    if kind == "acc":
                        self.out[entry] = self.acc[entry]
                    entry += 1
        elif isinstance(insn, Store):
            size = c.element_bytes("out")
            entry = insn.sram_base
            for y in range(insn.y_size):
                for x in range(insn.x_size):
                    start = (insn.dram_base + y * insn.x_stride + x) * size
                    self.dram[start:start + size] = (self.out[entry] & 0xFF).astype(np.uint8)
                    entry += 1
        elif isinstance(insn, (Gemm, Alu)):
            for _ in self.micro_ops(insn):
                pass
        else:
            assert isinstance(insn, Finish)

    def micro_ops(self, insn):
        """Run a GEMM or ALU one micro-op at a time (a generator yielding after each)."""
        for i in range(insn.iter_out):
            for j in range(insn.iter_in):
                for u in range(insn.uop_begin, insn.uop_end):
                    dst, src, wgt = self._uop(int(self.uop[u]))
                    dst += i * insn.dst_factor_out + j * insn.dst_factor_in
                    src += i * insn.src_factor_out + j * insn.src_factor_in
                    if isinstance(insn, Gemm):
                        wgt += i * insn.wgt_factor_out + j * insn.wgt_factor_in
                        if insn.reset:
                            self.acc[dst] = 0
                        else:
                            product = self.inp[src] @ self.wgt[wgt].T
                            # GEMM_OVERWRITE writes the product; a GEMM adds it.
                            base = 0 if insn.overwrite else self.acc[dst]
                            self.acc[dst] = oracles.wrap32(base + product.reshape(-1))
                    else:
                        self.acc[dst] = self._alu(insn, dst, src)
                    self.out[dst] = self.acc[dst]
                    yield

    def _alu(self, insn: Alu, dst: int, src: int) -> np.ndarray:
        if insn.reset:
            return np.zeros_like(self.acc[dst])
        a = self.acc[dst]
        if insn.use_imm:   # REQUANT with use_imm adds no bias: imm is its shift and relu
            b = np.full_like(a, 0 if insn.alu_op in REQUANT_OPS else insn.imm)
        else:
            b = self.acc[src].copy()
        return oracles.alu(insn.alu_op, a, b, insn.imm)

    def run(self, instructions, schedule_seed: int, token_depth: int):
        """Run modules in a random legal order; raise DeadlockError if stuck."""
        rng = np.random.default_rng(schedule_seed)
        queues = [collections.deque(), collections.deque(), collections.deque()]
        for insn in instructions:
            if isinstance(insn, Load) and insn.memory_type in (MemType.INP, MemType.WGT):
                queues[LOAD].append(insn)
            elif isinstance(insn, Store):
                queues[STORE].append(insn)
            else:
                queues[COMPUTE].append(insn)
        tokens = {q: 0 for q in QUEUE_FLAGS}
        pushing: list[list] = [[], [], []]        # load and store: pushes still to do
        units: list = [None, None]                # compute's GEMM and ALU: running insn
        issued: collections.deque = collections.deque()  # compute, in order: [insn, done, pushes]

        def pops_of(m, insn):
            return [q for q, (_, pop) in QUEUE_FLAGS.items() if q[1] == m and getattr(insn, pop)]

        def pushes_of(m, insn):
            return [q for q, (push, _) in QUEUE_FLAGS.items() if q[0] == m and getattr(insn, push)]

        def awaited_units(insn):
            """Units that must be idle before ``insn`` issues."""
            if isinstance(insn, (Gemm, Alu)) and insn.overlap:
                return [0 if isinstance(insn, Gemm) else 1]
            return [0, 1]

        while any(queues) or any(pushing) or issued:
            movable = []
            for m in (LOAD, STORE):
                if pushing[m]:
                    if any(tokens[q] < token_depth for q in pushing[m]):
                        movable.append(("push", m))
                elif queues[m] and all(tokens[q] for q in pops_of(m, queues[m][0])):
                    movable.append(("run", m))
            queue = queues[COMPUTE]
            blocked = bool(issued) and issued[0][1] and issued[0][2]
            if queue and not blocked and all(tokens[q] for q in pops_of(COMPUTE, queue[0])) \
                    and all(units[u] is None for u in awaited_units(queue[0])):
                movable.append(("issue", COMPUTE))
            for u in (0, 1):
                if units[u] is not None:
                    movable.append(("step", u))
            if issued and issued[0][1] and (not issued[0][2] or
                                            any(tokens[q] < token_depth for q in issued[0][2])):
                movable.append(("retire", COMPUTE))
            if not movable:
                raise DeadlockError(f"reference: deadlock with tokens {tokens}")
            action, m = movable[int(rng.integers(len(movable)))]
            if action == "push":
                for q in list(pushing[m]):
                    if tokens[q] < token_depth:
                        tokens[q] += 1
                        pushing[m].remove(q)
            elif action == "run":
                insn = queues[m].popleft()
                for q in pops_of(m, insn):
                    tokens[q] -= 1
                self.execute(insn)
                pushing[m] = pushes_of(m, insn)
            elif action == "issue":
                insn = queue.popleft()
                for q in pops_of(COMPUTE, insn):
                    tokens[q] -= 1
                record = [insn, False, pushes_of(COMPUTE, insn)]
                issued.append(record)
                if isinstance(insn, (Gemm, Alu)):   # runs on its own unit only
                    units[0 if isinstance(insn, Gemm) else 1] = (self.micro_ops(insn), record)
                else:                              # uop/acc LOAD, FINISH: both units idle
                    self.execute(insn)
                    record[1] = True
            elif action == "step":
                steps, record = units[m]
                for _ in range(int(rng.integers(1, 4))):
                    if next(steps, StopIteration) is StopIteration:
                        record[1] = True
                        units[m] = None
                        break
            else:   # retire: push in program order once this and all earlier are done
                record = issued[0]
                for q in list(record[2]):
                    if tokens[q] < token_depth:
                        tokens[q] += 1
                        record[2].remove(q)
                if not record[2]:
                    issued.popleft()
        assert not any(tokens.values()), f"reference: tokens left {tokens}"


def reference_image(program, schedule_seed: int) -> np.ndarray:
    image = program.dram.copy()
    Reference(program.config, image).run(program.instructions, schedule_seed,
                                         program.config.token_queue_depth)
    return image


# ---------------------------------------------------------------- tests
SEEDS = range(40)


@pytest.mark.parametrize("config", [TINY, DEFAULT, ODD], ids=lambda c: c.name)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.slow
def test_random_program_runs_on_fsim(config, seed):
    program = generate(config, seed)
    check_token_discipline(program.instructions, config.token_queue_depth)
    # the image holds exactly the instructions the program lists
    start = program.insn_offset
    stored = program.dram[start:start + program.insn_count * isa.INSN_BYTES]
    assert isa.decode_program(stored, config) == program.instructions
    fsim = get_backend("fsim", config)
    first, result = program.run(fsim)
    second, _ = program.run(fsim)
    assert np.array_equal(first, second), "fsim is not deterministic"
    # the program does work and its final dump holds it
    dump_offset, dump_size = program.regions["dump"]
    assert first[dump_offset:dump_offset + dump_size].any()
    assert result.counters["gemm_uops"] > 0 and result.counters["alu_uops"] > 0
    insn_offset, insn_size = program.regions["insn"]
    assert np.array_equal(first[insn_offset:insn_offset + insn_size],
                          program.dram[insn_offset:insn_offset + insn_size])


@pytest.mark.parametrize("config", [TINY, DEFAULT, ODD], ids=lambda c: c.name)
@pytest.mark.parametrize("seed", range(0, 40, 3))
@pytest.mark.slow
def test_fsim_matches_reference_under_random_interleavings(config, seed):
    program = generate(config, seed, GeneratorOptions(actions=(15, 40)))
    expected, _ = program.run(get_backend("fsim", config))
    for schedule in range(3):
        image = reference_image(program, schedule_seed=seed * 7 + schedule)
        assert np.array_equal(image, expected), \
            f"schedule {schedule}: " + program.describe_difference(expected, image)


def test_generator_is_deterministic_and_seeds_differ():
    a, b, c = generate(TINY, 5), generate(TINY, 5), generate(TINY, 6)
    assert np.array_equal(a.dram, b.dram) and a.instructions == b.instructions
    assert not (len(a.dram) == len(c.dram) and np.array_equal(a.dram, c.dram))


def _matched_pairs(instructions):
    """(push position, pop position, queue) of every token, FIFO-matched."""
    pushes = {q: collections.deque() for q in QUEUE_FLAGS}
    pairs = []
    for position, insn in enumerate(instructions):
        module = isa.module_of(insn)
        for q, (_, pop) in QUEUE_FLAGS.items():
            if q[1] == module and getattr(insn, pop):
                pairs.append((pushes[q].popleft(), position, q))
        for q, (push, _) in QUEUE_FLAGS.items():
            if q[0] == module and getattr(insn, push):
                pushes[q].append(position)
    return pairs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tokens_matter(seed):
    """Dropping one matched push/pop pair must make fsim report a race (or a
    reordering in DRAM) for some pairs: the generator's tokens are not decoration,
    and the checks these tests rely on can fail."""
    config = TINY
    program = generate(config, seed, GeneratorOptions(actions=(25, 40)))
    fsim = get_backend("fsim", config)
    expected, _ = program.run(fsim)
    detected = 0
    pairs = _matched_pairs(program.instructions)
    for push_at, pop_at, queue in pairs:
        push_flag, pop_flag = QUEUE_FLAGS[queue]
        mutated = list(program.instructions)
        mutated[push_at] = mutated[push_at].replace(**{push_flag: False})
        mutated[pop_at] = mutated[pop_at].replace(**{pop_flag: False})
        image = program.dram.copy()
        image[program.insn_offset:program.insn_offset + len(mutated) * isa.INSN_BYTES] = \
            isa.encode_program(mutated, config)
        try:
            fsim.run(image, program.insn_offset, len(mutated))
        except (RaceError, DeadlockError, TokenError):
            detected += 1
    assert pairs and detected >= 1, f"no token of {len(pairs)} mattered"


def _with_instructions(program, instructions):
    """A copy of ``program`` whose image holds ``instructions`` instead (same count)."""
    import dataclasses
    dram = program.dram.copy()
    dram[program.insn_offset:program.insn_offset + len(instructions) * isa.INSN_BYTES] = \
        isa.encode_program(instructions, program.config)
    return dataclasses.replace(program, dram=dram, instructions=list(instructions))


@pytest.mark.slow
def test_overlap_everywhere_races_or_stays_deterministic():
    """Setting overlap on every GEMM/ALU: fsim must call some programs racy, and
    those it accepts must give the same image under every overlapping schedule of
    the reference; among the racy ones, the reference's schedules must disagree
    for some (so the reference really runs the units side by side)."""
    config = TINY
    racy = accepted = diverged = 0
    for seed in range(16):
        program = generate(config, seed, GeneratorOptions(actions=(15, 30)))
        mutated = _with_instructions(program, [
            insn.replace(overlap=True) if isinstance(insn, (Gemm, Alu)) else insn
            for insn in program.instructions])
        try:
            expected, _ = mutated.run(get_backend("fsim", config))
        except RaceError:
            racy += 1
            images = [reference_image(mutated, schedule_seed=k) for k in range(6)]
            diverged += any(not np.array_equal(images[0], image) for image in images[1:])
            continue
        accepted += 1
        for schedule in range(3):
            image = reference_image(mutated, schedule_seed=seed * 11 + schedule)
            assert np.array_equal(image, expected), \
                f"seed {seed} schedule {schedule}: " + mutated.describe_difference(expected, image)
    assert racy >= 3 and diverged >= 1, (racy, accepted, diverged)


@pytest.mark.parametrize("requant, overlap, overwrite", [
    (False, False, True), (False, True, False), (True, False, True), (True, True, False)])
def test_features_can_be_switched_off(requant, overlap, overwrite):
    seen_requant = seen_overlap = seen_overwrite = False
    for seed in range(10):
        program = generate(TINY, seed, GeneratorOptions(requant=requant, overlap=overlap,
                                                        overwrite=overwrite))
        for insn in program.instructions:
            seen_requant |= isinstance(insn, Alu) and insn.alu_op == AluOp.REQUANT
            seen_overlap |= isinstance(insn, (Gemm, Alu)) and insn.overlap
            seen_overwrite |= isinstance(insn, Gemm) and insn.overwrite
        program.run(get_backend("fsim", TINY))
    assert (seen_requant, seen_overlap, seen_overwrite) == (requant, overlap, overwrite)


def test_overwrite_draw_keeps_every_other_instruction_of_a_seed():
    """GEMM_OVERWRITE comes from a draw GEMMs already made: a seed's program with it
    switched off differs only in that flag."""
    changed = 0
    for seed in range(6):
        with_flag = generate(TINY, seed).instructions
        without = generate(TINY, seed, GeneratorOptions(overwrite=False)).instructions
        assert [i.replace(overwrite=False) if isinstance(i, Gemm) else i
                for i in with_flag] == without
        changed += sum(isinstance(i, Gemm) and i.overwrite for i in with_flag)
    assert changed


def test_programs_cover_the_isa():
    """Across a few dozen seeds every instruction variant the generator promises appears."""
    seen = collections.Counter()
    for seed in range(30):
        program = generate(TINY, seed)
        seen["feedback"] += program.summary["feedback_loads"]
        seen["eager"] += program.summary["eager_pushes"]
        seen["filler"] += program.summary["fillers"]
        seen["burst"] += program.summary["bursts"]
        seen["concurrent overlap"] += program.summary["concurrent_overlaps"]
        seen["overlap refused"] += program.summary["overlaps_refused"]
        for insn in program.instructions:
            if isinstance(insn, Load):
                seen[f"load {insn.memory_type.kind}"] += 1
                if insn.padded_x * insn.padded_y != insn.x_size * insn.y_size:
                    seen[f"pad {insn.memory_type.kind}"] += 1
                if insn.y_size > 1 and insn.x_stride < insn.x_size:
                    seen["short stride"] += 1
                if insn.y_size > 1 and insn.x_stride > insn.x_size:
                    seen["long stride"] += 1
            elif isinstance(insn, Store):
                seen["store"] += 1
                if insn.y_size > 1 and insn.x_stride > insn.x_size:
                    seen["store stride"] += 1
            elif isinstance(insn, Gemm):
                seen["gemm reset" if insn.reset else
                     "gemm overwrite" if insn.overwrite else "gemm"] += 1
                if insn.iter_out > 1 and insn.iter_in > 1:
                    seen["gemm two loops"] += 1
                seen[f"gemm overlap {insn.overlap}"] += 1
            elif isinstance(insn, Alu):
                seen["alu reset" if insn.reset else
                     f"alu {insn.alu_op.name} {'imm' if insn.use_imm else 'reg'}"] += 1
                if insn.use_imm and insn.imm < 0:
                    seen["alu negative imm"] += 1
                seen[f"alu overlap {insn.overlap}"] += 1
                if insn.alu_op == AluOp.REQUANT and not insn.reset:
                    seen[f"requant relu {bool(insn.imm & 32)}"] += 1
                    seen[f"requant shift {insn.imm & 31}"] += 1
                    if insn.imm >> 6:
                        seen["requant high imm bits"] += 1
            for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):
                if getattr(insn, flag):
                    seen[f"{type(insn).__name__} {flag}"] += 1
    wanted = ["load inp", "load wgt", "load acc", "load uop", "pad inp", "pad wgt", "pad acc",
              "pad uop", "short stride", "long stride", "store", "store stride", "gemm",
              "gemm reset", "gemm overwrite", "gemm two loops", "alu reset", "alu negative imm", "feedback",
              "eager", "filler", "burst", "concurrent overlap", "overlap refused",
              "requant relu True", "requant relu False", "requant shift 0",
              "requant shift 31", "requant high imm bits"]
    wanted += [f"alu {op.name} {mode}" for op in AluOp for mode in ("imm", "reg")]
    wanted += [f"{kind} overlap {flag}" for kind in ("gemm", "alu") for flag in (True, False)]
    wanted += ["Load push_next", "Load pop_next", "Store pop_prev", "Store push_prev",
               "Gemm pop_prev", "Gemm push_next", "Alu pop_next"]
    missing = [name for name in wanted if not seen[name]]
    assert not missing, f"never generated: {missing}"
