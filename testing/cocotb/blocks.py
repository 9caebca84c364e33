"""One Verilog top holding every block the unit benches test, side by side.

Verilator spends most of a cocotb build compiling its own runtime, so the
unit benches share one model: `Blocks` instantiates two token queues (depth 4
and depth 1), the vector ALU, the GEMM core, the load module and the store
module, and forwards each block's ports to the top under the block's name
(``tq__push__valid``, ``load__mem_inp__req__payload``, ...). The blocks are
not connected to each other. `BLOCKS_CONFIG` is tiny with a 64-bit bus, so
inp and out elements (4 bytes) are narrower than a beat: loads start
mid-beat and stores need byte strobes.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import Out, connect, flipped

from vdla.hw.alu import VectorAlu
from vdla.hw.config import PRESETS, HwConfig
from vdla.hw.gemm import GemmCore
from vdla.hw.load import LoadUnit
from vdla.hw.store import StoreUnit
from vdla.hw.token_queue import TokenQueue

BLOCKS_CONFIG = PRESETS["tiny"].replace(dram_bus_bits=64, name="tiny-bus64")
TOP = "vdla_blocks"
TOKEN_QUEUE_DEPTHS = {"tq": 4, "tq1": 1}


class Blocks(wiring.Component):
    def __init__(self, config: HwConfig):
        self.parts = {name: TokenQueue(depth) for name, depth in TOKEN_QUEUE_DEPTHS.items()}
        self.parts.update(alu=VectorAlu(config), gemm=GemmCore(config), load=LoadUnit(config),
                          store=StoreUnit(config))
        super().__init__({name: Out(part.signature) for name, part in self.parts.items()})

    def elaborate(self, platform):
        m = Module()
        for name, part in self.parts.items():
            m.submodules[name] = part
            connect(m, flipped(getattr(self, name)), part)
        return m


def blocks_verilog(config: HwConfig = BLOCKS_CONFIG) -> str:
    return verilog.convert(Blocks(config), name=TOP, emit_src=False)
