"""The board top: the accelerator, on-chip memory in place of DRAM, a UART host link.

Dataflow: host bytes arrive on ``uart_rx`` (`UartReceiver`), the `HostLink`
decodes the protocol of `hw.boards.protocol`, writes and reads the
`OnChipMemory` through its host byte port between programs, sets the
accelerator's program address and count and pulses its ``start``; while a
program runs the accelerator's memory port owns the on-chip memory. Replies
leave on ``uart_tx`` (`UartTransmitter`). ``running`` is for a LED.

Its only ports are ``uart_rx``, ``uart_tx`` and ``running``: the same design
is placed on an FPGA (`hw.boards.bitstream` wraps it with a board's pins) and built by
Verilator with a UART model on its pins (`sim.board_sim`), so the host driver
(`sim.board`) drives both through the same bytes.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.back import rtlil
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out, connect

from vdla.hw.accelerator import Accelerator
from vdla.hw.boards.dram import DRAM_KINDS, DramMemory, DramPins
from vdla.hw.boards.host_link import HostLink
from vdla.hw.boards.memory import OnChipMemory
from vdla.hw.boards.uart import UartReceiver, UartTransmitter
from vdla.hw.config import HwConfig
from vdla.hw.counters import rtl_counters

__all__ = ["BoardTop", "BOARD_TOP_NAME", "board_rtlil", "board_verilog", "DEFAULT_MEMORY_BYTES",
           "DEFAULT_CLOCKS_PER_BIT"]

BOARD_TOP_NAME = "vdla_board"
# Defaults for a design without a board preset: 64 KiB of memory, and a UART
# bit every 8 clocks (fast to simulate; a board derives its own from its clock).
DEFAULT_MEMORY_BYTES = 64 * 1024
# Received bytes buffered before the host link when the memory is a DRAM: a
# host access waits for the controller (a DDR3 refresh holds it for tRFC, 104
# controller cycles, then the row opens), longer than a character at the small
# clocks-per-bit of simulation (40 cycles at 4), and the receiver keeps one
# byte. The bytes that come meanwhile wait here; the link, faster than the
# line between refreshes, catches up.
DRAM_RX_FIFO_DEPTH = 8
DEFAULT_CLOCKS_PER_BIT = 8


class BoardTop(wiring.Component):
    """Accelerator + on-chip memory + UART host link (ports: the UART pins and a LED).

    Parameters
    ----------
    config : HwConfig
    memory_bytes : int
        Size of the on-chip memory standing in for DRAM (a power of two).
    memory_kind : str
        Its RAM (`hw.boards.memory.MEMORY_KINDS`), or a DRAM behind LiteDRAM
        (`hw.boards.dram.DRAM_KINDS`: ``memory_bytes`` is then the DRAM's size,
        and the controller's Verilog, `hw.boards.litedram_gen.litedram_verilog`, goes
        with the design's).
    clocks_per_bit : int
        Clock cycles per UART bit (clock frequency / baud rate).
    core : wiring.Component, optional
        The accelerator (default ``Accelerator(config)``); tests of the board
        flow pass a small stand-in with the same ports.
    dram_pins : hw.boards.dram.DramPins, optional
        A bitstream's DRAM pins and clock controls (with a DRAM ``memory_kind``):
        the controller drives the DRAM's PHY on them instead of the model.
    """

    def __init__(self, config: HwConfig, memory_bytes: int = DEFAULT_MEMORY_BYTES,
                 clocks_per_bit: int = DEFAULT_CLOCKS_PER_BIT,
                 core: wiring.Component | None = None, memory_kind: str = "bram",
                 dram_pins: DramPins | None = None):
        if dram_pins is not None and memory_kind not in DRAM_KINDS:
            raise ValueError(f"DRAM pins need a DRAM memory kind ({', '.join(DRAM_KINDS)}), "
                             f"not {memory_kind!r}")
        self.config = config
        self.core = core
        self.dram_pins = dram_pins
        self.memory_bytes = memory_bytes
        self.memory_kind = memory_kind
        self.clocks_per_bit = clocks_per_bit
        super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "running": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.accelerator = accelerator = self.core or Accelerator(self.config)
        m.submodules.link = link = HostLink(self.config, self.memory_bytes, self.memory_kind,
                                            dram_phy=self.dram_pins is not None)
        if self.memory_kind in DRAM_KINDS:
            memory = DramMemory(self.config, self.memory_kind, self.dram_pins)
            m.d.comb += [link.host_busy.eq(memory.host_busy), memory.csr_addr.eq(link.csr_addr),
                         memory.csr_write.eq(link.csr_write), memory.csr_wdata.eq(link.csr_wdata),
                         link.csr_rdata.eq(memory.csr_rdata)]
        else:
            memory = OnChipMemory(self.config, self.memory_bytes, self.memory_kind)
        m.submodules.memory = memory
        m.submodules.receiver = receiver = UartReceiver(self.clocks_per_bit)
        m.submodules.transmitter = transmitter = UartTransmitter(self.clocks_per_bit)

        m.d.comb += [receiver.rx.eq(self.uart_rx), self.uart_tx.eq(transmitter.tx),
                     self.running.eq(link.running)]
        if self.memory_kind in DRAM_KINDS:
            m.submodules.rx_fifo = rx_fifo = SyncFIFOBuffered(width=8, depth=DRAM_RX_FIFO_DEPTH)
            connect(m, receiver.data, rx_fifo.w_stream)
            connect(m, rx_fifo.r_stream, link.rx)
        else:
            connect(m, receiver.data, link.rx)
        connect(m, link.tx, transmitter.data)
        connect(m, accelerator.mem_rd_req, memory.rd_req)
        connect(m, memory.rd_data, accelerator.mem_rd_data)
        connect(m, accelerator.mem_wr_req, memory.wr_req)
        connect(m, accelerator.mem_wr_data, memory.wr_data)
        m.d.comb += [
            memory.host_owns.eq(link.host_owns), memory.host_addr.eq(link.host_addr),
            memory.host_write.eq(link.host_write), memory.host_wdata.eq(link.host_wdata),
            memory.host_read.eq(link.host_read), link.host_rdata.eq(memory.host_rdata),
            accelerator.start.eq(link.start), accelerator.insn_addr.eq(link.insn_addr),
            accelerator.insn_count.eq(link.insn_count), link.done.eq(accelerator.done),
        ]
        m.d.comb += [getattr(link, f"counter_{name}").eq(getattr(accelerator, f"counter_{name}"))
                     for name in rtl_counters(self.config)]
        return m


def board_rtlil(config: HwConfig, memory_bytes: int = DEFAULT_MEMORY_BYTES,
                clocks_per_bit: int = DEFAULT_CLOCKS_PER_BIT, memory_kind: str = "bram") -> str:
    """RTLIL of `BoardTop` (all-zero memory initialisation left out, as in `hw.generate`)."""
    from vdla.hw.generate import (strip_zero_memory_init, without_zero_memory_init,
                                  mark_collision_dont_care)
    top = BoardTop(config, memory_bytes, clocks_per_bit, memory_kind=memory_kind)
    with without_zero_memory_init() as skipped:
        text = rtlil.convert(top, name=BOARD_TOP_NAME, emit_src=False)
    text = text if skipped else strip_zero_memory_init(text)
    return mark_collision_dont_care(text) if config.ram_collision_dont_care else text


def board_verilog(config: HwConfig, memory_bytes: int = DEFAULT_MEMORY_BYTES,
                  clocks_per_bit: int = DEFAULT_CLOCKS_PER_BIT, memory_kind: str = "bram") -> str:
    """Verilog of `BoardTop`, for Verilator (the same RTLIL as `board_rtlil`)."""
    from amaranth.back.verilog import _convert_rtlil_text
    return _convert_rtlil_text(board_rtlil(config, memory_bytes, clocks_per_bit, memory_kind),
                               strip_internal_attrs=True)
