"""The LiteDRAM controller with the board's real DRAM PHY (`litedram_verilog(..., hardware=True)`).

The ECPIX-5's DDR3 behind LiteDRAM's ``ECP5DDRPHY``: the generated module's
ports (the DRAM's pins, as amaranth-boards' ECPIX-5 ``ddr3`` resource has
them; the three clock domains; the native user port; the CSR bus), the ECP5
DDR primitives the PHY instantiates, and the CSR map a host's init sequence
and read leveling will use; synthesised by ``benchmarks/litedram_phy_synth.py``.
"""

from __future__ import annotations

import re

import pytest

from vdla.hw.boards.litedram_gen import LITEDRAM_PHY_TOP_NAME, MODULES, DramError, _generate

DDR3 = MODULES["litedram-ddr3"]


def _ports(text: str) -> dict[str, tuple[str, int]]:
    header = text[text.index(f"module {LITEDRAM_PHY_TOP_NAME}("):text.index(");")]
    return {name: (direction, int(high or 0) + 1) for direction, high, name
            in re.findall(r"(input|output|inout)(?: reg)?(?: \[(\d+):0\])? (\w+)", header)}


def test_ecp5_ddr3_controller_and_phy_ports_primitives_and_csrs():
    generated = _generate(DDR3, 64, hardware=True)
    assert _generate(DDR3, 64, hardware=True) == generated
    text, address_bits, data_bits, csrs = (generated.verilog, generated.address_bits,
                                           generated.data_bits, generated.csrs)
    # One port word per BL8 burst of 16 bits: 2**25 of them in 512 MiB.
    assert (address_bits, data_bits) == (25, 128)
    ddram = {name: port for name, port in _ports(text).items() if name.startswith("ddram_")}
    # 15 address lines and 3 bank bits (32768 rows x 8 banks), 16 data bits,
    # two byte lanes of strobes and masks. The tristate pins are declared inputs:
    # each is a TRELLIS_IO's pad pin, as LiteX lowers it (the board's pin is inout).
    assert generated.pads == tuple(name.removeprefix("ddram_") for name in ddram)
    assert (generated.clocks, generated.controls) == (("sys2x", "init"), ("eclk_stop", "eclk_reset"))
    assert ddram == {"ddram_a": ("output", 15), "ddram_ba": ("output", 3),
                     "ddram_ras_n": ("output", 1), "ddram_cas_n": ("output", 1),
                     "ddram_we_n": ("output", 1), "ddram_cke": ("output", 1),
                     "ddram_odt": ("output", 1), "ddram_reset_n": ("output", 1),
                     "ddram_clk_p": ("output", 1), "ddram_dq": ("input", 16),
                     "ddram_dqs_p": ("input", 2), "ddram_dm": ("output", 2)}
    ports = _ports(text)
    for domain in ("sys", "sys2x", "init"):
        assert ports[f"{domain}_clk"] == ports[f"{domain}_rst"] == ("input", 1)
    assert ports["cmd_addr"] == ("input", address_bits) and ports["rdata_data"] == ("output", 128)
    assert (ports["csr_adr"], ports["csr_dat_w"], ports["csr_dat_r"]) == \
        (("input", 14), ("input", 32), ("output", 32))
    assert ports["eclk_stop"] == ports["eclk_reset"] == ("output", 1)
    # The PHY's ECP5 primitives: the DLL, a DQS buffer per byte lane, DDR
    # output/input gearing per pin.
    primitives = {name: len(re.findall(rf"^{name} ", text, re.M))
                  for name in ("DDRDLLA", "DQSBUFM", "IDDRX2DQA", "ODDRX2DQA")}
    assert primitives == {"DDRDLLA": 1, "DQSBUFM": 2, "IDDRX2DQA": 16, "ODDRX2DQA": 16 + 2}
    # The PHY's bank first, the controller's second (512 words apart); a
    # 64-bit CSR (DFI write data) takes two words.
    assert csrs["ddrphy_dly_sel"] == 0 and csrs["sdram_dfii_control"] == 512
    assert csrs["sdram_dfii_pi0_rddata"] - csrs["sdram_dfii_pi0_wrdata"] == 2
    assert {"ddrphy_rdly_dq_bitslip", "ddrphy_burstdet_seen", "sdram_dfii_pi1_command_issue"} \
        <= set(csrs)


def test_ulx3s_sdram_controller_and_generic_phy():
    """The ULX3S's SDRAM behind LiteDRAM's generic SDR PHY: its pins (the clock is
    the board's, not the PHY's), no clock domain beside ``sys``, no controls,
    the PHY's registers in the I/O cells, no PHY CSR (nothing to level)."""
    generated = _generate(MODULES["litedram-sdram"], 64, hardware=True)
    ports = _ports(generated.verilog)
    assert {name: port for name, port in ports.items() if name.startswith("ddram_")} == {
        "ddram_a": ("output", 13), "ddram_ba": ("output", 2), "ddram_cs_n": ("output", 1),
        "ddram_cke": ("output", 1), "ddram_ras_n": ("output", 1), "ddram_cas_n": ("output", 1),
        "ddram_we_n": ("output", 1), "ddram_dq": ("input", 16), "ddram_dm": ("output", 2)}
    assert generated.clocks == generated.controls == () and "sys2x_clk" not in ports
    assert generated.pads == ("a", "ba", "cs_n", "cke", "ras_n", "cas_n", "we_n", "dq", "dm")
    assert generated.verilog.count("TRELLIS_IO #(") == 16
    assert not any(name.startswith("ddrphy_") for name in generated.csrs)


def test_a_dram_without_a_phy_is_refused():
    from vdla.hw.boards.litedram_gen import DramModule
    dram = DramModule("MT48LC16M16", "SDR", 16, "1:1", 50e6, "ulx3s-85f")
    with pytest.raises(DramError) as error:
        _generate(dram, 64, hardware=True)
    assert str(error.value) == ("MT48LC16M16: the table names no PHY for it (phy=None): only the "
                                "model is generated")
