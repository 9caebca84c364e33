"""Fake implementations for `bench.compare`: known times on a fake clock, every call logged.

`FakeMachine` replaces the cpu target, onnxruntime and numpy calls of
`bench.compare` (and `bench.timing`'s clock): each call appends its column's
name to ``log`` and advances the clock by ``BASE_MS[name]``. ``cpu int8``
alone slows down round by round (round r: ``BASE_MS * (r + 1)``), so the
medians, the round totals and the ratios' ranges have values to check by hand.
"""

from __future__ import annotations

from vdla.bench import compare, onnx_peers, timing

__all__ = ["BASE_MS", "FakeMachine"]

BASE_MS = {"cpu int8": 1.0, "cpu fp32": 4.0, "ort fp32": 2.0, "ort qlinear u8": 0.5,
           "ort qlinear s8": 3.0, "ort convinteger": 2.5, "ort fp32 nospin": 5.0,
           "ort qlinear u8 nospin": 1.0, "ort qlinear s8 nospin": 3.0,
           "ort convinteger nospin": 2.5, "numpy fp32": 10.0}


class FakeMachine:
    """Installs the fakes with ``monkeypatch``; ``block`` is warm-up + timed calls per block."""

    def __init__(self, monkeypatch, block: int):
        self.now = 0.0
        self.log: list[str] = []
        self.block = block
        monkeypatch.setattr(timing, "clock", lambda: self.now)
        monkeypatch.setattr(compare, "_ort_version", lambda: ("fake", None))
        monkeypatch.setattr(compare, "_cpu_calls", lambda mode, workload, threads, inputs:
                            (self.timed(f"cpu {mode}"), "fake cpu target"))
        monkeypatch.setattr(onnx_peers, "session",
                            lambda name, op, inputs, threads, spinning=True:
                            self.timed(name + ("" if spinning else compare.NOSPIN)))
        monkeypatch.setattr(compare, "_numpy_calls",
                            lambda workload, inputs: self.timed("numpy fp32"))

    def timed(self, name: str):
        """One layer's call of column ``name`` and a check that accepts it."""
        made = 0

        def call():
            nonlocal made
            number = max(made - 1, 0) // self.block  # call 0 is the output check
            made += 1
            self.log.append(name)
            self.now += BASE_MS[name] * 1e-3 * (number + 1 if name == "cpu int8" else 1)
        return call, lambda out, references: (True, "fake")
