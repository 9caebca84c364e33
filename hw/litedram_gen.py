"""A LiteDRAM controller for the board top, generated from Python with LiteDRAM's own API.

`litedram_verilog` builds, with Migen, a `LiteDRAMCore` (the controller: bank
machines, refresher, command multiplexer and a crossbar) for one of the
boards' DRAMs (`MODULES`: the module, its PHY's settings, the rate and the
clock), with one native user port as wide as the accelerator's DRAM bus or
the controller's word, whichever is wider (LiteDRAM's converter splits a bus
word into the SDRAM's 16-bit words; a DDR3 controller word of 128 bits, one
BL8 burst, holds two 64-bit bus words, which `hw.board_dram` picks apart:
LiteDRAM's up-converter would keep only one controller read in flight), and
for simulation LiteDRAM's
`SDRAMPHYModel` behind it: the DRAM module model, whose banks keep their
open rows, whose controller must refresh them every tREFI and
precharge/activate on a row change, with the module's timings in controller
cycles and the PHY's read and write latencies. The top module
`LITEDRAM_TOP_NAME` has these ports (``N`` the bus width, ``A`` the user
address bits, in port words; ``P`` the port's width, ``N`` or wider):

* ``sys_clk``, ``sys_rst``;
* ``cmd_valid``, ``cmd_ready``, ``cmd_we``, ``cmd_addr[A]``: one port word
  read or written per command (LiteDRAM's native port);
* ``wdata_valid``, ``wdata_ready``, ``wdata_data[P]``, ``wdata_we[P/8]``: the
  data of a write command, with byte enables;
* ``rdata_valid``, ``rdata_ready``, ``rdata_data[P]``: read data, in command order.

The Verilog is deterministic (Migen names signals from the Python code) and
cached by `hw.cache.get_or_build` (kind ``verilog``), keyed by the table's
entry, the width and the LiteDRAM/LiteX/Migen versions.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import metadata

from vdla.errors import VdlaError
from vdla.hw import cache

__all__ = ["DramError", "DramModule", "MODULES", "PHYS", "LITEDRAM_TOP_NAME", "litedram_verilog",
           "litedram_versions", "LITEDRAM_PHY_TOP_NAME", "litedram_phy_verilog"]

LITEDRAM_TOP_NAME = "vdla_litedram"
RECIPE_VERSION = 3
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


def _ecp5_ddr3_phy(dram: DramModule, module):
    """LiteDRAM's `ECP5DDRPHY` for this module at this clock, and its pads: a Migen
    record of the DDR3 pins (``a``, ``ba``, ``ras_n``, ``cas_n``, ``we_n``,
    ``cke``, ``odt``, ``reset_n``, ``clk_p``, ``dq``, ``dqs_p``, ``dm``). The PHY
    computes its settings (CL/CWL for its DRAM clock, its read latency through
    the DDR input gearing), which the model takes; the hardware top
    (`litedram_phy_verilog`) keeps the PHY itself."""
    from litedram.phy.ecp5ddrphy import ECP5DDRPHY
    from migen import Record
    geometry = module.geom_settings
    strobes = dram.data_bits // 8
    pads = Record([("a", geometry.addressbits), ("ba", geometry.bankbits), ("ras_n", 1),
                   ("cas_n", 1), ("we_n", 1), ("cke", 1), ("odt", 1), ("reset_n", 1),
                   ("clk_p", 1), ("dq", dram.data_bits), ("dqs_p", strobes), ("dm", strobes)])
    return ECP5DDRPHY(pads, sys_clk_freq=dram.clock_hz), pads


# The PHYs a `DramModule` may name: each builds the PHY and its pads.
PHYS = {"ECP5DDRPHY": _ecp5_ddr3_phy}


def litedram_versions() -> str:
    return " ".join(f"{name} {metadata.version(name)}" for name in ("litedram", "litex", "migen"))


def _module(dram: DramModule):
    """The `litedram.modules` instance of ``dram`` at its clock and rate, and its PHY
    and pads (None without a PHY); `DramError` for a row that contradicts itself."""
    try:
        from litedram import modules
    except ImportError:
        raise DramError(f"the {dram.module} DRAM needs LiteDRAM: "
                        "pip install 'vdla[dram]'") from None
    module = getattr(modules, dram.module)(dram.clock_hz, dram.rate)
    if module.memtype != dram.memtype:
        raise DramError(f"{dram.module} is a {module.memtype} module, not {dram.memtype}")
    if dram.phy is not None and dram.phy not in PHYS:
        raise DramError(f"phy: one of {', '.join(PHYS)}, got {dram.phy!r}")
    phy, pads = PHYS[dram.phy](dram, module) if dram.phy else (None, None)
    if phy is not None and dram.rate != f"1:{phy.settings.nphases}":
        raise DramError(f"{dram.phy} runs {phy.settings.nphases} DFI phases per controller "
                        f"cycle (1:{phy.settings.nphases}), not {dram.rate}")
    return module, phy, pads


def _user_port(core, bus_bits: int):
    """The core's native user port as wide as the bus or the controller's word,
    whichever is wider, its signals named as the generated module's ports (module
    docstring); returns the port and its signals."""
    port = core.crossbar.get_port(mode="both",
                                  data_width=max(bus_bits, core.crossbar.controller.data_width))
    names = {port.cmd.valid: "cmd_valid", port.cmd.ready: "cmd_ready", port.cmd.we: "cmd_we",
             port.cmd.addr: "cmd_addr", port.wdata.valid: "wdata_valid", port.wdata.ready: "wdata_ready",
             port.wdata.data: "wdata_data", port.wdata.we: "wdata_we",
             port.rdata.valid: "rdata_valid", port.rdata.ready: "rdata_ready",
             port.rdata.data: "rdata_data"}
    for signal, name in names.items():
        signal.name_override = name
    return port, set(names)


def _generate(dram: DramModule, bus_bits: int) -> tuple[str, int, int]:
    """Verilog of the controller + module model, and its user port's address and data bits."""
    module, phy, _ = _module(dram)
    from litedram.core import LiteDRAMCore
    from litedram.phy.model import SDRAMPHYModel
    from migen import Module
    from migen.fhdl.verilog import convert
    clock_hz = dram.clock_hz
    settings = phy.settings if phy is not None else None

    class Top(Module):
        def __init__(self):
            self.submodules.phy = phy = SDRAMPHYModel(module, settings=settings,
                                                      data_width=dram.data_bits,
                                                      clk_freq=clock_hz)
            self.submodules.core = core = LiteDRAMCore(phy, module.geom_settings,
                                                       module.timing_settings, clock_hz)
            self.port, self.ios = _user_port(core, bus_bits)

    top = Top()
    output = convert(top, ios=top.ios, name=LITEDRAM_TOP_NAME)
    return str(output), top.port.address_width, top.port.data_width


def litedram_verilog(dram: DramModule, bus_bits: int) -> tuple[str, int, int]:
    """The generated controller's Verilog (from the cache), its user port's address
    bits (in port words) and data bits (``bus_bits`` or the controller's wider word)."""
    key = cache.key_of(f"recipe {RECIPE_VERSION}", dram.module, dram.memtype,
                       str(dram.data_bits), dram.rate, str(bus_bits), repr(float(dram.clock_hz)),
                       str(dram.phy), litedram_versions(), length=20)

    def build(work):
        text, address_bits, data_bits = _generate(dram, bus_bits)
        (work / VERILOG_NAME).write_text(text)
        (work / "port.json").write_text(json.dumps({"address_bits": address_bits,
                                                    "data_bits": data_bits}))
    entry = cache.get_or_build("verilog", f"litedram-{key}", build,
                               [VERILOG_NAME, "port.json"], what="LiteDRAM controller")
    port = json.loads((entry.directory / "port.json").read_text())
    return (entry.directory / VERILOG_NAME).read_text(), port["address_bits"], port["data_bits"]


# ---------------------------------------------------------------- for hardware
# The controller with the board's real PHY instead of the model (issue 25,
# part 3: generated and synthesised; not yet in a bitstream).
LITEDRAM_PHY_TOP_NAME = "vdla_litedram_phy"
CSR_DATA_BITS = 32
CSR_ADDRESS_BITS = 14
CSR_PAGING = 0x800          # bytes per CSR bank (LiteX's default)
CSR_BANKS = {"ddrphy": 0, "sdram": 1}


def _generate_phy(dram: DramModule, bus_bits: int) -> tuple[str, int, int, dict[str, int]]:
    """Verilog of the controller + the DRAM's PHY, its user port's address and data
    bits, and its CSRs' word addresses on the CSR bus."""
    module, phy, pads = _module(dram)
    if phy is None:
        raise DramError(f"{dram.module}: the table names no PHY for it (phy=None): "
                        "only the model is generated")
    from litedram.core import LiteDRAMCore
    from litex.soc.interconnect import csr_bus
    from litex.soc.interconnect.csr import AutoCSR
    from migen import ClockDomain, Module
    from migen.fhdl.verilog import convert

    class Top(Module, AutoCSR):
        def __init__(self):
            # sys: the controller's (and the design's) clock; sys2x: the PHY's DDR
            # gearing at twice it; init: the PHY's DLL start-up sequence.
            self.clock_domains.cd_sys = ClockDomain()
            self.clock_domains.cd_sys2x = ClockDomain()
            self.clock_domains.cd_init = ClockDomain()
            self.submodules.ddrphy = phy
            self.submodules.sdram = core = LiteDRAMCore(phy, module.geom_settings,
                                                        module.timing_settings, dram.clock_hz)
            self.port, self.ios = _user_port(core, bus_bits)
            # The PHY's and the controller's CSRs (DFI injector, read leveling) on one
            # CSR bus, for the init sequence and the leveling a host will run.
            self.submodules.csrbanks = csr_bus.CSRBankArray(
                self, lambda name, memory: CSR_BANKS.get(name) if memory is None else None,
                data_width=CSR_DATA_BITS, address_width=CSR_ADDRESS_BITS, paging=CSR_PAGING)
            self.csr = csr_bus.Interface(data_width=CSR_DATA_BITS,
                                         address_width=CSR_ADDRESS_BITS)
            self.submodules.csrcon = csr_bus.Interconnect(self.csr, self.csrbanks.get_buses())
            for field in pads.layout:
                getattr(pads, field[0]).name_override = f"ddram_{field[0]}"
            # The PHY's start-up sequence stops and resets the sys2x clock's
            # ECLKSYNCB/CLKDIVF, which the board's clock generator holds.
            phy.init.stop.name_override, phy.init.reset.name_override = "eclk_stop", "eclk_reset"
            self.ios |= (set(pads.flatten()) | {self.csr.adr, self.csr.we, self.csr.dat_w,
                                                self.csr.dat_r, phy.init.stop, phy.init.reset})
            self.ios |= {signal for domain in (self.cd_sys, self.cd_sys2x, self.cd_init)
                         for signal in (domain.clk, domain.rst)}

    top = Top()
    text = str(convert(top, ios=top.ios, name=LITEDRAM_PHY_TOP_NAME))
    # Each CSR's first word (a CSR wider than a word takes several, most
    # significant first), as LiteX's csr.csv would list it.
    bank_words = CSR_PAGING // (CSR_DATA_BITS // 8)
    csrs = {}
    for name, described, mapaddr, _ in top.csrbanks.banks:
        address = mapaddr * bank_words
        for csr in described:
            csrs[f"{name}_{csr.name}"] = address
            address += len(csr.get_simple_csrs()) if hasattr(csr, "get_simple_csrs") else 1
    return text, top.port.address_width, top.port.data_width, csrs


def litedram_phy_verilog(dram: DramModule, bus_bits: int) -> tuple[str, int, int, dict[str, int]]:
    """The controller with the DRAM's real PHY (`_generate_phy`), from the cache.

    Ports: those of the model's top (module docstring) but with ``sys2x_clk``,
    ``sys2x_rst``, ``init_clk``, ``init_rst`` beside ``sys_clk``/``sys_rst``; the
    DRAM's pins ``ddram_*``; the CSR bus ``csr_adr``/``csr_we``/``csr_dat_w``/
    ``csr_dat_r`` (word addresses, 32-bit words; the returned map names each
    CSR's address); ``eclk_stop``/``eclk_reset`` for the sys2x clock's
    ECLKSYNCB/CLKDIVF.

    Raises
    ------
    DramError
        A table row without a PHY, or one that contradicts itself.
    """
    key = cache.key_of(f"recipe {RECIPE_VERSION}", "phy", dram.module, dram.memtype,
                       str(dram.data_bits), dram.rate, str(bus_bits), repr(float(dram.clock_hz)),
                       str(dram.phy), litedram_versions(), length=20)

    def build(work):
        text, address_bits, data_bits, csrs = _generate_phy(dram, bus_bits)
        (work / VERILOG_NAME).write_text(text)
        (work / "ports.json").write_text(json.dumps({"address_bits": address_bits,
                                                     "data_bits": data_bits, "csrs": csrs},
                                                    indent=1))
    entry = cache.get_or_build("verilog", f"litedram-phy-{key}", build,
                               [VERILOG_NAME, "ports.json"], what="LiteDRAM controller and PHY")
    ports = json.loads((entry.directory / "ports.json").read_text())
    return ((entry.directory / VERILOG_NAME).read_text(), ports["address_bits"],
            ports["data_bits"], ports["csrs"])
