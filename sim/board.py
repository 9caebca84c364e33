"""The host driver of a board: runs programs over the UART byte protocol.

`BoardLink` speaks `hw.boards.protocol` over a *transport*: anything with
``write(bytes)`` and ``read(n) -> bytes`` (exactly n bytes, or an exception).
Two transports exist: `SerialTransport` (a real board's USB serial port,
through pyserial, the ``board`` extra) and `sim.board_sim.SimulatedBoard` (the
board top under Verilator with a UART model on its pins). The driver cannot
tell them apart, which is the point: what the simulation checks is what a
board would be sent.

`BoardBackend` puts the link behind the `sim.backend` interface, so
`runtime.runner.AccelRunner` (and ``vdla run --sim board``) run a program on a
board with the same inputs/outputs contract as ``fsim`` and ``rtl``: it
uploads the DRAM image, sets the program's address and count, starts, polls
until done, reads the image back and the counters. Registered names:
``board`` (a serial port: ``port=``) and ``board-sim`` (the simulated board).
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np

from vdla.hw.boards import protocol
from vdla.hw.config import HwConfig
from vdla.hw.counters import rtl_counters
from vdla.sim.backend import RunResult, register_backend
from vdla.sim.errors import OptionError, SimulationError

__all__ = ["Transport", "SerialTransport", "BoardLink", "BoardError", "BoardBackend",
           "CHUNK_BYTES"]

Command, Status = protocol.Command, protocol.Status
# Bytes per WRITE/READ command: long enough to amortise the command, short
# enough that a lost byte is noticed quickly.
CHUNK_BYTES = 4096
# The memory test after a DRAM's bring-up: bytes per place, and the pattern's seed.
MEMORY_TEST_BYTES = 64
MEMORY_TEST_SEED = 42


class BoardError(SimulationError):
    """The board answered unexpectedly, refused a command, or is other hardware."""


class Transport(Protocol):
    """A byte pipe to a board."""

    def write(self, data: bytes) -> None:
        """Send bytes."""

    def read(self, count: int) -> bytes:
        """Receive exactly ``count`` bytes (raise on timeout)."""


class SerialTransport:
    """A board's USB serial port (pyserial; ``pip install vdla[board]``).

    Parameters
    ----------
    port : str
        The serial device, e.g. ``/dev/ttyUSB1``.
    baud : int
        Must match the bitstream's (`hw.boards.table.Board.baud`).
    timeout : float
        Seconds a ``read`` waits.
    """

    def __init__(self, port: str, baud: int = protocol.BAUD, timeout: float = 5.0):
        try:
            import serial
        except ImportError:
            raise BoardError("talking to a board needs pyserial: "
                             "pip install 'vdla[board]'") from None
        try:
            self._serial = serial.Serial(port, baud, timeout=timeout)
        except serial.SerialException as error:
            raise BoardError(f"cannot open serial port {port}: {error}") from None
        self.port = port

    def write(self, data: bytes) -> None:
        self._serial.write(data)

    def read(self, count: int) -> bytes:
        data = self._serial.read(count)
        if len(data) != count:
            raise BoardError(f"the board on {self.port} sent {len(data)} of {count} bytes "
                             "before the timeout (wrong port or baud rate, or no bitstream?)")
        return data

    def close(self) -> None:
        self._serial.close()


class BoardLink:
    """The protocol of `hw.boards.protocol`, one method per command."""

    def __init__(self, transport: Transport):
        self.transport = transport

    def _command(self, command: Command, *fields: int, data: bytes = b"",
                 reply: int = 0) -> bytes:
        self.transport.write(protocol.encode_command(command, *fields) + data)
        answer = self.transport.read(reply + 1)
        status = answer[-1]
        if status != Status.OK:
            name = Status(status).name if status in Status._value2member_map_ else hex(status)
            raise BoardError(f"the board answered {command.name} with status {name}")
        return answer[:-1]

    def info(self) -> dict:
        """Protocol version, bus bytes, memory bytes, config hash and memory byte
        (`hw.boards.protocol.memory_code`) of the bitstream."""
        data = self._command(Command.INFO, reply=protocol.reply_bytes(Command.INFO))
        if data[0] != protocol.PROTOCOL_VERSION:   # the rest may be laid out otherwise
            return {"version": data[0]}
        return {"version": data[0], "bus_bytes": data[1], "memory_bytes": 1 << data[2],
                "config_hash": data[3:11].hex(), "memory_code": data[11]}

    def write_memory(self, address: int, data: bytes) -> None:
        for offset in range(0, len(data), CHUNK_BYTES):
            chunk = bytes(data[offset:offset + CHUNK_BYTES])
            self._command(Command.WRITE, address + offset, len(chunk), data=chunk)

    def read_memory(self, address: int, count: int) -> bytes:
        out = bytearray()
        for offset in range(0, count, CHUNK_BYTES):
            size = min(CHUNK_BYTES, count - offset)
            out += self._command(Command.READ, address + offset, size, reply=size)
        return bytes(out)

    def csr_read(self, address: int) -> int:
        """A word of the DRAM controller's CSR bus (``CSR_READ``)."""
        return int.from_bytes(self._command(Command.CSR_READ, address,
                                            reply=protocol.CSR_BYTES), "little")

    def csr_write(self, address: int, value: int) -> None:
        """Write a word of the DRAM controller's CSR bus (``CSR_WRITE``)."""
        self._command(Command.CSR_WRITE, address, value)

    def set_register(self, register: protocol.Register, value: int) -> None:
        self._command(Command.SET_REG, int(register), value)

    def start(self) -> None:
        self._command(Command.START)

    def status(self) -> int:
        """The STATUS byte (`hw.boards.protocol.STATUS_DONE`, `STATUS_RUNNING` bits)."""
        return self._command(Command.STATUS, reply=1)[0]

    def counters(self, config: HwConfig) -> dict[str, int]:
        """The counters of ``config``'s hardware (`hw.counters.rtl_counters`) by name."""
        names = rtl_counters(config)
        data = self._command(Command.COUNTERS,
                             reply=protocol.reply_bytes(Command.COUNTERS, len(names)))
        width = protocol.COUNTER_BYTES
        return {name: int.from_bytes(data[width * i:width * (i + 1)], "little")
                for i, name in enumerate(names)}


class _LinkCsrBus:
    """The DRAM controller's CSR bus over a `BoardLink` (`sim.dram_bringup.CsrBus`)."""

    def __init__(self, link: BoardLink):
        self.read, self.write = link.csr_read, link.csr_write


class BoardBackend:
    """A board (or its simulation) behind the `sim.backend.Backend` interface.

    Parameters
    ----------
    config : HwConfig
        Must be the hardware of the bitstream (checked against INFO's hash).
    transport : Transport
    poll_seconds : float
        Pause between STATUS polls (0 for a simulation, whose time only
        passes while the host reads).
    timeout_seconds : float
        Give up waiting for ``done`` after this long.
    """

    name = "board"

    def __init__(self, config: HwConfig, transport: Transport, poll_seconds: float = 0.01,
                 timeout_seconds: float = 600.0, **options):
        if options:
            raise OptionError(f"unknown option(s) for the board: {', '.join(sorted(options))} "
                              "(the board runs a program; it neither traces nor stops early)")
        self.config = config
        self.link = BoardLink(transport)
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds
        info = self.link.info()
        if info["version"] != protocol.PROTOCOL_VERSION:
            raise BoardError(f"the board speaks protocol version {info['version']}, this host "
                             f"{protocol.PROTOCOL_VERSION}")
        if info["config_hash"] != config.hash:
            raise BoardError(f"the board's bitstream is for config hash {info['config_hash']}, "
                             f"not {config.name!r} ({config.hash})")
        self.memory_bytes = info["memory_bytes"]
        self.bring_up = self._bring_up_dram(info["memory_code"])

    def _bring_up_dram(self, code: int):
        """A board whose memory is a DRAM behind LiteDRAM: its init sequence (and,
        with the real PHY, read leveling) over the CSR commands, before any use
        (`sim.dram_bringup`); returns its report (None for on-chip memory)."""
        from vdla.hw.boards.litedram_gen import MODULES, litedram_verilog
        try:
            kind, phy = protocol.memory_of_code(tuple(MODULES), code)
        except ValueError as error:
            raise BoardError(str(error)) from None
        if kind is None:
            return None
        from vdla.sim.dram_bringup import bring_up
        # The CSR map of the controller the board has, from the same generator.
        csrs = litedram_verilog(MODULES[kind], self.config.dram_bus_bits, hardware=phy).csrs
        report = bring_up(_LinkCsrBus(self.link), MODULES[kind], csrs)
        self._memory_test()
        return report

    def _memory_test(self) -> None:
        """LiteX's memory test after the bring-up, short: pseudo-random bytes at a
        few places across the DRAM's banks and rows (odd addresses among them),
        written and read back through the controller. It overwrites them: the
        host uploads a program's whole image before each run anyway."""
        rng = np.random.default_rng(MEMORY_TEST_SEED)
        size = self.memory_bytes
        for address in (0, size // 3 | 5, size // 2 + 4093, size - MEMORY_TEST_BYTES):
            data = rng.integers(0, 256, MEMORY_TEST_BYTES, dtype=np.uint8).tobytes()
            self.link.write_memory(address, data)
            wrong = sum(a != b for a, b in zip(data, self.link.read_memory(address, len(data))))
            if wrong:
                raise BoardError(f"the board's DRAM does not keep what the host writes after its "
                                 f"bring-up: {wrong} of {len(data)} bytes wrong at 0x{address:x}")

    def run(self, dram: np.ndarray, insn_offset: int, insn_count: int) -> RunResult:
        if dram.size > self.memory_bytes:
            raise BoardError(f"the program's DRAM image ({dram.size} bytes) does not fit the "
                             f"board's {self.memory_bytes}-byte on-chip memory")
        began = time.monotonic()
        self.link.write_memory(0, dram.tobytes())
        self.link.set_register(protocol.Register.INSN_ADDR, insn_offset)
        self.link.set_register(protocol.Register.INSN_COUNT, insn_count)
        self.link.start()
        while not self.link.status() & protocol.STATUS_DONE:
            if time.monotonic() - began > self.timeout_seconds:
                raise BoardError(f"the board did not finish within {self.timeout_seconds:g} s")
            time.sleep(self.poll_seconds)
        counters = self.link.counters(self.config)
        dram[:] = np.frombuffer(self.link.read_memory(0, dram.size), dtype=np.uint8)
        return RunResult(cycles=counters["cycles"], counters=counters,
                         details={"memory_bytes": self.memory_bytes,
                                  "host_seconds": round(time.monotonic() - began, 3)})


def _serial_board(config: HwConfig, port: str | None = None, baud: int = protocol.BAUD,
                  **options) -> BoardBackend:
    if not port:
        raise BoardError("--sim board needs the board's serial port (--port /dev/ttyUSB1); "
                         "--sim board-sim runs the simulated board instead")
    return BoardBackend(config, SerialTransport(port, baud), **options)


def _simulated_board(config: HwConfig, memory_bytes: int | None = None,
                     clocks_per_bit: int | None = None, memory_kind: str | None = None,
                     **options) -> BoardBackend:
    from vdla.hw.boards.memory import MEMORY_KINDS
    from vdla.hw.boards.top import DEFAULT_CLOCKS_PER_BIT, DEFAULT_MEMORY_BYTES
    from vdla.hw.boards.table import BOARDS
    from vdla.hw.boards.litedram_gen import MODULES
    from vdla.sim.board_sim import SimulatedBoard
    # A board preset's config is simulated with its board's memory, as the board's
    # bitstream has it (its DRAM, `Board.dram`, or on-chip memory), unless
    # ``memory_kind`` names another (a DRAM of `hw.boards.litedram_gen.MODULES`: its
    # size). The board whose preset the config is, else one with its hardware
    # (`ulx3s` and `ecpix5` are one hardware on two boards).
    same = [b for b in BOARDS.values() if b.config.same_hardware(config)]
    board_of = next((b for b in same if b.preset == config.name), same[0] if same else None)
    if memory_kind is None:
        memory_kind = (board_of.dram or board_of.memory_kind) if board_of else "bram"
    kinds = (*MEMORY_KINDS, *MODULES)
    if memory_kind not in kinds:
        raise BoardError(f"memory_kind: one of {', '.join(kinds)}, got {memory_kind!r}")
    if memory_kind in MODULES:
        memory_bytes = MODULES[memory_kind].size_bytes
    elif memory_bytes is None:
        memory_bytes = board_of.memory_bytes if board_of else DEFAULT_MEMORY_BYTES
    board = SimulatedBoard(config, memory_bytes, clocks_per_bit or DEFAULT_CLOCKS_PER_BIT,
                           memory_kind=memory_kind)
    backend = BoardBackend(config, board, poll_seconds=0.0, **options)
    backend.name = "board-sim"
    return backend


register_backend("board", _serial_board, run_options=("port", "baud"))
register_backend("board-sim", _simulated_board, run_options=("memory_kind",))
