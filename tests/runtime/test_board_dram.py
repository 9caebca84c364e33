"""The board top with its memory behind LiteDRAM (`hw.board_dram`), simulated whole.

The controller and the DRAM module model are LiteDRAM's (`hw.litedram_gen`);
the host driver talks to them over the simulated UART. References: numpy (the
layer's `reference`), the functional simulator's output, the RTL tier's
micro-op counters, and the bytes the test wrote — at addresses far beyond the
on-chip memory's 128 KiB, which only a DRAM holds apart.
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.compiler import Conv2d, compile_op
from vdla.hw.config import PRESETS
from vdla.hw.litedram_gen import LITEDRAM_TOP_NAME, MODULES, _generate
from vdla.sim.board import BoardError, BoardLink
from vdla.runtime.runner import AccelRunner
from vdla.sim.backends import get_backend

TINY = PRESETS["tiny"]
KIND = "litedram-sdram"
SDRAM_BYTES = 32 * 1024 * 1024   # the ULX3S's MT48LC16M16: 4 banks x 8192 rows x 512 x 16 bits


@pytest.fixture(scope="module")
def backend():
    return get_backend("board-sim", TINY, memory_kind=KIND)


def test_generated_controller_is_deterministic_with_one_native_port():
    text, address_bits = _generate(MODULES[KIND], 64)
    assert _generate(MODULES[KIND], 64) == (text, address_bits)
    assert MODULES[KIND].size_bytes == SDRAM_BYTES and 8 << address_bits == SDRAM_BYTES
    header = text[text.index(f"module {LITEDRAM_TOP_NAME}("):text.index(");")]
    for port in ("input cmd_valid", "output reg cmd_ready", "input cmd_we",
                 f"input [{address_bits - 1}:0] cmd_addr", "input [63:0] wdata_data",
                 "input [7:0] wdata_we", "output [63:0] rdata_data", "input sys_clk"):
        assert port in header
    # The DRAM module model's four banks, each 8192 rows x 512 columns of 16 bits.
    assert text.count("reg [15:0] mem") == 4 and "[0:4194303]" in text


@pytest.mark.rtl
@pytest.mark.slow
def test_conv_runs_bit_exactly_through_the_sdram_controller(backend):
    op = Conv2d(batch=1, in_channels=8, out_channels=8, height=6, width=5, kernel=(3, 3),
                padding=(1, 1), bias=True, shift=6, relu=True)
    program = compile_op(op, TINY)
    inputs = op.random_inputs(np.random.default_rng(7))
    result = AccelRunner(TINY, sim="board-sim", memory_kind=KIND).run(program, inputs)
    assert backend.memory_bytes == SDRAM_BYTES
    np.testing.assert_array_equal(result.outputs["out"], op.reference(**inputs))
    fsim = AccelRunner(TINY, sim="fsim").run(program, inputs)
    np.testing.assert_array_equal(result.outputs["out"], fsim.outputs["out"])
    rtl = AccelRunner(TINY, sim="rtl").run(program, inputs)
    assert result.counters["gemm_uops"] == rtl.counters["gemm_uops"] > 0
    # The SDRAM (16 bits at one word per command, rows and refresh) is slower
    # than the RTL tier's idealised DRAM.
    assert result.cycles == result.counters["cycles"] > rtl.cycles


@pytest.mark.rtl
@pytest.mark.slow
def test_host_round_trip_across_the_dram(backend):
    link = BoardLink(backend.link.transport)
    rng = np.random.default_rng(3)
    # Odd addresses and lengths, a row boundary (1 KiB rows of 512 x 16 bits),
    # and the top of the 32 MiB: an on-chip memory of 128 KiB would alias them.
    spans = ((3, 37), (1024 - 5, 11), (5 << 20, 9), (SDRAM_BYTES - 7, 7), (5 << 20 | 1, 3))
    written = {}
    for address, size in spans:
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        link.write_memory(address, data)
        written.update({address + i: byte for i, byte in enumerate(data)})
    for address, size in spans:
        assert link.read_memory(address, size) == bytes(written[address + i]
                                                        for i in range(size))


def test_unknown_memory_kind_is_refused():
    with pytest.raises(BoardError, match=r"memory_kind: one of bram, spram, litedram-sdram, "
                                         r"got 'ddr9'"):
        get_backend("board-sim", TINY, memory_kind="ddr9")
