"""A LiteDRAM controller for the board top, generated from Python with LiteDRAM's own API.

`litedram_verilog` builds, with Migen, a `LiteDRAMCore` (the controller: bank
machines, refresher, command multiplexer and a crossbar) for one of the
boards' DRAMs (`MODULES`: the module, its PHY's settings, the rate and the
clock), with one native user port as wide as the accelerator's DRAM bus or
the controller's word, whichever is wider (LiteDRAM's converter splits a bus
word into the SDRAM's 16-bit words; a DDR3 controller word of 128 bits, one
BL8 burst, holds two 64-bit bus words, which `hw.boards.dram` picks apart:
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
* ``rdata_valid``, ``rdata_ready``, ``rdata_data[P]``: read data, in command order;
* ``csr_adr[14]``, ``csr_we``, ``csr_dat_w[32]``, ``csr_dat_r[32]``: LiteX's CSR
  bus, word addressed, to the controller's DFI injector (and, in hardware, the
  PHY's read-leveling CSRs); the host runs the DRAM's init sequence through it
  (`sim.dram_bringup`). The injector leaves reset in hardware control, so the
  model works without it.

For a bitstream, ``hardware=True`` generates `LITEDRAM_PHY_TOP_NAME`: the same
controller, port and CSR bus in front of the DRAM's real PHY (`PHYS`: the ECP5
DDR3 PHY), with the DRAM's pins and the PHY's clocks as ports.

The Verilog is deterministic (Migen names signals from the Python code) and
cached by `vdla.cache.get_or_build` (kind ``verilog``), keyed by the table's
entry, the width and the LiteDRAM/LiteX/Migen versions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from importlib import metadata

from vdla.errors import VdlaError
from vdla import cache

__all__ = ["DramError", "DramModule", "MODULES", "PHYS", "PhyKind", "GeneratedController",
           "LITEDRAM_TOP_NAME", "LITEDRAM_PHY_TOP_NAME", "dram_settings", "litedram_verilog",
           "litedram_versions"]

LITEDRAM_TOP_NAME = "vdla_litedram"
LITEDRAM_PHY_TOP_NAME = "vdla_litedram_phy"
RECIPE_VERSION = 8
VERILOG_NAME = "litedram.v"
# The CSR bus: LiteX's 32-bit words, a bank per 0x800 bytes (its default paging),
# the PHY's bank first (as LiteX's SoCs number them).
CSR_DATA_BITS = 32
CSR_ADDRESS_BITS = 14
CSR_PAGING = 0x800
CSR_BANKS = {"ddrphy": 0, "sdram": 1}


@dataclasses.dataclass(frozen=True)
class GeneratedController:
    """What `litedram_verilog` generates.

    Attributes
    ----------
    verilog : str
        The Verilog text.
    address_bits, data_bits : int
        The user port's address (in port words) and data widths.
    csrs : dict of str to int
        Each CSR's first word address on the CSR bus (``sdram_dfii_control``,
        ``sdram_dfii_pi0_command``...; with the PHY, its ``ddrphy_*`` too).
    pads, clocks, controls : tuple of str
        With the real PHY: LiteDRAM's names of the DRAM's pins (ports
        ``ddram_<name>``), the PHY's clock domains beside ``sys`` (ports
        ``<name>_clk``, ``<name>_rst``) and its outputs to the clock generator
        (`PhyKind`); empty for the model.
    """

    verilog: str
    address_bits: int
    data_bits: int
    csrs: dict
    pads: tuple[str, ...] = ()
    clocks: tuple[str, ...] = ()
    controls: tuple[str, ...] = ()


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
        The board it is on (a `hw.boards.table.BOARDS` name, whose clock is
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
        cls = getattr(_litedram_modules(self), self.module)
        return cls.nbanks * cls.nrows * cls.ncols * self.data_bits // 8


# The table of memory kinds (`hw.boards.dram.DRAM_KINDS`, ``--board-memory``).
MODULES = {
    # The ULX3S's 32 MB SDRAM (litex-boards' ulx3s target: MT48LC16M16, 16
    # bits, GENSDRPHY), at the ULX3S board's 50 MHz (`hw.boards.table`).
    "litedram-sdram": DramModule("MT48LC16M16", "SDR", 16, "1:1", 50e6, "ulx3s-85f",
                                 phy="GENSDRPHY"),
    # The ECPIX-5's 512 MB DDR3 (litex-boards' ecpix5 target: MT41K256M16, 16
    # bits, ECP5DDRPHY at 1:2), at the ECPIX-5 board's 80 MHz: the DRAM at
    # 160 MHz, 320 MT/s (litex-boards runs it at 75 MHz by default).
    "litedram-ddr3": DramModule("MT41K256M16", "DDR3", 16, "1:2", 80e6, "ecpix5-85f",
                                phy="ECP5DDRPHY"),
}


def _ecp5_ddr3_phy(dram: DramModule, module):
    """LiteDRAM's `ECP5DDRPHY` for this module at this clock, and its pads: a Migen
    record of the DDR3 pins (``a``, ``ba``, ``ras_n``, ``cas_n``, ``we_n``,
    ``cke``, ``odt``, ``reset_n``, ``clk_p``, ``dq``, ``dqs_p``, ``dm``). The PHY
    computes its settings (CL/CWL for its DRAM clock, its read latency through
    the DDR input gearing), which the model takes; the hardware top
    (`litedram_verilog(..., hardware=True)`) keeps the PHY itself."""
    from litedram.phy.ecp5ddrphy import ECP5DDRPHY
    from migen import Record
    geometry = module.geom_settings
    strobes = dram.data_bits // 8
    pads = Record([("a", geometry.addressbits), ("ba", geometry.bankbits), ("ras_n", 1),
                   ("cas_n", 1), ("we_n", 1), ("cke", 1), ("odt", 1), ("reset_n", 1),
                   ("clk_p", 1), ("dq", dram.data_bits), ("dqs_p", strobes), ("dm", strobes)])
    return ECP5DDRPHY(pads, sys_clk_freq=dram.clock_hz), pads


def _sdram_phy(dram: DramModule, module):
    """LiteDRAM's generic SDR PHY (`GENSDRPHY`, registers in the I/O cells) and its
    pads (``a``, ``ba``, ``cs_n``, ``cke``, ``ras_n``, ``cas_n``, ``we_n``, ``dq``,
    ``dm``; the SDRAM's clock is the board's, `hw.boards.bitstream`)."""
    from litedram.phy.gensdrphy import GENSDRPHY
    from migen import Record
    geometry = module.geom_settings
    pads = Record([("a", geometry.addressbits), ("ba", geometry.bankbits), ("cs_n", 1),
                   ("cke", 1), ("ras_n", 1), ("cas_n", 1), ("we_n", 1), ("dq", dram.data_bits),
                   ("dm", dram.data_bits // 8)])
    return GENSDRPHY(pads, sys_clk_freq=dram.clock_hz), pads


def _ecp5_primitives() -> dict:
    """Migen's lowering of its generic I/O specials to ECP5 primitives, as LiteX's
    Trellis flow does: a tristate becomes a ``TRELLIS_IO``, so the PHY's
    tristate gearing (``TSHX2DQA``) drives the pad's ``T`` directly, as nextpnr
    requires (a generic ``oe ? o : 'z`` leaves an inverter between them). As in
    LiteX, the ``TRELLIS_IO``'s pad pin ``B`` is connected as an input, so the
    generated module declares its tristate pins (``dq``, ``dqs_p``) ``input``:
    Yosys then leaves the top's inout pin to that pad, which nextpnr merges with
    it. (Connected as an inout, Yosys gave the top's pin a constant driver of its
    own, nextpnr placed a second buffer there, and the PHY's I/O registers were
    left without a pin: "IOLOGIC functionality ... can only be used with
    pin-constrained PIO".)"""
    from litex.build.lattice.common import lattice_ecp5_trellis_special_overrides
    return lattice_ecp5_trellis_special_overrides


@dataclasses.dataclass(frozen=True)
class PhyKind:
    """A LiteDRAM PHY a `DramModule` may name.

    Attributes
    ----------
    build : callable
        ``(dram, module) -> (phy, pads)``: the PHY for the row at its clock, and
        its pads (a Migen record whose fields are LiteDRAM's pin names).
    clocks : tuple of str
        Its clock domains beside ``sys`` (the generated module's ``<name>_clk``
        and ``<name>_rst`` ports; the board's clock generator makes them).
    controls : callable
        ``phy -> {port: signal}``: what the PHY tells the clock generator.
    primitives : callable
        ``() -> overrides``: the board FPGA's lowering of Migen's I/O specials.
    """

    build: Callable
    clocks: tuple[str, ...]
    controls: Callable
    primitives: Callable


# The PHYs a `DramModule` may name. The ECP5's DDR3 PHY runs its DDR gearing at
# twice the controller's clock (``sys2x``) and its DLL's start-up on ``init``,
# stopping and resetting the ``sys2x`` clock's ECLKSYNCB/CLKDIVF meanwhile.
PHYS = {
    "ECP5DDRPHY": PhyKind(_ecp5_ddr3_phy, ("sys2x", "init"),
                          lambda phy: {"eclk_stop": phy.init.stop, "eclk_reset": phy.init.reset},
                          _ecp5_primitives),
    "GENSDRPHY": PhyKind(_sdram_phy, (), lambda phy: {}, _ecp5_primitives),
}


def litedram_versions() -> str:
    return " ".join(f"{name} {metadata.version(name)}" for name in ("litedram", "litex", "migen"))


def _litedram_modules(dram: DramModule):
    """`litedram.modules`, or `DramError` saying which extra installs it."""
    try:
        from litedram import modules
    except ImportError:
        raise DramError(f"the {dram.module} DRAM needs LiteDRAM: "
                        "pip install 'vdla[dram]'") from None
    return modules


def _module(dram: DramModule):
    """The `litedram.modules` instance of ``dram`` at its clock and rate, and its PHY
    and pads (None without a PHY); `DramError` for a row that contradicts itself."""
    module = getattr(_litedram_modules(dram), dram.module)(dram.clock_hz, dram.rate)
    if module.memtype != dram.memtype:
        raise DramError(f"{dram.module} is a {module.memtype} module, not {dram.memtype}")
    if dram.phy is not None and dram.phy not in PHYS:
        raise DramError(f"phy: one of {', '.join(PHYS)}, got {dram.phy!r}")
    phy, pads = PHYS[dram.phy].build(dram, module) if dram.phy else (None, None)
    if phy is not None and dram.rate != f"1:{phy.settings.nphases}":
        raise DramError(f"{dram.phy} runs {phy.settings.nphases} DFI phases per controller "
                        f"cycle (1:{phy.settings.nphases}), not {dram.rate}")
    return module, phy, pads


def dram_settings(dram: DramModule) -> tuple:
    """The PHY settings and the module's timing settings the controller is built
    with: its PHY's (`PHYS`) or, for a row without one, the model's own for its
    memory type. The host's bring-up (`sim.dram_bringup`) derives the init
    sequence and the read leveling from them."""
    module, phy, _ = _module(dram)
    return _phy_settings(dram, phy), module.timing_settings


def _phy_settings(dram: DramModule, phy):
    """``phy``'s settings, or the model's own for ``dram``'s memory type (no PHY)."""
    if phy is not None:
        return phy.settings
    from litedram.phy.model import get_sdram_phy_settings
    return get_sdram_phy_settings(memtype=dram.memtype, data_width=dram.data_bits,
                                  clk_freq=dram.clock_hz)


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


def _add_csr_bus(top) -> set:
    """Put ``top``'s CSRs (`CSR_BANKS`: the PHY's read leveling, the controller's DFI
    injector) on one CSR bus, ``top.csr``; returns its signals (the module's ports)."""
    from litex.soc.interconnect import csr_bus
    top.submodules.csrbanks = csr_bus.CSRBankArray(
        top, lambda name, memory: CSR_BANKS.get(name) if memory is None else None,
        data_width=CSR_DATA_BITS, address_width=CSR_ADDRESS_BITS, paging=CSR_PAGING)
    top.csr = csr_bus.Interface(data_width=CSR_DATA_BITS, address_width=CSR_ADDRESS_BITS)
    top.submodules.csrcon = csr_bus.Interconnect(top.csr, top.csrbanks.get_buses())
    return {top.csr.adr, top.csr.we, top.csr.dat_w, top.csr.dat_r}


def _csr_map(top) -> dict[str, int]:
    """Each CSR's first word address (a CSR wider than a word takes several, most
    significant first), as LiteX's csr.csv would list it."""
    bank_words = CSR_PAGING // (CSR_DATA_BITS // 8)
    csrs = {}
    for name, described, mapaddr, _ in top.csrbanks.banks:
        address = mapaddr * bank_words
        for csr in described:
            csrs[f"{name}_{csr.name}"] = address
            address += len(csr.get_simple_csrs()) if hasattr(csr, "get_simple_csrs") else 1
    return csrs


def _generate(dram: DramModule, bus_bits: int, hardware: bool) -> GeneratedController:
    """The controller in front of the DRAM module model (``hardware`` False) or of
    the DRAM's real PHY, with its user port and CSR bus."""
    module, phy, pads = _module(dram)
    if hardware and phy is None:
        raise DramError(f"{dram.module}: the table names no PHY for it (phy=None): "
                        "only the model is generated")
    from litedram.core import LiteDRAMCore
    from litedram.phy.model import SDRAMPHYModel
    from litex.soc.interconnect.csr import AutoCSR
    from migen import ClockDomain, Module
    from migen.fhdl.verilog import convert

    kind = PHYS[dram.phy] if hardware else None

    class Top(Module, AutoCSR):
        def __init__(self):
            if hardware:
                # sys: the controller's (and the design's) clock; the PHY's own.
                self.domains = [ClockDomain(name) for name in ("sys", *kind.clocks)]
                self.clock_domains += self.domains
                self.submodules.ddrphy = dram_phy = phy
            else:
                self.submodules.ddrphy = dram_phy = SDRAMPHYModel(
                    module, settings=_phy_settings(dram, phy), data_width=dram.data_bits,
                    clk_freq=dram.clock_hz)
            self.submodules.sdram = core = LiteDRAMCore(dram_phy, module.geom_settings,
                                                        module.timing_settings, dram.clock_hz)
            self.port, self.ios = _user_port(core, bus_bits)
            # The controller's CSRs (its DFI injector, through which the host runs
            # the DRAM's init sequence) and the PHY's (read leveling), on one bus.
            self.ios |= _add_csr_bus(self)
            self.pads, self.controls = (), {}
            if hardware:
                self.pads = tuple(field[0] for field in pads.layout)
                for name in self.pads:
                    getattr(pads, name).name_override = f"ddram_{name}"
                self.controls = kind.controls(phy)
                for name, signal in self.controls.items():
                    signal.name_override = name
                self.ios |= set(pads.flatten()) | set(self.controls.values())
                self.ios |= {signal for domain in self.domains
                             for signal in (domain.clk, domain.rst)}

    top = Top()
    name = LITEDRAM_PHY_TOP_NAME if hardware else LITEDRAM_TOP_NAME
    overrides = kind.primitives() if hardware else {}
    return GeneratedController(str(convert(top, ios=top.ios, name=name,
                                           special_overrides=overrides)),
                               top.port.address_width, top.port.data_width, _csr_map(top),
                               top.pads, kind.clocks if hardware else (), tuple(top.controls))


def litedram_verilog(dram: DramModule, bus_bits: int,
                     hardware: bool = False) -> GeneratedController:
    """The generated controller (from the cache): in front of the DRAM module model
    (module `LITEDRAM_TOP_NAME`, for simulation) or, ``hardware``, of the DRAM's
    real PHY (`LITEDRAM_PHY_TOP_NAME`, for a bitstream).

    The hardware module's ports are the model's (module docstring) with
    ``sys2x_clk``, ``sys2x_rst``, ``init_clk``, ``init_rst`` beside
    ``sys_clk``/``sys_rst``, the DRAM's pins ``ddram_*``, and
    ``eclk_stop``/``eclk_reset`` for the sys2x clock's ECLKSYNCB/CLKDIVF.

    Raises
    ------
    DramError
        ``hardware`` for a row without a PHY, or a row that contradicts itself.
    """
    key = cache.key_of(f"recipe {RECIPE_VERSION}", "phy" if hardware else "model", dram.module,
                       dram.memtype, str(dram.data_bits), dram.rate, str(bus_bits),
                       repr(float(dram.clock_hz)), str(dram.phy), litedram_versions(), length=20)

    def build(work):
        generated = _generate(dram, bus_bits, hardware)
        (work / VERILOG_NAME).write_text(generated.verilog)
        ports = {**dataclasses.asdict(generated), "verilog": None}     # the text: beside
        (work / "ports.json").write_text(json.dumps(ports, indent=1))
    entry = cache.get_or_build("verilog", f"litedram-{key}", build, [VERILOG_NAME, "ports.json"],
                               what="LiteDRAM controller")
    ports = json.loads((entry.directory / "ports.json").read_text())
    return GeneratedController(**{**ports, "verilog": (entry.directory / VERILOG_NAME).read_text(),
                                  **{name: tuple(ports[name])
                                     for name in ("pads", "clocks", "controls")}})
