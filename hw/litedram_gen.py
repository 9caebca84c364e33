"""A LiteDRAM controller for the board top, generated from Python with LiteDRAM's own API.

`litedram_verilog` builds, with Migen, a `LiteDRAMCore` (the controller: bank
machines, refresher, command multiplexer and a crossbar) for one of the
boards' DRAMs (`MODULES`: the module, its PHY's settings, the rate and the
clock), with one native user port as wide as the accelerator's DRAM bus
(LiteDRAM's converter splits each word into the module's beats, or groups
consecutive words into one controller word), and for simulation LiteDRAM's
`SDRAMPHYModel` behind it: the DRAM module model, whose banks keep their
open rows, whose controller must refresh them every tREFI and
precharge/activate on a row change, with the module's timings in controller
cycles and the PHY's read and write latencies. The top module
`LITEDRAM_TOP_NAME` has these ports (``N`` the bus width, ``A`` the user
address bits, in bus words):

* ``sys_clk``, ``sys_rst``;
* ``cmd_valid``, ``cmd_ready``, ``cmd_we``, ``cmd_addr[A]``, ``cmd_last``: one
  word read or written per command (LiteDRAM's native port); ``cmd_last``
  ends a run of consecutive words (a converter that groups words into a wider
  controller word sends a partial group on it instead of waiting for more);
* ``wdata_valid``, ``wdata_ready``, ``wdata_data[N]``, ``wdata_we[N/8]``: the
  data of a write command, with byte enables;
* ``rdata_valid``, ``rdata_ready``, ``rdata_data[N]``: read data, in command order.

The Verilog is deterministic (Migen names signals from the Python code) and
cached by `hw.cache.get_or_build` (kind ``verilog``), keyed by the table's
entry, the width and the LiteDRAM/LiteX/Migen versions.
"""

from __future__ import annotations

import dataclasses
from importlib import metadata

from vdla.errors import VdlaError
from vdla.hw import cache

__all__ = ["DramError", "DramModule", "MODULES", "PHYS", "LITEDRAM_TOP_NAME", "litedram_verilog",
           "litedram_versions"]

LITEDRAM_TOP_NAME = "vdla_litedram"
RECIPE_VERSION = 2
VERILOG_NAME = "litedram.v"


class DramError(VdlaError):
    """A DRAM controller that cannot be generated here (LiteDRAM missing)."""


@dataclasses.dataclass(frozen=True)
class DramModule:
    """A board's DRAM as LiteDRAM knows it: one row of the table of memory kinds.

    Attributes
    ----------
    module : str
        The `litedram.modules` class (its geometry and timings).
    memtype : str
        ``SDR``, ``DDR3``... (the module's, checked).
    data_bits : int
        The chips' data bus width on the board.
    rate : str
        Controller clock to DRAM clock (``1:1`` for SDR, ``1:2`` for the ECP5's
        DDR3 PHY): the DFI phases per controller cycle, which the module's
        timings in cycles also depend on.
    clock_hz : float
        The controller's clock (the board's design clock): the module's timings
        in cycles, the refresh interval among them, derive from it.
    board : str
        The board it is on (a `hw.board_table.BOARDS` name, whose clock is
        ``clock_hz``).
    phy : str or None
        The LiteDRAM PHY (a `PHYS` name) whose settings the model takes: its
        phases, CAS latencies and read/write latencies in controller cycles;
        ``None``, the model's own settings for ``memtype``
        (`litedram.phy.model.get_sdram_phy_settings`).
    """

    module: str
    memtype: str
    data_bits: int
    rate: str
    clock_hz: float
    board: str
    phy: str | None = None

    @property
    def size_bytes(self) -> int:
        """The DRAM's capacity: what the controller's user port addresses."""
        from litedram import modules
        cls = getattr(modules, self.module)
        return cls.nbanks * cls.nrows * cls.ncols * self.data_bits // 8


# The table of memory kinds (`hw.board_dram.DRAM_KINDS`, ``--board-memory``).
MODULES = {
    # The ULX3S's 32 MB SDRAM (litex-boards' ulx3s target: MT48LC16M16, 16
    # bits), at the ULX3S board's 50 MHz (`hw.board_table`).
    "litedram-sdram": DramModule("MT48LC16M16", "SDR", 16, "1:1", 50e6, "ulx3s-85f"),
    # The ECPIX-5's 512 MB DDR3 (litex-boards' ecpix5 target: MT41K256M16, 16
    # bits, ECP5DDRPHY at 1:2), at the ECPIX-5 board's 100 MHz: the DRAM at
    # 200 MHz, 400 MT/s (litex-boards runs it at 75 MHz by default).
    "litedram-ddr3": DramModule("MT41K256M16", "DDR3", 16, "1:2", 100e6, "ecpix5-85f",
                                phy="ECP5DDRPHY"),
}


def _ecp5_ddr3_settings(dram: DramModule, module):
    """The settings of LiteDRAM's `ECP5DDRPHY` for this module at this clock: the PHY
    itself computes them (CL/CWL for its DRAM clock, its read latency through
    the DDR input gearing), built here on stand-in pads that are never converted."""
    from litedram.phy.ecp5ddrphy import ECP5DDRPHY
    from migen import Record
    geometry = module.geom_settings
    strobes = dram.data_bits // 8
    pads = Record([("a", geometry.addressbits), ("ba", geometry.bankbits), ("ras_n", 1),
                   ("cas_n", 1), ("we_n", 1), ("cke", 1), ("odt", 1), ("reset_n", 1),
                   ("clk_p", 1), ("dq", dram.data_bits), ("dqs_p", strobes), ("dm", strobes)])
    return ECP5DDRPHY(pads, sys_clk_freq=dram.clock_hz).settings


# The PHYs whose settings a `DramModule` may name.
PHYS = {"ECP5DDRPHY": _ecp5_ddr3_settings}


def litedram_versions() -> str:
    return " ".join(f"{name} {metadata.version(name)}" for name in ("litedram", "litex", "migen"))


def _generate(dram: DramModule, bus_bits: int) -> tuple[str, int]:
    """Verilog of the controller + module model, and its user port's address bits."""
    try:
        from litedram import modules
    except ImportError:
        raise DramError(f"the {dram.module} DRAM needs LiteDRAM: "
                        "pip install 'vdla[dram]'") from None
    from litedram.core import LiteDRAMCore
    from litedram.phy.model import SDRAMPHYModel
    from migen import Module
    from migen.fhdl.verilog import convert

    clock_hz = dram.clock_hz
    module = getattr(modules, dram.module)(clock_hz, dram.rate)
    if module.memtype != dram.memtype:
        raise DramError(f"{dram.module} is a {module.memtype} module, not {dram.memtype}")
    if dram.phy is not None and dram.phy not in PHYS:
        raise DramError(f"phy: one of {', '.join(PHYS)}, got {dram.phy!r}")
    settings = PHYS[dram.phy](dram, module) if dram.phy else None
    if settings is not None and dram.rate != f"1:{settings.nphases}":
        raise DramError(f"{dram.phy} runs {settings.nphases} DFI phases per controller cycle "
                        f"(1:{settings.nphases}), not {dram.rate}")

    class Top(Module):
        def __init__(self):
            self.submodules.phy = phy = SDRAMPHYModel(module, settings=settings,
                                                      data_width=dram.data_bits,
                                                      clk_freq=clock_hz)
            self.submodules.core = core = LiteDRAMCore(phy, module.geom_settings,
                                                       module.timing_settings, clock_hz)
            self.port = core.crossbar.get_port(mode="both", data_width=bus_bits)

    top = Top()
    port = top.port
    names = {port.cmd.valid: "cmd_valid", port.cmd.ready: "cmd_ready", port.cmd.we: "cmd_we",
             port.cmd.addr: "cmd_addr", port.cmd.last: "cmd_last",
             port.wdata.valid: "wdata_valid", port.wdata.ready: "wdata_ready",
             port.wdata.data: "wdata_data", port.wdata.we: "wdata_we",
             port.rdata.valid: "rdata_valid", port.rdata.ready: "rdata_ready",
             port.rdata.data: "rdata_data"}
    for signal, name in names.items():
        signal.name_override = name
    output = convert(top, ios=set(names), name=LITEDRAM_TOP_NAME)
    return str(output), port.address_width


def litedram_verilog(dram: DramModule, bus_bits: int) -> tuple[str, int]:
    """The generated controller's Verilog (from the cache) and its user address bits."""
    key = cache.key_of(f"recipe {RECIPE_VERSION}", dram.module, dram.memtype,
                       str(dram.data_bits), dram.rate, str(bus_bits), repr(float(dram.clock_hz)),
                       str(dram.phy), litedram_versions(), length=20)

    def build(work):
        text, address_bits = _generate(dram, bus_bits)
        (work / VERILOG_NAME).write_text(text)
        (work / "address_bits").write_text(str(address_bits))
    entry = cache.get_or_build("verilog", f"litedram-{key}", build,
                               [VERILOG_NAME, "address_bits"], what="LiteDRAM controller")
    return ((entry.directory / VERILOG_NAME).read_text(),
            int((entry.directory / "address_bits").read_text()))
