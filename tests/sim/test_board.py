"""The host driver against the whole board top simulated in Verilator, UART pins and all.

The driver (`sim.board`) talks to `sim.board_sim.SimulatedBoard` through
the byte protocol exactly as it would to a serial port. References: numpy
(the layer's `reference`), the bytes the test wrote, the RTL tier's micro-op
counters, and the protocol's stated refusals.
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.compiler import Conv2d, Dense, compile_op
from vdla.hw.boards import protocol
from vdla.hw.boards.top import DEFAULT_MEMORY_BYTES
from vdla.hw.boards.table import BOARDS
from vdla.hw.config import PRESETS
from vdla.hw.counters import RTL_COUNTERS, rtl_counters
from vdla.hw.boards.litedram_gen import MODULES
from vdla.sim.board import BoardBackend, BoardError, BoardLink
from vdla.runtime.runner import AccelRunner
from vdla.sim.backends import get_backend

pytestmark = pytest.mark.rtl

TINY = PRESETS["tiny"]
MEMORY_BYTES = DEFAULT_MEMORY_BYTES  # the board-sim default: one Verilator build for all


@pytest.fixture(scope="module")
def board():
    from vdla.sim.board_sim import SimulatedBoard
    return SimulatedBoard(TINY, MEMORY_BYTES, clocks_per_bit=8)


@pytest.mark.parametrize("op", [
    Conv2d(batch=1, in_channels=8, out_channels=8, height=6, width=5, kernel=(3, 3),
           padding=(1, 1), bias=True, shift=6, relu=True),
    Conv2d(batch=1, in_channels=5, out_channels=7, height=7, width=4, kernel=(3, 2),
           stride=(2, 1), shift=5),
    Dense(batch=3, in_features=13, out_features=6, bias=True, shift=4),
], ids=["conv3x3-relu", "conv-odd-strided", "dense"])
def test_compiled_layer_runs_bit_exactly_through_the_uart(op):
    program = compile_op(op, TINY)
    inputs = op.random_inputs(np.random.default_rng(7))
    result = AccelRunner(TINY, sim="board-sim").run(program, inputs)
    np.testing.assert_array_equal(result.outputs["out"], op.reference(**inputs))
    # The board's counters came over the UART: the micro-op counts are the RTL tier's.
    rtl = AccelRunner(TINY, sim="rtl").run(program, inputs)
    assert result.counters["gemm_uops"] == rtl.counters["gemm_uops"] > 0
    assert result.counters["alu_uops"] == rtl.counters["alu_uops"]
    assert result.cycles == result.counters["cycles"] > 0
    assert result.sim == "board-sim"


@pytest.mark.parametrize("name", ["icebreaker", "ecpix5-85f"])
def test_board_preset_runs_a_layer_on_its_board_top(name):
    """A board's own board top (its preset, its memory as its bitstream has it:
    the iCEBreaker's single-port RAMs, the ECPIX-5's DDR3 behind LiteDRAM, its
    model here, brought up by the host first): a layer whose DRAM image is
    larger than a few KiB, against numpy; the counters the preset has come back
    over the UART (the iCEBreaker's only one, ``cycles``)."""
    board = BOARDS[name]
    config = board.config
    op = Conv2d(batch=1, in_channels=16, out_channels=12, height=7, width=9, kernel=(3, 3),
                padding=(1, 1), bias=True, shift=7, relu=False)
    program = compile_op(op, config)
    assert program.dram_bytes > 4096
    inputs = op.random_inputs(np.random.default_rng(5))
    backend = get_backend("board-sim", config)
    kind = board.dram or board.memory_kind
    assert backend.link.transport.memory_kind == kind
    assert backend.memory_bytes == (MODULES[kind].size_bytes if board.dram else board.memory_bytes)
    assert (backend.bring_up is not None) == (board.dram is not None)
    result = AccelRunner(config, sim="board-sim").run(program, inputs)
    np.testing.assert_array_equal(result.outputs["out"], op.reference(**inputs))
    # COUNTERS sends the counters the preset has (`event_counters` 0: cycles only).
    assert set(result.counters) == set(rtl_counters(config))
    assert result.cycles == result.counters["cycles"] > 0


def test_memory_round_trip_at_odd_addresses(board):
    link = BoardLink(board)
    rng = np.random.default_rng(3)
    for address, size in ((0, 1), (3, 37), (MEMORY_BYTES - 11, 11), (1001, 5000)):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        link.write_memory(address, data)
        assert link.read_memory(address, size) == data


def test_info_names_the_hardware(board):
    info = BoardLink(board).info()
    assert info == {"version": protocol.PROTOCOL_VERSION, "bus_bytes": TINY.dram_bus_bytes,
                    "memory_bytes": MEMORY_BYTES, "config_hash": TINY.hash, "memory_code": 0}


def test_csr_commands_are_unknown_without_a_dram(board):
    # On-chip memory has no controller: the CSR commands are answered at once,
    # before any argument byte (the host sends them only to a DRAM's board).
    for command in protocol.CSR_COMMANDS:
        board.write(bytes([command]))
        assert board.read(1)[0] == protocol.Status.UNKNOWN
    assert BoardLink(board).status() & protocol.STATUS_RUNNING == 0


def test_unknown_command_is_answered(board):
    board.write(b"\x00")
    assert board.read(1)[0] == protocol.Status.UNKNOWN
    # The link is still in step: the next command works.
    assert BoardLink(board).status() & protocol.STATUS_RUNNING == 0


def test_memory_and_start_are_refused_while_running():
    from vdla.sim.board_sim import SimulatedBoard
    board = SimulatedBoard(TINY, MEMORY_BYTES, clocks_per_bit=8)  # left running: its own
    link = BoardLink(board)
    link.write_memory(0, bytes(64))
    # Zero instructions: no FINISH ever retires, so the program runs until reset.
    link.set_register(protocol.Register.INSN_ADDR, 0)
    link.set_register(protocol.Register.INSN_COUNT, 0)
    link.start()
    assert link.status() == protocol.STATUS_RUNNING
    with pytest.raises(BoardError, match="answered START with status BUSY"):
        link.start()
    with pytest.raises(BoardError, match="answered WRITE with status BUSY"):
        link.write_memory(0, b"\x01\x02\x03")
    # A refused READ still sends its bytes (zeros) before the status.
    board.write(protocol.encode_command(protocol.Command.READ, 0, 4))
    assert board.read(5) == bytes(4) + bytes([protocol.Status.BUSY])


def test_other_hardware_and_oversized_images_are_refused(board):
    odd = PRESETS["odd"]
    with pytest.raises(BoardError, match=rf"bitstream is for config hash {TINY.hash}, not 'odd'"):
        BoardBackend(odd, board)


def test_image_larger_than_the_memory_is_refused():
    backend = get_backend("board-sim", TINY, memory_bytes=MEMORY_BYTES)
    with pytest.raises(BoardError, match=rf"DRAM image \({MEMORY_BYTES + 16} bytes\) does not "
                                         rf"fit the board's {MEMORY_BYTES}-byte on-chip memory"):
        backend.run(np.zeros(MEMORY_BYTES + 16, np.uint8), 0, 1)


def test_serial_board_needs_a_port():
    with pytest.raises(BoardError, match=r"--sim board needs the board's serial port"):
        get_backend("board", TINY)


def test_protocol_encoding_and_header():
    assert protocol.encode_command(protocol.Command.WRITE, 0x10, 3) == \
        b"W" + (0x10).to_bytes(4, "little") + (3).to_bytes(4, "little")
    with pytest.raises(ValueError, match="SET_REG takes 2 fields, got 1"):
        protocol.encode_command(protocol.Command.SET_REG, 1)
    with pytest.raises(ValueError, match="READ: field 4294967296 does not fit 4 bytes"):
        protocol.encode_command(protocol.Command.READ, 1 << 32, 1)
    header = protocol.c_header()
    for command in protocol.Command:
        assert f"#define VDLA_BOARD_CMD_{command.name} 0x{command.value:02x}" in header
    # COUNTERS sends the counters the config's hardware has, 4 bytes each.
    assert f"#define VDLA_BOARD_COUNTERS {len(RTL_COUNTERS)}  /* cycles load_busy " in header
    assert "#define VDLA_BOARD_COUNTERS 1  /* cycles */" in protocol.c_header(PRESETS["icebreaker"])
    assert protocol.reply_bytes(protocol.Command.COUNTERS, 1) == protocol.COUNTER_BYTES
    assert protocol.encode_command(protocol.Command.CSR_READ, 512) == b"r" + bytes([0, 2, 0, 0])
    assert protocol.reply_bytes(protocol.Command.CSR_READ) == 4
    assert f"#define VDLA_BOARD_MEMORY_PHY 0x{protocol.MEMORY_PHY:02x}" in header


def test_memory_byte_names_the_dram_and_its_phy():
    kinds = ("sdram", "ddr3")
    assert [protocol.memory_code(kinds, kind, phy) for kind, phy in
            ((None, False), ("sdram", False), ("ddr3", False), ("ddr3", True))] == \
        [0, 1, 2, 2 | protocol.MEMORY_PHY]
    for code in (0, 1, 2, 0x82):
        assert protocol.memory_code(kinds, *protocol.memory_of_code(kinds, code)) == code
    with pytest.raises(ValueError, match=r"the board names DRAM kind 3, which this host does not "
                                         r"know \(it knows 2: sdram, ddr3\)"):
        protocol.memory_of_code(kinds, 0x83)


def test_a_simulator_option_the_board_does_not_take_is_refused_in_one_line():
    from vdla.sim.errors import OptionError
    with pytest.raises(OptionError, match=r"^unknown option\(s\) for the board: cycle_limit, "
                                          r"trace \(the board runs a program"):
        BoardBackend(PRESETS["tiny"], None, trace="wave.fst", cycle_limit=10)
