"""A LiteDRAM controller for the board top, generated from Python with LiteDRAM's own API.

`litedram_verilog` builds, with Migen, a `LiteDRAMCore` (the controller: bank
machines, refresher, command multiplexer and a crossbar) for the board's DRAM
module (`MODULES`), with one native user port as wide as the accelerator's
DRAM bus (LiteDRAM's up-converter splits each word into the module's beats),
and for simulation LiteDRAM's `SDRAMPHYModel` behind it: the DRAM module
model, whose banks keep their open rows, whose controller must refresh them
every tREFI and precharge/activate on a row change, with the module's
timings in controller cycles. The top module `LITEDRAM_TOP_NAME` has these
ports (``N`` the bus width, ``A`` the user address bits, in bus words):

* ``sys_clk``, ``sys_rst``;
* ``cmd_valid``, ``cmd_ready``, ``cmd_we``, ``cmd_addr[A]``: one word read or
  written per command (LiteDRAM's native port);
* ``wdata_valid``, ``wdata_ready``, ``wdata_data[N]``, ``wdata_we[N/8]``: the
  data of a write command, with byte enables;
* ``rdata_valid``, ``rdata_ready``, ``rdata_data[N]``: read data, in command order.

The Verilog is deterministic (Migen names signals from the Python code) and
cached by `hw.cache.get_or_build` (kind ``verilog``), keyed by the module,
the width, the clock and the LiteDRAM/LiteX/Migen versions.
"""

from __future__ import annotations

import dataclasses
from importlib import metadata

from vdla.errors import VdlaError
from vdla.hw import cache

__all__ = ["DramError", "DramModule", "MODULES", "LITEDRAM_TOP_NAME", "litedram_verilog", "litedram_versions"]

LITEDRAM_TOP_NAME = "vdla_litedram"
RECIPE_VERSION = 1
VERILOG_NAME = "litedram.v"


class DramError(VdlaError):
    """A DRAM controller that cannot be generated here (LiteDRAM missing)."""


@dataclasses.dataclass(frozen=True)
class DramModule:
    """A board's DRAM as LiteDRAM knows it.

    Attributes
    ----------
    module : str
        The `litedram.modules` class (its geometry and timings).
    memtype : str
        ``SDR``, ``DDR3``... (picks the PHY settings of the model).
    data_bits : int
        The chips' data bus width on the board.
    rate : str
        Controller clock to DRAM clock (``1:1`` for SDR).
    clock_hz : float
        The controller's clock (the board's design clock): the module's timings
        in cycles, the refresh interval among them, derive from it.
    """

    module: str
    memtype: str
    data_bits: int
    rate: str
    clock_hz: float

    @property
    def size_bytes(self) -> int:
        from litedram import modules
        cls = getattr(modules, self.module)
        return cls.nbanks * cls.nrows * cls.ncols * self.data_bits // 8


# The ULX3S's 32 MB SDRAM (litex-boards' ulx3s target: MT48LC16M16, 16 bits).
# At the ULX3S board's 50 MHz (`hw.boards`).
MODULES = {"litedram-sdram": DramModule("MT48LC16M16", "SDR", 16, "1:1", 50e6)}


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

    class Top(Module):
        def __init__(self):
            self.submodules.phy = phy = SDRAMPHYModel(module, data_width=dram.data_bits,
                                                      clk_freq=clock_hz)
            self.submodules.core = core = LiteDRAMCore(phy, module.geom_settings,
                                                       module.timing_settings, clock_hz)
            self.port = core.crossbar.get_port(mode="both", data_width=bus_bits)

    top = Top()
    port = top.port
    ios = {port.cmd.valid, port.cmd.ready, port.cmd.we, port.cmd.addr,
           port.wdata.valid, port.wdata.ready, port.wdata.data, port.wdata.we,
           port.rdata.valid, port.rdata.ready, port.rdata.data}
    names = {port.cmd.valid: "cmd_valid", port.cmd.ready: "cmd_ready", port.cmd.we: "cmd_we",
             port.cmd.addr: "cmd_addr", port.wdata.valid: "wdata_valid",
             port.wdata.ready: "wdata_ready", port.wdata.data: "wdata_data",
             port.wdata.we: "wdata_we", port.rdata.valid: "rdata_valid",
             port.rdata.ready: "rdata_ready", port.rdata.data: "rdata_data"}
    for signal, name in names.items():
        signal.name_override = name
    output = convert(top, ios=ios, name=LITEDRAM_TOP_NAME)
    return str(output), port.address_width


def litedram_verilog(dram: DramModule, bus_bits: int) -> tuple[str, int]:
    """The generated controller's Verilog (from the cache) and its user address bits."""
    key = cache.key_of(f"recipe {RECIPE_VERSION}", dram.module, dram.memtype,
                       str(dram.data_bits), dram.rate, str(bus_bits), repr(float(dram.clock_hz)),
                       litedram_versions(), length=20)

    def build(work):
        text, address_bits = _generate(dram, bus_bits)
        (work / VERILOG_NAME).write_text(text)
        (work / "address_bits").write_text(str(address_bits))
    entry = cache.get_or_build("verilog", f"litedram-{key}", build,
                               [VERILOG_NAME, "address_bits"], what="LiteDRAM controller")
    return ((entry.directory / VERILOG_NAME).read_text(),
            int((entry.directory / "address_bits").read_text()))
