"""Dependency tokens of the random programs: emitting instructions race- and deadlock-free.

The generator keeps the instruction stream here. `TokenStream._append` adds
an instruction that must follow given instructions of the adjacent modules:
it pops a token from each such producer's queue, giving the producer's latest
instruction a push flag after the fact (or adding a filler instruction that
pushes) when no suitable token is in flight, and pops fillers in the way.
Random extra ("eager") pushes and pops make queues hold several tokens at
once. Every push is checked to keep its queue within ``token_queue_depth``
whatever the timing; `check_token_discipline` checks a finished stream
against the same rules independently. The queues and their flags are the
ISA's (`vdla.hw.isa.TOKEN_QUEUES`, `QUEUE_FLAGS`).
"""

from __future__ import annotations

from vdla.hw.isa import (COMPUTE_MODULE as COMPUTE, LOAD_MODULE as LOAD, QUEUE_FLAGS,
                         STORE_MODULE as STORE, Finish, Instruction, Load, MemType, Store,
                         module_of)

__all__ = ["TokenStream", "check_token_discipline"]


class TokenStream:
    """Mixin of the generator: the instruction stream and its token queues.

    Uses the generator's ``rng``, ``options``, ``config``, ``depth``,
    ``regions``, ``region_elements``, ``filler_sink``, ``reserved_acc`` and
    ``counts``, and its ``_units`` (compute's overlap decision), ``_uop_filler``
    and ``_element_base``.
    """

    def _init_tokens(self):
        self.stream: list[list] = []            # [module, instruction]
        self.module_positions: list[list[int]] = [[], [], []]  # local index -> stream position
        # token queues: push stream positions and local indices, pops done
        self.push_positions = {q: [] for q in QUEUE_FLAGS}
        self.push_locals = {q: [] for q in QUEUE_FLAGS}
        self.pop_positions = {q: [] for q in QUEUE_FLAGS}
        self.covered = {q: -1 for q in QUEUE_FLAGS}   # producer local index known done
        self.token_depth = self.config.token_queue_depth
        self.max_pending = max(0, min(self.options.max_pending_tokens, self.token_depth - 1))
        self.eager = self.options.eager_token_probability if self.max_pending > 0 else 0.0

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

    def _compute_after(self, producer: int, needed: int) -> int:
        """Local index of a compute instruction ordered after ``producer``'s
        instruction ``needed``: the relay of a load <-> store dependency through DRAM."""
        self.counts["dram_relays"] += 1
        return self._append(COMPUTE, self._uop_filler(), {producer: needed})


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
        for queue, (_, pop_flag) in QUEUE_FLAGS.items():
            if queue[1] == module and getattr(insn, pop_flag):
                assert popped[queue] < len(pushes[queue]), \
                    f"{position}: pops {queue} with no earlier push"
                popped[queue] += 1
        for queue, (push_flag, _) in QUEUE_FLAGS.items():
            if queue[0] == module and getattr(insn, push_flag):
                pushes[queue].append(position)
                assert len(pushes[queue]) - popped[queue] <= token_queue_depth, \
                    f"{position}: {queue} may hold more than {token_queue_depth} tokens"
    for queue in QUEUE_FLAGS:
        assert popped[queue] == len(pushes[queue]), f"tokens left in {queue}"
    assert isinstance(instructions[-1], Finish), "FINISH is not last"
    assert sum(isinstance(i, Finish) for i in instructions) == 1, "more than one FINISH"
