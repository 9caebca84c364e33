"""ISA: encode/decode round trip (property-based), field limits, bad words, the docs."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vdla.hw import isa
from vdla.hw.config import PRESETS

CONFIGS = [PRESETS["default"], PRESETS["tiny"]]


def _field_strategy(field):
    if field.signed:
        return st.integers(-(1 << (field.bits - 1)), (1 << (field.bits - 1)) - 1)
    return st.integers(0, (1 << field.bits) - 1)


@st.composite
def instructions(draw, config):
    opcode = draw(st.sampled_from(list(isa.Opcode)))
    values = {}
    for field in isa.formats(config)[opcode][1:]:
        if field.name == "memory_type":
            values[field.name] = draw(st.sampled_from(list(isa.MemType)))
        elif field.name == "alu_op":
            values[field.name] = draw(st.sampled_from(list(isa.AluOp)))
        elif field.bits == 1:
            values[field.name] = draw(st.booleans())
        else:
            values[field.name] = draw(_field_strategy(field))
    cls = {isa.Opcode.LOAD: isa.Load, isa.Opcode.STORE: isa.Store, isa.Opcode.GEMM: isa.Gemm,
           isa.Opcode.ALU: isa.Alu, isa.Opcode.FINISH: isa.Finish,
           isa.Opcode.GEMM_OVERWRITE: isa.Gemm}[opcode]
    if opcode == isa.Opcode.GEMM_OVERWRITE:
        values["overwrite"] = True
    return cls(**values)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_encode_decode_round_trip(config, data):
    insn = data.draw(instructions(config))
    word = isa.encode(insn, config)
    assert 0 <= word < 1 << 128
    assert isa.decode(word, config) == insn


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_program_bytes_round_trip_and_layout(config):
    program = [isa.Load(memory_type=isa.MemType.WGT, sram_base=3, dram_base=77, y_size=2,
                        x_size=5, x_stride=9, x_pad_left=1, push_next=True),
               isa.Gemm(pop_prev=True, uop_end=4, iter_out=3, dst_factor_out=2),
               isa.Alu(alu_op=isa.AluOp.SHR, use_imm=True, imm=-7),
               isa.Store(pop_prev=True, y_size=4, x_size=4, x_stride=4),
               isa.Finish()]
    data = isa.encode_program(program, config)
    assert data.dtype == np.uint8 and data.size == 16 * len(program)
    assert isa.decode_program(data, config) == program
    # The opcode sits in the low bits of the first (little-endian) byte.
    assert [b & 7 for b in data[::16]] == [0, 2, 4, 1, 3]


def test_field_positions_are_packed_from_bit_zero():
    config = PRESETS["default"]
    offsets = isa.field_offsets(isa.formats(config)[isa.Opcode.LOAD])
    assert offsets["opcode"] == (0, 3)
    assert offsets["pop_prev"] == (3, 1)
    word = isa.encode(isa.Load(dram_base=0xDEADBEEF), config)
    lsb, bits = offsets["dram_base"]
    assert (word >> lsb) & ((1 << bits) - 1) == 0xDEADBEEF


@pytest.mark.parametrize("insn, field", [
    (isa.Gemm(iter_out=1 << 14), "iter_out"),
    (isa.Alu(imm=40000), "imm"),
    (isa.Load(x_pad_left=16), "x_pad_left"),
    (isa.Load(sram_base=-1), "sram_base"),
])
def test_values_that_do_not_fit_are_refused(insn, field):
    with pytest.raises(isa.IsaError, match=field):
        isa.encode(insn, PRESETS["default"])


def test_bad_words_are_refused_with_the_instruction_index():
    config = PRESETS["default"]
    with pytest.raises(isa.IsaError, match="instruction 5: bad opcode 7"):
        isa.decode(7, config, index=5)
    bad_type = isa.encode(isa.Load(), config) | (7 << 7)
    with pytest.raises(isa.IsaError, match="bad memory_type 7"):
        isa.decode(bad_type, config)
    with pytest.raises(isa.IsaError, match="bits set above"):
        isa.decode(isa.encode(isa.Finish(), config) | (1 << 100), config)
    with pytest.raises(isa.IsaError, match="whole number"):
        isa.decode_program(b"\0" * 17, config)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_gemm_overwrite_is_the_gemm_word_with_opcode_bit_2(config):
    fields = dict(pop_prev=True, reset=False, uop_begin=3, uop_end=9, iter_out=5, iter_in=2,
                  dst_factor_out=4, src_factor_in=1, wgt_factor_out=2, overlap=True)
    plain = isa.encode(isa.Gemm(**fields), config)
    overwrite = isa.encode(isa.Gemm(overwrite=True, **fields), config)
    assert plain & 7 == 2 and overwrite == plain | 4   # every other bit as GEMM's
    assert isa.decode(overwrite, config) == isa.Gemm(overwrite=True, **fields)
    assert not isa.decode(plain, config).overwrite
    with pytest.raises(isa.IsaError, match="bad opcode 5"):
        isa.decode(plain & ~7 | 5, config)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_uops_round_trip(config):
    rng = np.random.default_rng(0)
    dst = rng.integers(0, config.depth("acc"), 100)
    src = rng.integers(0, config.depth("inp"), 100)
    wgt = rng.integers(0, config.depth("wgt"), 100)
    words = isa.encode_uops([isa.Uop(int(d), int(s), int(w)) for d, s, w in zip(dst, src, wgt)],
                            config)
    decoded = isa.decode_uops(words, config)
    for got, want in zip(decoded, (dst, src, wgt)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(isa.IsaError, match="dst"):
        isa.encode_uops([isa.Uop(dst=config.depth("acc"))], config)


def test_docs_isa_md_is_generated_from_the_code():
    docs = Path(__file__).resolve().parents[2] / "docs" / "isa.md"
    assert docs.read_text() == isa.reference_markdown(PRESETS["default"]), \
        "docs/isa.md is stale: run `vdla isa -o docs/isa.md`"
