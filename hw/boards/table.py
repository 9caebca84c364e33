"""The boards vdla builds bitstreams for: each board's platform, preset, FPGA part, clock and pins.

A table of facts below the two parts that read it: the synthesis flow
(`hw.synth`, which places a board preset as its board top on its board's
part) and the bitstream build (`hw.boards.bitstream`).
"""

from __future__ import annotations

import dataclasses
import importlib

from vdla.hw.boards.protocol import BAUD
from vdla.hw.boards.top import board_rtlil
from vdla.hw.config import PRESETS, HwConfig

__all__ = ["Board", "BOARDS"]


@dataclasses.dataclass(frozen=True)
class Board:
    """A board vdla builds bitstreams for.

    Attributes
    ----------
    name : str
        What ``vdla hw bitstream --board`` calls it.
    platform : str
        ``module:Class`` of its `amaranth-boards` platform.
    preset : str
        The `hw.config.PRESETS` name that fits it.
    memory_bytes : int
        On-chip memory standing in for DRAM.
    baud : int
        UART baud rate of the bitstream (the host must use the same).
    target : str
        ``ecp5`` or ``ice40`` (for `hw.synth`).
    device : str
        The FPGA part (a `hw.synth.PARTS` name).
    clock_mhz : float
        The design's clock, made by the FPGA's PLL from the board's oscillator.
    led : str
        The platform resource lit while a program runs; ``resource.subsignal`` for
        one colour of an RGB LED (``rgb_led.g``).
    memory_kind : str
        The RAM of that memory (`hw.boards.memory.MEMORY_KINDS`).
    router : str or None
        nextpnr's router for this board's designs (None: the family's,
        `hw.synth.parts.FAMILIES`); place and route and the bitstream use it.
    dram : str or None
        The board's DRAM that its bitstream reaches through LiteDRAM and the
        DRAM's PHY (a `hw.boards.litedram_gen.MODULES` kind, at this board's clock),
        in place of the on-chip memory; None: the bitstream has the on-chip
        memory. `rtlil` (the placement estimate of `hw.synth`) keeps the
        on-chip memory either way.
    """

    name: str
    platform: str
    preset: str
    memory_bytes: int
    baud: int
    target: str
    device: str
    clock_mhz: float
    led: str = "led"
    memory_kind: str = "bram"
    dram: str | None = None
    router: str | None = None

    def platform_instance(self):
        module, _, cls = self.platform.partition(":")
        return getattr(importlib.import_module(module), cls)()

    @property
    def config(self) -> HwConfig:
        return PRESETS[self.preset]

    def clocks_per_bit(self, clock_hz: float) -> int:
        return max(4, round(clock_hz / self.baud))

    def pins(self) -> dict[str, str]:
        """The board's pins of `BoardTop`'s ports: its oscillator's (standing in for the
        PLL's clock), the UART's and the LED's, by the platform's resources."""
        platform = self.platform_instance()
        def subsignals(resource):
            return {signal.name: signal.ios[0].names[0] for signal in resource.ios}

        uart = subsignals(platform.lookup("uart", 0))
        led, _, colour = self.led.partition(".")
        led_resource = platform.lookup(led, 0)
        return {"clk": platform.lookup(platform.default_clk).ios[0].names[0],
                "uart_rx": uart["rx"], "uart_tx": uart["tx"],
                "running": (subsignals(led_resource)[colour] if colour
                            else led_resource.ios[0].names[0])}

    def rtlil(self, config: HwConfig | None = None) -> str:
        """RTLIL of this board's `BoardTop` around ``config`` (its preset by default) as
        its bitstream builds it: the board's memory, the UART divisor at its PLL clock."""
        return board_rtlil(config or self.config, self.memory_bytes,
                           self.clocks_per_bit(self.clock_mhz * 1e6), self.memory_kind)


BOARDS: dict[str, Board] = {board.name: board for board in (
    # Its bitstream has the board's 32 MiB SDRAM through LiteDRAM (`hw.boards.litedram_gen`).
    Board("ulx3s-85f", "amaranth_boards.ulx3s:ULX3S_85F_Platform", "ulx3s", 128 * 1024,
          BAUD, "ecp5", "LFE5U-85F", clock_mhz=50.0, dram="litedram-sdram"),
    # The same core on the ECPIX-5's speed-8 part (benchmarks/README.md, "ECPIX-5"),
    # its bitstream with the board's 512 MiB DDR3 through LiteDRAM (`hw.boards.litedram_gen`),
    # at 80 MHz: with the controller and PHY the board top misses 100 MHz and
    # meets 85 only on some placements (benchmarks/README.md, "The boards'
    # bitstreams with their DRAMs").
    Board("ecpix5-85f", "amaranth_boards.ecpix5:ECPIX585Platform", "ecpix5", 128 * 1024,
          BAUD, "ecp5", "LFE5UM5G-85F-8BG554", clock_mhz=80.0, led="rgb_led.g",
          dram="litedram-ddr3"),
    # VTA's 256 MACs per cycle on the same board (`hw.config.PRESETS["ecpix5-256"]`,
    # 1x32x8) with its DDR3, at the DDR3's 80 MHz, which its bitstream meets. With
    # on-chip memory instead its bitstream missed the 100 MHz the board then had,
    # and a layer's image did not fit 128 KiB either. router1: router2 does not
    # converge on this board top, its overused wires falling for a while and then
    # rising (benchmarks/README.md, "ECPIX-5, 256 MACs").
    Board("ecpix5-85f-256", "amaranth_boards.ecpix5:ECPIX585Platform", "ecpix5-256",
          128 * 1024, BAUD, "ecp5", "LFE5UM5G-85F-8BG554", clock_mhz=80.0,
          led="rgb_led.g", dram="litedram-ddr3", router="router1"),
    # The UP5K's four single-port RAMs (128 KiB) hold the memory; its block RAMs
    # are the accelerator's. 27 MHz: the PLL makes it exactly from 12, 27 clocks
    # per UART bit, and the board top routes above it (benchmarks/README.md, "iCEBreaker").
    Board("icebreaker", "amaranth_boards.icebreaker:ICEBreakerPlatform", "icebreaker", 128 * 1024,
          BAUD, "ice40", "iCE40UP5K", clock_mhz=27.0, led="led_g", memory_kind="spram"),
)}
