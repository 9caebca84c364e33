"""fsim LOAD (padding, strides, every memory kind) and STORE (strides) against numpy."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from vdla.hw.config import PRESETS, SRAM_KINDS
from vdla.hw.isa import Alu, AluOp, Finish, Gemm, Load, MemType, Store, Uop
from tests.sim.image import CONFIGS, TINY, WIDE, Image, random_elements

PADS = [(0, 0, 0, 0), (1, 0, 0, 0), (0, 2, 0, 0), (0, 0, 3, 0), (0, 0, 0, 1), (2, 1, 1, 3),
        (3, 1, 2, 1)]


def _load(kind, image, source, base, pads, y_size, x_size, x_stride, sram_base):
    top, bottom, left, right = pads
    first = image.element(image.put(source), kind)
    insn = Load(memory_type=MemType[kind.upper()], sram_base=sram_base, dram_base=first + base,
                y_size=y_size, x_size=x_size, x_stride=x_stride, y_pad_top=top,
                y_pad_bottom=bottom, x_pad_left=left, x_pad_right=right)
    return insn


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
@pytest.mark.parametrize("kind", SRAM_KINDS)
@pytest.mark.parametrize("pads", PADS, ids=[f"pad{p}" for p in PADS])
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 4, 4), (3, 2, 5), (2, 3, 0)],
                         ids=["1x1", "contiguous", "strided", "overlapping-rows-stride0"])
def test_load_padding_and_strides(config, kind, pads, shape):
    y_size, x_size, x_stride = shape
    rng = np.random.default_rng(zlib.crc32(repr((kind, pads, shape)).encode()))  # str hash() varies per run
    source = random_elements(rng, config, kind, 64)
    image = Image(config, fill=0x5A)
    base, sram_base = 3, 2
    insn = _load(kind, image, source, base, pads, y_size, x_size, x_stride, sram_base)
    # Pre-fill the SRAM with non-zero data so that padding must really write zeros.
    junk = random_elements(rng, config, kind, 60)
    junk_load = image.load_all(kind, junk)
    program = [junk_load, insn]
    result = image.run(program, dump_sram=True)
    sram = result.details["sram"][kind]
    expected = np.zeros((insn.padded_y, insn.padded_x, *source.shape[1:]), source.dtype)
    for y in range(y_size):
        start = base + y * x_stride
        expected[pads[0] + y, pads[2]:pads[2] + x_size] = source[start:start + x_size]
    expected = expected.reshape(-1, *source.shape[1:])
    count = len(expected)
    got = sram[sram_base:sram_base + count].reshape(expected.shape)
    np.testing.assert_array_equal(got, expected)
    # entries around the block keep the earlier contents
    np.testing.assert_array_equal(sram[:sram_base].reshape(-1), junk[:sram_base].reshape(-1))
    after = sram[sram_base + count:60].reshape(-1)
    np.testing.assert_array_equal(after, junk[sram_base + count:60].reshape(-1))
    assert result.counters[f"bytes_loaded_{kind}"] == \
        junk.nbytes + y_size * x_size * config.element_bytes(kind)


def test_load_with_the_largest_padding():
    """4-bit pads at their maximum (15) on every side, into the default uop buffer."""
    config = PRESETS["default"]
    image = Image(config)
    source = np.arange(1, 7, dtype=np.uint32)
    first = image.element(image.put(source), "uop")
    insn = Load(memory_type=MemType.UOP, sram_base=1, dram_base=first, y_size=2, x_size=3, x_stride=3,
                y_pad_top=15, y_pad_bottom=15, x_pad_left=15, x_pad_right=15)
    result = image.run([image.load_all("uop", np.full(1100, 9, np.uint32)), insn],
                       dump_sram=True)
    expected = np.zeros((32, 33), np.uint32)
    expected[15:17, 15:18] = source.reshape(2, 3)
    uop = result.details["sram"]["uop"]
    np.testing.assert_array_equal(uop[1:1 + 32 * 33], expected.reshape(-1))
    assert uop[0] == 9 and uop[1 + 32 * 33] == 9


def test_acc_load_also_writes_out_low_bytes():
    config = WIDE
    image = Image(config)
    acc = random_elements(np.random.default_rng(3), config, "acc", 5)
    result = image.run([image.load_all("acc", acc, sram_base=4)], dump_sram=True)
    out = result.details["sram"]["out"][4:9]
    np.testing.assert_array_equal(out, (acc.astype(np.int64) & 0xFF).astype(np.uint8).view(np.int8))


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
@settings(max_examples=40, deadline=None)
@given(y_size=st.integers(1, 4), x_size=st.integers(1, 5), gap=st.integers(-2, 3),
       sram_base=st.integers(0, 6), dram_base=st.integers(0, 3), seed=st.integers(0, 2**32 - 1))
def test_store_with_stride(config, y_size, x_size, gap, sram_base, dram_base, seed):
    """Rows land x_stride apart; gaps keep their old bytes; overlapping rows: later wins."""
    x_stride = max(0, x_size + gap)
    rng = np.random.default_rng(seed)
    image = Image(config, fill=0xA5)
    acc = random_elements(rng, config, "acc", 32)
    out_bytes = config.element_bytes("out")
    size = (dram_base + (y_size - 1) * x_stride + x_size + 4) * out_bytes
    region = image.alloc(size)
    store = Store(pop_prev=True, sram_base=sram_base,
                  dram_base=image.element(region, "out") + dram_base,
                  y_size=y_size, x_size=x_size, x_stride=x_stride)
    before = image.dram.copy()
    # acc loads write out; the empty ALU pushes the token that orders them before the store
    image.run([image.load_all("acc", acc), Alu(uop_end=0, push_next=True), store])
    out = ((acc.astype(np.int64) & 0xFF).astype(np.uint8)).reshape(32, out_bytes)
    expected = before.copy()
    for y in range(y_size):
        for x in range(x_size):
            at = region + (dram_base + y * x_stride + x) * out_bytes
            expected[at:at + out_bytes] = out[sram_base + y * x_size + x]
    np.testing.assert_array_equal(image.dram[region:region + size],
                                  expected[region:region + size])


def test_dense_gemm_end_to_end_through_dram():
    """inp/wgt loads, uops, GEMM with loops, ALU epilogue, store: numpy dense layer."""
    config = TINY
    rng = np.random.default_rng(11)
    m, k_blocks, n_blocks = 6, 3, 2
    bi, bo = config.block_in, config.block_out
    data = rng.integers(-128, 128, (m, k_blocks, 1, bi), dtype=np.int8)
    weight = rng.integers(-128, 128, (n_blocks, k_blocks, bo, bi), dtype=np.int8)
    image = Image(config)
    uops = [Uop(dst=0, src=kb, wgt=kb) for kb in range(k_blocks)]
    out_region = image.alloc(m * n_blocks * config.element_bytes("out"))
    loops = dict(iter_out=m, iter_in=n_blocks, dst_factor_out=n_blocks, dst_factor_in=1,
                 src_factor_out=k_blocks, wgt_factor_in=k_blocks)
    program = [
        image.load_all("inp", data.reshape(-1, 1, bi)),
        image.load_all("wgt", weight.reshape(-1, bo, bi), push_next=True),
        image.load_uops(uops + [Uop(dst=0)], sram_base=0),
        Gemm(reset=True, uop_begin=k_blocks, uop_end=k_blocks + 1, **loops),
        Gemm(pop_prev=True, uop_begin=0, uop_end=k_blocks, **loops),
        Alu(alu_op=AluOp.SHR, use_imm=True, imm=6, uop_begin=k_blocks, uop_end=k_blocks + 1,
            iter_out=m * n_blocks, dst_factor_out=1),
        Alu(alu_op=AluOp.MAX, use_imm=True, imm=0, uop_begin=k_blocks, uop_end=k_blocks + 1,
            iter_out=m * n_blocks, dst_factor_out=1, push_next=True),
        Store(pop_prev=True, dram_base=image.element(out_region, "out"), y_size=m,
              x_size=n_blocks, x_stride=n_blocks, push_prev=True),
    ]
    result = image.run(program + [Finish(pop_next=True)], finish=False)
    logical_data = data.reshape(m, k_blocks * bi).astype(np.int64)
    logical_weight = weight.transpose(0, 2, 1, 3).reshape(n_blocks * bo, k_blocks * bi)
    expected = np.maximum((logical_data @ logical_weight.astype(np.int64).T) >> 6, 0)
    expected = (expected & 0xFF).astype(np.uint8).view(np.int8)
    got = image.read(out_region, "out", m * n_blocks).reshape(m, n_blocks * bo)
    np.testing.assert_array_equal(got, expected)
    counters = result.counters
    assert counters["load_insns"] == 2 and counters["store_insns"] == 1
    assert counters["compute_insns"] == 6  # uop load, 2 GEMM, 2 ALU, FINISH
    assert counters["gemm_uops"] == m * n_blocks * (k_blocks + 1)
    assert counters["gemm_macs"] == m * n_blocks * k_blocks * config.macs_per_cycle
    assert counters["alu_uops"] == 2 * m * n_blocks
    assert counters["bytes_stored_out"] == m * n_blocks * config.element_bytes("out")
    assert counters["token_pushes_load_to_compute"] == 1
    assert counters["token_pushes_compute_to_store"] == 1
    assert counters["token_pushes_store_to_compute"] == 1
    assert counters["token_pushes_compute_to_load"] == 0
