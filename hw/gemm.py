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

from vdla.hw.config import HwConfig

__all__ = ["GemmCore", "adder_tree"]


def adder_tree(terms, bits=None):
    """Sum values with a balanced tree; with ``bits``, every partial sum wraps to ``bits``."""
    terms = list(terms)
    while len(terms) > 1:
        paired = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if bits is not None:
            paired = [term[:bits] for term in paired]
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

        def sign_extended(value, bits):
            # (v ^ 2^(n-1)) - 2^(n-1), as an unsigned add modulo 2^32: Yosys would
            # write a plain sign extension as a concatenation of copied sign bits,
            # which Verilator evaluates bit by bit.
            half = 1 << (bits - 1)
            return ((value ^ half) + ((1 << acc_bits) - half))[:acc_bits]

        def inp(b, k):
            return sign_extended(self.inp.word_select(b * block_in + k, in_bits), in_bits)

        def wgt(o, k):
            return sign_extended(self.wgt.word_select(o * block_in + k, wgt_bits), wgt_bits)

        # All arithmetic is modulo 2^32 on unsigned words: each int8 is sign
        # extended once, products and sums keep their low 32 bits. That is the
        # wrapping int32 result, and it simulates much faster than letting
        # widths grow (Verilator re-extends signed operands at every step).
        def widen(name, value):
            word = Signal(acc_bits, name=name)
            m.d.comb += word.eq(value)
            return word

        inputs = {(b, k): widen(f"inp_{b}_{k}", inp(b, k))
                  for b in range(config.batch) for k in range(block_in)}
        weights = {(o, k): widen(f"wgt_{o}_{k}", wgt(o, k))
                   for o in range(config.block_out) for k in range(block_in)}
        for b in range(config.batch):
            for o in range(config.block_out):
                products = [(inputs[b, k] * weights[o, k])[:acc_bits] for k in range(block_in)]
                total = adder_tree(products, acc_bits)
                self_lane = self.product.word_select(b * config.block_out + o, acc_bits)
                m.d.comb += self_lane.eq(total)
        return m
