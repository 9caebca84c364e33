"""`hw.boards.memory.OnChipMemory`'s make-up (its behaviour is tested through the
board top: tests/runtime/test_board.py)."""

from __future__ import annotations

import re

import pytest
from amaranth.back import rtlil

from vdla.hw.boards.memory import SPRAM_WORDS, OnChipMemory, read_latency
from vdla.hw.config import PRESETS


def _memories(config, memory_bytes, kind):
    text = rtlil.convert(OnChipMemory(config, memory_bytes, kind), name="m", emit_src=False)
    return [(int(width), int(size)) for width, size, name in
            re.findall(r"memory width (\d+) size (\d+) \\(\S+)", text) if name.startswith("bank")]


@pytest.mark.parametrize("config, memory_bytes", [
    (PRESETS["ulx3s"], 128 * 1024), (PRESETS["tiny"], 64 * 1024), (PRESETS["odd"], 4 * 1024),
])
def test_block_ram_memory_is_one_memory_as_deep_as_the_whole(config, memory_bytes):
    # One deep memory: Yosys slices it by bits, so no multiplexer gathers words from banks.
    words = memory_bytes // config.dram_bus_bytes
    assert _memories(config, memory_bytes, "bram") == [(config.dram_bus_bits, words)]


@pytest.mark.slow
def test_single_port_memory_is_banked_by_the_spram_depth():
    config = PRESETS["tiny"]   # 32-bit bus: 256 KiB are 4 banks of 16K words
    assert _memories(config, 256 * 1024, "spram") == [(32, SPRAM_WORDS)] * 4


def test_read_latency():
    assert read_latency("bram") == read_latency("spram") == 2
    with pytest.raises(ValueError, match="kind: one of bram, spram, got 'dram'"):
        read_latency("dram")


@pytest.mark.parametrize("kind, in_block_ram", [("bram", False), ("spram", True)])
def test_read_fifo_is_in_block_ram_beside_single_port_memory(kind, in_block_ram):
    """Beside the UP5K's single-port RAMs the read FIFO's words are a block RAM (logic
    cells are what that part lacks); elsewhere Yosys keeps them in flip-flops."""
    text = rtlil.convert(OnChipMemory(PRESETS["tiny"], 64 * 1024, kind), name="m",
                         emit_src=False)
    storage = re.search(r"((?:  attribute [^\n]*\n)*)  memory width 32 size 2 \\storage", text)
    assert storage is not None
    assert ('ram_style "block"' in storage.group(1)) == in_block_ram
