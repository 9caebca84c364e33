"""The board top with its memory behind LiteDRAM (`hw.boards.dram`), simulated whole.

The controller and the DRAM module model are LiteDRAM's (`hw.boards.litedram_gen`),
for each memory kind of its table: the ULX3S's SDRAM, and the ECPIX-5's DDR3
with the ECP5 DDR3 PHY's settings (1:2, a 128-bit controller word holding
several bus words, which `DramMemory` picks apart). The host driver talks to
them over the simulated UART. References: numpy (the layer's `reference`),
the functional simulator's output, the RTL tier's micro-op counters, and the
bytes the test wrote — at addresses far beyond the on-chip memory's 128 KiB,
which only a DRAM holds apart.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from vdla.compiler import Conv2d, compile_op
from vdla.hw.boards.table import BOARDS
from vdla.hw.config import PRESETS
from vdla.hw.boards.litedram_gen import (LITEDRAM_TOP_NAME, MODULES, PHYS, DramError, DramModule,
                                  _generate, litedram_verilog)
from vdla.sim.board import BoardError, BoardLink
from vdla.runtime.runner import AccelRunner
from vdla.sim.backends import get_backend

TINY = PRESETS["tiny"]
MiB = 1024 * 1024

# Per kind: its size, its rows' bytes, the model's bank arrays in the Verilog
# (banks, word bits, words per bank), and the user port's width on a 64-bit
# bus (the bus's, or the controller word where that is wider).
# MT48LC16M16: 4 banks x 8192 rows x 512 columns x 16 bits; one 16-bit word
# per column. MT41K256M16: 8 banks x 32768 rows x 1024 columns x 16 bits; the
# model keeps a 128-bit word (a BL8 burst, 2 phases x 64 DFI bits) per 4
# columns, of which bursts (8 columns apart) use every other one.
KINDS = {
    "litedram-sdram": (32 * MiB, 1024, (4, 16, 8192 * 512), 64),
    "litedram-ddr3": (512 * MiB, 2048, (8, 128, 32768 * 1024 // 4), 128),
}


@pytest.fixture(scope="module", params=sorted(KINDS))
def backend(request):
    return get_backend("board-sim", TINY, memory_kind=request.param)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.slow
def test_generated_controller_is_deterministic_with_one_native_port(kind):
    size, _, (banks, bits, words), port_bits = KINDS[kind]
    generated = _generate(MODULES[kind], 64, hardware=False)
    assert _generate(MODULES[kind], 64, hardware=False) == generated
    text, address_bits, data_bits = generated.verilog, generated.address_bits, generated.data_bits
    assert data_bits == port_bits
    assert MODULES[kind].size_bytes == size and port_bits // 8 << address_bits == size
    header = text[text.index(f"module {LITEDRAM_TOP_NAME}("):text.index(");")]
    # name: (direction, bits); an output may be a reg or a wire, as Migen likes.
    ports = {name: (direction, int(high or 0) + 1) for direction, high, name
             in re.findall(r"(input|output)(?: reg)?(?: \[(\d+):0\])? (\w+)", header)}
    assert ports == {"sys_clk": ("input", 1), "sys_rst": ("input", 1),
                     "cmd_valid": ("input", 1), "cmd_ready": ("output", 1),
                     "cmd_we": ("input", 1), "cmd_addr": ("input", address_bits),
                     "wdata_valid": ("input", 1), "wdata_ready": ("output", 1),
                     "wdata_data": ("input", port_bits), "wdata_we": ("input", port_bits // 8),
                     "rdata_valid": ("output", 1), "rdata_ready": ("input", 1),
                     "rdata_data": ("output", port_bits),
                     "csr_adr": ("input", 14), "csr_we": ("input", 1),
                     "csr_dat_w": ("input", 32), "csr_dat_r": ("output", 32)}
    # The model has no CSRs of its own: the bus reaches the DFI injector only,
    # whose control word leaves reset in hardware control.
    assert {name.split("_")[0] for name in generated.csrs} == {"sdram"}
    assert generated.csrs["sdram_dfii_control"] == 512
    # The DRAM module model's banks.
    assert text.count(f"reg [{bits - 1}:0] mem") == banks and f"[0:{words - 1}]" in text
    # A 32-bit bus: the SDRAM's port is as wide and addresses twice the words;
    # the DDR3's stays at its controller's 128 bits.
    narrow = _generate(MODULES[kind], 32, hardware=False)
    assert (narrow.address_bits, narrow.data_bits) == ((address_bits + 1, 32) if port_bits == 64
                                                       else (address_bits, 128))


def test_each_dram_runs_at_its_boards_clock():
    for kind, dram in MODULES.items():
        assert dram.clock_hz == BOARDS[dram.board].clock_mhz * 1e6, kind


def test_ddr3_takes_the_ecp5_phys_settings():
    from litedram import modules
    dram = MODULES["litedram-ddr3"]
    module = getattr(modules, dram.module)(dram.clock_hz, dram.rate)
    settings = PHYS[dram.phy].build(dram, module)[0].settings
    # 1:2 at 80 MHz: the DRAM clock at 160 MHz, CL 6 / CWL 5 (JEDEC's lowest
    # bin), 64 DFI bits per phase (4 beats of 16), the PHY's read gearing.
    assert (settings.phytype, settings.memtype, settings.nphases, settings.dfi_databits,
            settings.cl, settings.cwl) == ("ECP5DDRPHY", "DDR3", 2, 64, 6, 5)
    assert (settings.read_latency, settings.write_latency) == (3 + 10, 3)


@pytest.mark.parametrize("dram, message", [
    (DramModule("MT41K256M16", "SDR", 16, "1:1", 50e6, "ulx3s-85f"),
     "MT41K256M16 is a DDR3 module, not SDR"),
    (DramModule("MT41K256M16", "DDR3", 16, "1:4", 100e6, "ecpix5-85f", phy="ECP5DDRPHY"),
     "ECP5DDRPHY runs 2 DFI phases per controller cycle (1:2), not 1:4"),
    (DramModule("MT41K256M16", "DDR3", 16, "1:2", 100e6, "ecpix5-85f", phy="A7DDRPHY"),
     "phy: one of ECP5DDRPHY, GENSDRPHY, got 'A7DDRPHY'"),
])
def test_inconsistent_table_rows_are_refused(dram, message):
    with pytest.raises(DramError) as error:
        _generate(dram, 64, hardware=False)
    assert str(error.value) == message


@pytest.mark.rtl
@pytest.mark.slow
@pytest.mark.parametrize("channels, height, width, seed", [(8, 6, 5, 7), (4, 5, 5, 11), (12, 3, 7, 5)])
def test_conv_runs_bit_exactly_through_the_dram_controller(backend, channels, height, width, seed):
    # Odd widths and channel counts: bursts that start and end inside a DDR3
    # port word, single-lane reads among them.
    kind = backend.link.transport.memory_kind
    op = Conv2d(batch=1, in_channels=channels, out_channels=8, height=height, width=width,
                kernel=(3, 3), padding=(1, 1), bias=True, shift=6, relu=True)
    program = compile_op(op, TINY)
    inputs = op.random_inputs(np.random.default_rng(seed))
    result = AccelRunner(TINY, sim="board-sim", memory_kind=kind).run(program, inputs)
    assert backend.memory_bytes == KINDS[kind][0]
    np.testing.assert_array_equal(result.outputs["out"], op.reference(**inputs))
    fsim = AccelRunner(TINY, sim="fsim").run(program, inputs)
    np.testing.assert_array_equal(result.outputs["out"], fsim.outputs["out"])
    rtl = AccelRunner(TINY, sim="rtl").run(program, inputs)
    assert result.counters["gemm_uops"] == rtl.counters["gemm_uops"] > 0
    # The DRAM (16 bits, rows, refresh, the PHY's latency) is slower than the
    # RTL tier's idealised DRAM.
    assert result.cycles == result.counters["cycles"] > rtl.cycles


@pytest.mark.rtl
@pytest.mark.slow
def test_host_round_trip_across_the_dram(backend):
    kind = backend.link.transport.memory_kind
    size, row, _, _ = KINDS[kind]
    link = BoardLink(backend.link.transport)
    rng = np.random.default_rng(3)
    # Odd addresses and lengths, a row boundary, and the top of the DRAM: an
    # on-chip memory of 128 KiB would alias them. Single bytes are one lane
    # of a wider DDR3 port word.
    spans = ((3, 37), (row - 5, 11), (5 * MiB, 9), (size - 7, 7), (5 * MiB | 1, 3),
             (size // 2 + 13, 1))
    written = {}
    for address, length in spans:
        data = rng.integers(0, 256, length, dtype=np.uint8).tobytes()
        link.write_memory(address, data)
        written.update({address + i: byte for i, byte in enumerate(data)})
    for address, length in spans:
        assert link.read_memory(address, length) == bytes(written[address + i]
                                                          for i in range(length))


@pytest.mark.rtl
@pytest.mark.slow
def test_the_host_brings_the_dram_up_through_the_csr_bus(backend):
    """On connecting, the host ran the DRAM's init sequence through the controller's
    DFI injector over the CSR commands (`sim.dram_bringup`; the model has nothing
    to level), gave the DRAM back to the controller and tested it."""
    kind = backend.link.transport.memory_kind
    report = backend.bring_up
    # The init sequence writes CSRs and reads none (nothing to level on the model).
    assert report is not None and not report.leveled
    assert report.csr_reads == 0 and report.csr_writes > 20
    link = BoardLink(backend.link.transport)
    assert link.info()["memory_code"] == 1 + list(MODULES).index(kind)   # the model, no PHY
    csrs = litedram_verilog(MODULES[kind], TINY.dram_bus_bits).csrs
    assert link.csr_read(csrs["sdram_dfii_control"]) == 0b1111    # SEL, CKE, ODT, RESET_N
    link.csr_write(csrs["sdram_dfii_pi0_address"], 0x1234)
    assert link.csr_read(csrs["sdram_dfii_pi0_address"]) == 0x1234
    assert link.csr_read((1 << 14) - 1) == 0                      # no CSR there
    # The DRAM, back under the controller, still holds what the host writes.
    link.write_memory(77, b"bring-up")
    assert link.read_memory(77, 8) == b"bring-up"


def test_unknown_memory_kind_is_refused():
    with pytest.raises(BoardError, match=r"memory_kind: one of bram, spram, litedram-sdram, "
                                         r"litedram-ddr3, got 'ddr9'"):
        get_backend("board-sim", TINY, memory_kind="ddr9")


@pytest.mark.rtl
@pytest.mark.slow
def test_a_fast_upload_survives_the_ddr3_refreshes():
    # At 4 clocks per bit a character takes 40 cycles, less than a host write
    # held by a DDR3 refresh (tRFC: 104 cycles): the board top's receive FIFO
    # keeps the bytes that come meanwhile. 6 KiB span about 300 refreshes.
    backend = get_backend("board-sim", TINY, memory_kind="litedram-ddr3", clocks_per_bit=4)
    link = BoardLink(backend.link.transport)
    data = np.random.default_rng(5).integers(0, 256, 6 * 1024, dtype=np.uint8).tobytes()
    link.write_memory(4096 - 3, data)
    assert link.read_memory(4096 - 3, len(data)) == data
