"""Dependency-token queue between two of the load, compute and store modules.

A token carries no data, so the queue is a counter. The producer offers a token
on the ``push`` stream (accepted while fewer than ``depth`` tokens are held);
the consumer takes one on the ``pop`` stream (valid while the count is
non-zero). A push and a pop in the same cycle leave the count unchanged; a
token pushed in one cycle can be popped from the next one on.

The load and store modules run one instruction at a time through the same
token handshake: ``IDLE`` (take a word from ``cmds``), ``POP`` (wait for the
token the instruction asks for and take it), the module's own states, then
``PUSH`` (offer the token it asks for, retire, back to ``IDLE``).
`take_instruction`, `pop_token` and `push_token` emit those shared states.
"""

from __future__ import annotations

from contextlib import contextmanager

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.counters import STATUS_BITS
from vdla.hw.layouts import TokenSignature

__all__ = ["TokenQueue", "take_instruction", "pop_token", "push_token"]


class TokenQueue(wiring.Component):
    """A token queue of ``depth`` entries.

    Ports
    -----
    push : In(stream of nothing)
        A token from the producer.
    pop : Out(stream of nothing)
        A token to the consumer.
    count : Out(STATUS_BITS)
        Tokens held (for status reporting).

    With ``registered_valid``, ``pop.valid`` is a flip-flop kept beside the count
    (`HwConfig.registered_dispatch`), not a comparator on it.
    """

    def __init__(self, depth: int, registered_valid: bool = False):
        if depth < 1:
            raise ValueError(f"token queue depth must be positive, got {depth}")
        self.depth = depth
        self.registered_valid = registered_valid
        super().__init__({
            "push": In(TokenSignature),
            "pop": Out(TokenSignature),
            "count": Out(STATUS_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        count = Signal(range(self.depth + 1))
        pushed = self.push.valid & self.push.ready
        popped = self.pop.valid & self.pop.ready
        m.d.comb += [
            self.push.ready.eq(count < self.depth),
            self.pop.valid.eq(count != 0),
            self.count.eq(count),
        ]
        if self.registered_valid:
            # ``pop.valid`` from a register kept beside the count (same value).
            holds = Signal()
            m.d.comb += self.pop.valid.eq(holds)
        with m.If(pushed & ~popped):
            m.d.sync += count.eq(count + 1)
            if self.registered_valid:
                m.d.sync += holds.eq(1)
        with m.Elif(popped & ~pushed):
            m.d.sync += count.eq(count - 1)
            if self.registered_valid:
                m.d.sync += holds.eq(count != 1)
        return m


# ---------------------------------------------------------------------- module states
def take_instruction(m: Module, unit, word: Signal) -> None:
    """State ``IDLE``: latch the next word of ``unit.cmds`` into ``word``, go to ``POP``.

    ``unit`` has ``cmds`` (an instruction stream) and ``idle`` (high in this state).
    """
    with m.State("IDLE"):
        m.d.comb += [unit.cmds.ready.eq(1), unit.idle.eq(1)]
        with m.If(unit.cmds.valid):
            m.d.sync += word.eq(unit.cmds.payload)
            m.next = "POP"


@contextmanager
def pop_token(m: Module, unit, pop, queue):
    """State ``POP``: take a token from ``queue`` if ``pop`` asks for one.

    The body of the ``with`` runs (and picks the next state) in the cycle the
    token is taken, or at once when ``pop`` is low; until then
    ``unit.wait_token`` is high.
    """
    with m.State("POP"):
        with m.If(~pop | queue.valid):
            m.d.comb += queue.ready.eq(pop)
            yield
        with m.Else():
            m.d.comb += unit.wait_token.eq(1)


def push_token(m: Module, unit, push, queue, retired: Signal) -> None:
    """State ``PUSH``: offer a token to ``queue`` if ``push`` asks, then retire.

    Once the token is taken (at once when ``push`` is low) ``retired`` counts
    the instruction and the next state is ``IDLE``; until then
    ``unit.wait_token`` is high.
    """
    with m.State("PUSH"):
        with m.If(~push | queue.ready):
            m.d.comb += queue.valid.eq(push)
            m.d.sync += retired.eq(retired + 1)
            m.next = "IDLE"
        with m.Else():
            m.d.comb += unit.wait_token.eq(1)
