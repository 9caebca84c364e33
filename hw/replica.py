"""Registers kept in several copies, to split a wide fan-out between them.

A one-bit register that selects a multiplexer across every lane of a vector
(or an operand that feeds every row of the GEMM core's multipliers) drives
hundreds of LUTs; on an FPGA that net spreads over the lanes' logic and
its wire is a path's longest part. `copies` registers the bit once per group
of lanes, each copy driving its own. Synthesis merges identical registers
(Yosys's ``opt_merge``), so each copy's wire carries `REPLICA` and the
synthesis scripts (`hw.synth`, `hw.boards`) run `KEEP_REPLICAS` after reading
the design: it sets ``keep`` on the flip-flops that drive such wires (``keep``
on a wire alone does not stop the merge). In simulation the copies are plain
registers holding the same value.
"""

from __future__ import annotations

from amaranth import Signal

__all__ = ["REPLICA", "KEEP_REPLICAS", "copies"]

REPLICA = "vdla_replica"
# Yosys: ``keep`` on every flip-flop (Amaranth emits ``$dff`` cells) whose Q drives
# a wire marked `REPLICA`.
KEEP_REPLICAS = f"setattr -set keep 1 a:{REPLICA} %ci1:+$dff[Q] t:$dff %i"


def copies(name: str, count: int, shape=1, **options) -> list[Signal]:
    """``count`` registers of ``shape`` (``options``: further `Signal` arguments, e.g.
    ``reset_less``) to assign the same value (one plain signal when 1)."""
    if count == 1:
        return [Signal(shape, name=name, **options)]
    return [Signal(shape, name=f"{name}_{index}", attrs={REPLICA: 1}, **options)
            for index in range(count)]
