"""The GEMM core's datapath: one ``BATCH x BLOCK_IN`` by ``BLOCK_OUT x BLOCK_IN``
int8 product per cycle, in two (or three) pipeline stages.

`GemmCore` takes ``inp`` (an inp element) and ``wgt`` (a wgt element) every
cycle and gives ``product[b, o] = sum_k inp[b, k] * wgt[o, k]`` (an acc
element, int32 lanes) `GemmCore.latency` cycles later, where the compute unit
adds it to the accumulator (``acc += inp @ wgt.T``). Elements are packed
little endian, scalar ``[r, c]`` of an ``R x C`` element at bits ``8 * (r * C +
c)`` (32 * ... for int32), the DRAM layout of `runtime.layout`.

Stage 1 multiplies: ``BATCH * BLOCK_OUT * BLOCK_IN`` signed 8x8 -> 16-bit
multipliers (what FPGA DSP blocks or small LUT multipliers implement), fed
straight from the SRAM read data, products registered. Stage 2 sums each dot
product with a balanced adder tree whose widths grow one bit per level (a
16-term dot product is at most 20 bits, so no sum wraps), registered and sign
extended to the int32 lane. With ``HwConfig.gemm_tree_stage`` the adder tree
spans two stages: the first sums groups of products (its lower levels), the
second the groups' registered sums, so `GemmCore.latency` is 3. Nothing is
wider than it needs to be: the synthesised netlist shows 8x8 ``$mul`` cells (a
test checks it).

The product registers carry the `PRODUCT` attribute. On iCE40 the flow keeps
them (`hw.synth.script_after_read`): Yosys 0.70's ``ice40_dsp`` otherwise
takes one product's register as the C/D input register of the ``SB_MAC16``
that adds it to another and, mapping the first multiplier, leaves that input
undriven -- products silently dropped (docs/yosys-ice40-dsp-bug.md). Kept, a
product register still goes inside its own ``SB_MAC16`` and the next one's
post-adder reads it from there: one DSP per product, no flip-flop or LUT
more; the attribute changes no preset's RTL behaviour.

The last ``HwConfig.lut_products`` product registers carry `LUT_PRODUCT`
instead: the flow turns their multipliers into adder trees before DSP mapping
(`hw.synth.script_after_read`), so they become LUTs and carry chains; the RTL
is the same.
"""

from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.config import HwConfig

__all__ = ["GemmCore", "adder_tree", "PRODUCT", "LUT_PRODUCT"]

# Mark the product registers' wires for the synthesis flow (see above).
PRODUCT = "vdla_product"
LUT_PRODUCT = "vdla_lut_product"


def adder_tree(terms):
    """Sum values with a balanced tree (Amaranth widths grow one bit per level)."""
    terms = list(terms)
    while len(terms) > 1:
        paired = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            paired.append(terms[-1])
        terms = paired
    return terms[0]


def _group_size(terms: int) -> int:
    """Products per first-stage group of a split tree: the lower half of its levels
    (rounded up); e.g. of 16 terms 4, so that each stage sums 4 values."""
    levels = max(terms - 1, 0).bit_length()
    return 1 << ((levels + 1) // 2)


class GemmCore(wiring.Component):
    """``product = inp @ wgt.T`` (int8 x int8 -> int32), `latency` cycles after its operands.

    Attributes
    ----------
    latency : int
        2 (multipliers, then the adder tree), or 3 with ``gemm_tree_stage``
        (multipliers, the tree's lower levels, its upper levels).

    Ports
    -----
    inp : In(inp element bits x ``gemm_operand_copies``)
        The same inp element once per copy (`hw.unit_pipeline` registers the
        copies): copy ``c`` feeds output rows ``c * block_out / copies`` on.
    wgt : In(wgt element bits)
    product : Out(acc element bits)
        Registered; the product of the operands given `latency` cycles earlier.
    """

    def __init__(self, config: HwConfig):
        self.config = config
        self.latency = 2 + config.gemm_tree_stage
        super().__init__({
            "inp": In(config.element_bytes("inp") * 8 * config.gemm_operand_copies),
            "wgt": In(config.element_bytes("wgt") * 8),
            "product": Out(config.element_bytes("acc") * 8),
        })

    def elaborate(self, platform):
        m = Module()
        config = self.config
        in_bits, wgt_bits, acc_bits = (config.element_bits(k) for k in ("inp", "wgt", "acc"))
        block_in = config.block_in

        element_bits = config.element_bytes("inp") * 8
        rows_per_copy = config.block_out // config.gemm_operand_copies

        def inp(b, o, k):
            copy = self.inp.word_select(o // rows_per_copy, element_bits)
            return copy.word_select(b * block_in + k, in_bits).as_signed()

        def wgt(o, k):
            return self.wgt.word_select(o * block_in + k, wgt_bits).as_signed()

        # Data registers without reset: the compute unit reads them only under
        # its own valid bits.
        first_lut = config.macs_per_cycle - config.lut_products
        for b in range(config.batch):
            for o in range(config.block_out):
                products = []
                for k in range(block_in):
                    index = (b * config.block_out + o) * block_in + k
                    mark = PRODUCT if index < first_lut else LUT_PRODUCT
                    product = Signal(signed(in_bits + wgt_bits), name=f"product_{b}_{o}_{k}",
                                     reset_less=True, attrs={mark: 1})
                    m.d.sync += product.eq(inp(b, o, k) * wgt(o, k))
                    products.append(product)
                if config.gemm_tree_stage:
                    size = _group_size(block_in)
                    groups = [products[i:i + size] for i in range(0, block_in, size)]
                    partials = []
                    for g, group in enumerate(groups):
                        partial_sum = adder_tree(group)
                        partial = Signal(signed(len(partial_sum)), name=f"partial_{b}_{o}_{g}",
                                         reset_less=True)
                        m.d.sync += partial.eq(partial_sum)
                        partials.append(partial)
                    products = partials
                total = adder_tree(products)
                lane = self.product.word_select(b * config.block_out + o, acc_bits)
                dot = Signal(signed(len(total)), name=f"dot_{b}_{o}", reset_less=True)
                m.d.sync += dot.eq(total)
                m.d.comb += lane.eq(dot)   # sign extended to the int32 lane
        return m
