"""The .vdla program file: exact round trips and clear errors on every kind of damage."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from vdla.hw.config import PRESETS
from vdla.hw.isa import Alu, AluOp, Gemm, Load, MemType, Store, Uop
from vdla.runtime.program import FORMAT_VERSION, Program
from vdla.runtime.program_file import MAGIC, ProgramFileError, dumps, load, loads, save
from tests.runtime.programs import dense_program

TINY, DEFAULT = PRESETS["tiny"], PRESETS["default"]


def test_round_trip_is_exact(tmp_path):
    program = dense_program(TINY, 5, 13, 10)
    path = save(program, tmp_path / "dense.vdla")
    again = load(path)
    assert again == program
    assert again.config.name == "tiny"
    assert isinstance(again.tensors[0].shape, tuple)
    assert dumps(again) == dumps(program)


flags = st.booleans()
instructions = st.one_of(
    st.builds(Load, pop_next=flags, push_next=flags,
              memory_type=st.sampled_from([MemType.INP, MemType.WGT, MemType.UOP, MemType.ACC]),
              sram_base=st.integers(0, 255), dram_base=st.integers(0, 2**32 - 1),
              y_size=st.integers(0, 65535), x_size=st.integers(0, 65535),
              x_stride=st.integers(0, 65535), y_pad_top=st.integers(0, 15),
              x_pad_right=st.integers(0, 15)),
    st.builds(Store, pop_prev=flags, push_prev=flags, sram_base=st.integers(0, 255),
              dram_base=st.integers(0, 2**32 - 1)),
    st.builds(Gemm, pop_prev=flags, pop_next=flags, push_prev=flags, push_next=flags,
              reset=flags, uop_begin=st.integers(0, 511), uop_end=st.integers(0, 1023),
              iter_out=st.integers(0, 2**14 - 1), wgt_factor_in=st.integers(0, 127)),
    st.builds(Alu, alu_op=st.sampled_from(list(AluOp)), use_imm=flags,
              imm=st.integers(-32768, 32767), src_factor_out=st.integers(0, 255)),
)
uops = st.builds(Uop, dst=st.integers(0, 255), src=st.integers(0, 255), wgt=st.integers(0, 127))


@settings(max_examples=50, deadline=None)
@given(instructions=st.lists(instructions, max_size=20), uops=st.lists(uops, max_size=20),
       metadata=st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(),
                                                               st.lists(st.integers()))))
@pytest.mark.slow
def test_any_program_round_trips(instructions, uops, metadata):
    program = dense_program(TINY, 2, 4, 4)
    program.instructions, program.uops, program.metadata = instructions, uops, metadata
    # Any encodable program serialises losslessly, even one the verifier rejects.
    assert loads(dumps(program), verify=False) == program


@pytest.mark.parametrize("where", [0.3, 0.5, 0.9, -1, -40], ids=lambda w: f"byte@{w}")
def test_flipped_byte_is_detected(tmp_path, where):
    data = bytearray(dumps(dense_program(TINY, 5, 13, 10)))
    position = int(len(data) * where) if isinstance(where, float) else len(data) + where
    data[position] ^= 0x10
    path = tmp_path / "bad.vdla"
    path.write_bytes(bytes(data))
    with pytest.raises(ProgramFileError, match=r"bad.vdla: damaged or truncated"):
        load(path)


@pytest.mark.parametrize("keep", [0, 5, 16, 100, -1], ids=lambda k: f"keep{k}")
def test_truncated_file_is_detected(keep):
    data = dumps(dense_program(TINY, 5, 13, 10))
    data = data[:keep] if keep >= 0 else data[:keep]
    with pytest.raises(ProgramFileError, match=r"not a vdla program file|truncated"):
        loads(data)


def test_wrong_magic():
    data = b"PK\x03\x04" + dumps(dense_program(TINY, 2, 4, 4))[4:]
    with pytest.raises(ProgramFileError, match="not a vdla program file"):
        loads(data)


def test_unsupported_version():
    data = bytearray(dumps(dense_program(TINY, 2, 4, 4)))
    struct.pack_into("<I", data, len(MAGIC), FORMAT_VERSION + 1)
    with pytest.raises(ProgramFileError, match=f"format version {FORMAT_VERSION + 1} is not "
                                               f"supported.*version {FORMAT_VERSION}"):
        loads(bytes(data))


def test_program_for_other_hardware(tmp_path):
    path = save(dense_program(TINY, 2, 4, 4), tmp_path / "tiny.vdla")
    with pytest.raises(ProgramFileError, match=r"compiled for hardware 'tiny' \(config hash "
                                               rf"{TINY.hash}\), not for 'default'"):
        load(path, DEFAULT)
    # the name does not matter, the hardware does
    assert load(path, TINY.replace(name="renamed")).config == TINY


def test_missing_file(tmp_path):
    with pytest.raises(ProgramFileError, match="cannot read"):
        load(tmp_path / "nothing.vdla")


def test_unserialisable_metadata():
    program = dense_program(TINY, 2, 4, 4)
    program.metadata = {"array": np.zeros(2)}
    with pytest.raises(ProgramFileError, match="metadata is not JSON-serialisable"):
        dumps(program)


def test_instruction_that_does_not_encode():
    program = dense_program(TINY, 2, 4, 4)
    program.instructions = [Load(sram_base=1 << 16)]
    with pytest.raises(ProgramFileError, match="sram_base = 65536 does not fit"):
        dumps(program)


def test_round_trip_program_is_a_program():
    assert isinstance(loads(dumps(dense_program(DEFAULT, 2, 4, 4))), Program)
