"""The GEMM core's datapath: one ``BATCH x BLOCK_IN`` by ``BLOCK_OUT x BLOCK_IN``
int8 product per cycle.

`GemmCore` is combinational: ``inp`` (an inp element) and ``wgt`` (a wgt
element) in, ``product`` out, where ``product[b, o] = sum_k inp[b, k] *
wgt[o, k]`` in int32, wrapping (``acc += inp @ wgt.T`` once added to the
accumulator). Elements are packed little endian, scalar ``[r, c]`` of an
``R x C`` element at bits ``8 * (r * C + c)`` (32 * ... for int32), the DRAM
layout of `runtime.layout`. Each dot product is summed by a balanced adder
tree. The compute module (`hw.compute`) registers the inputs (SRAM read data)
and the output, so the core is one pipeline stage there and accepts one
micro-op per cycle.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import HwConfig

__all__ = ["GemmCore", "adder_tree"]


def adder_tree(terms):
    """Sum a list of values with a balanced tree (shallow logic, fast simulation)."""
    terms = list(terms)
    while len(terms) > 1:
        paired = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            paired.append(terms[-1])
        terms = paired
    return terms[0]


class GemmCore(wiring.Component):
    """``product = inp @ wgt.T`` (int8 x int8 -> int32, wrapping), combinational.

    Ports
    -----
    inp : In(inp element bits)
    wgt : In(wgt element bits)
    product : Out(acc element bits)
    """

    def __init__(self, config: HwConfig):
        self.config = config
        super().__init__({
            "inp": In(config.element_bytes("inp") * 8),
            "wgt": In(config.element_bytes("wgt") * 8),
            "product": Out(config.element_bytes("acc") * 8),
        })

    def elaborate(self, platform):
        m = Module()
        config = self.config
        in_bits, wgt_bits, acc_bits = (config.element_bits(k) for k in ("inp", "wgt", "acc"))
        block_in = config.block_in

        def inp(b, k):
            return self.inp.word_select(b * block_in + k, in_bits).as_signed()

        def wgt(o, k):
            return self.wgt.word_select(o * block_in + k, wgt_bits).as_signed()

        for b in range(config.batch):
            for o in range(config.block_out):
                total = adder_tree(inp(b, k) * wgt(o, k) for k in range(block_in))
                lane = Signal(acc_bits, name=f"dot_{b}_{o}")
                m.d.comb += [
                    lane.eq(total),
                    self.product.word_select(b * config.block_out + o, acc_bits).eq(lane),
                ]
        return m
