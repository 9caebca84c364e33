"""Dependency-token queue between two of the load, compute and store modules.

A token carries no data, so the queue is a counter. The producer offers a token
on the ``push`` stream (accepted while fewer than ``depth`` tokens are held);
the consumer takes one on the ``pop`` stream (valid while the count is
non-zero). A push and a pop in the same cycle leave the count unchanged; a
token pushed in one cycle can be popped from the next one on.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.layouts import TokenSignature

__all__ = ["TokenQueue"]


class TokenQueue(wiring.Component):
    """A token queue of ``depth`` entries.

    Ports
    -----
    push : In(stream of nothing)
        A token from the producer.
    pop : Out(stream of nothing)
        A token to the consumer.
    count : Out(16)
        Tokens held (for status reporting).
    """

    def __init__(self, depth: int):
        if depth < 1:
            raise ValueError(f"token queue depth must be positive, got {depth}")
        self.depth = depth
        super().__init__({
            "push": In(TokenSignature),
            "pop": Out(TokenSignature),
            "count": Out(16),
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
        with m.If(pushed & ~popped):
            m.d.sync += count.eq(count + 1)
        with m.Elif(popped & ~pushed):
            m.d.sync += count.eq(count - 1)
        return m
