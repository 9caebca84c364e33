"""The byte protocol between a host and the board top, over the board's UART.

Stated once here, in plain Python (no Amaranth): the board's host link
(`hw.boards.host_link`) builds its decoder from these tables and the host
driver (`sim.board`) encodes its requests with them; `c_header` writes the
same facts for C/C++ hosts.

Framing. The host sends a command byte, then the command's fixed argument
bytes (`ARGUMENT_BYTES`, little-endian fields), then, for `Command.WRITE`, the
data. The board answers with the command's reply bytes (`reply_bytes`), then
one `Status` byte. The host sends the next command only after that status
byte: there is no flow control on the wire, and the board consumes a byte in
a few clock cycles, far inside one UART character time.

Commands (arguments / reply):

``INFO``      - / ``PROTOCOL_VERSION``, bus bytes, log2 of the memory bytes,
              the 8-byte config hash (`HwConfig.hash`, big-endian), the
              memory byte (`memory_code`)
``WRITE``     address (4), count (4), then ``count`` data bytes / -
``READ``      address (4), count (4) / ``count`` bytes
``SET_REG``   `Register` (1), value (4) / -
``START``     - / -  (pulses the accelerator's ``start``)
``STATUS``    - / one byte of `STATUS_DONE` | `STATUS_RUNNING`
``COUNTERS``  - / each counter of the config's hardware
              (`hw.counters.rtl_counters`), 4 bytes each
``CSR_WRITE`` address (4), value (4) / -  (a board with a DRAM: one word of its
              controller's CSR bus, `hw.boards.litedram_gen`)
``CSR_READ``  address (4) / the word, 4 bytes

Memory and CSR commands and ``START`` while a program runs are refused with
`Status.BUSY` (a refused ``WRITE`` still consumes its data bytes; a refused
``READ`` still sends ``count`` bytes, all zero, a refused ``CSR_READ`` four).
An unknown command byte gets `Status.UNKNOWN` at once; so do the CSR commands
on a board whose memory is on chip.
"""

from __future__ import annotations

import enum

from typing import TYPE_CHECKING

from vdla.hw.counters import rtl_counters

if TYPE_CHECKING:
    from vdla.hw.config import HwConfig

__all__ = ["PROTOCOL_VERSION", "BAUD", "Command", "Status", "Register", "ARGUMENT_BYTES",
           "STATUS_DONE", "STATUS_RUNNING", "INFO_BYTES", "MEMORY_PHY", "CSR_COMMANDS", "memory_code",
           "memory_of_code", "reply_bytes", "encode_command", "c_header"]

PROTOCOL_VERSION = 2
BAUD = 1_000_000
"""The UART's baud rate: every board's bitstream (`hw.boards.table.Board.baud`) and the host's
default (``vdla run --sim board --baud``)."""


class Command(enum.IntEnum):
    """Command bytes (printable, so a serial terminal shows them)."""
    INFO = ord("I")
    WRITE = ord("W")
    READ = ord("R")
    SET_REG = ord("S")
    START = ord("G")
    STATUS = ord("P")
    COUNTERS = ord("C")
    CSR_WRITE = ord("w")
    CSR_READ = ord("r")


class Status(enum.IntEnum):
    """The byte that ends every reply."""
    OK = ord("K")
    BUSY = ord("B")
    UNKNOWN = ord("?")


class Register(enum.IntEnum):
    """Registers ``SET_REG`` writes: the accelerator's program inputs."""
    INSN_ADDR = 0
    INSN_COUNT = 1


# Fixed argument bytes after each command byte.
ARGUMENT_BYTES = {Command.INFO: 0, Command.WRITE: 8, Command.READ: 8, Command.SET_REG: 5,
                  Command.START: 0, Command.STATUS: 0, Command.COUNTERS: 0,
                  Command.CSR_WRITE: 8, Command.CSR_READ: 4}
CSR_COMMANDS = (Command.CSR_WRITE, Command.CSR_READ)

# Bits of the STATUS reply byte.
STATUS_DONE = 1      # the last program has finished (the accelerator's `done`)
STATUS_RUNNING = 2   # a program runs

# INFO's reply: version, bus bytes, log2(memory bytes), 8 hash bytes, the memory byte.
INFO_BYTES = 12
COUNTER_BYTES = 4
CSR_BYTES = 4

# INFO's memory byte: 0 for on-chip memory; for a DRAM behind LiteDRAM, 1 + the
# kind's index in `hw.boards.litedram_gen.MODULES` (new kinds go at its end), with
# MEMORY_PHY set when the controller drives the DRAM's real PHY (a bitstream:
# the host must bring the DRAM up, `sim.dram_bringup`) rather than the model.
MEMORY_PHY = 0x80


def memory_code(dram_kinds: tuple[str, ...], kind: str | None, phy: bool = False) -> int:
    """INFO's memory byte for a board whose memory is the DRAM ``kind`` of
    ``dram_kinds`` (`hw.boards.litedram_gen.MODULES`' keys), or on chip (None)."""
    if kind is None:
        return 0
    return 1 + dram_kinds.index(kind) | (MEMORY_PHY if phy else 0)


def memory_of_code(dram_kinds: tuple[str, ...], code: int) -> tuple[str | None, bool]:
    """The DRAM kind (None: on chip) and whether its PHY is real, from INFO's byte."""
    index = (code & ~MEMORY_PHY) - 1
    if index < 0:
        return None, False
    if index >= len(dram_kinds):
        raise ValueError(f"the board names DRAM kind {index + 1}, which this host does not know "
                         f"(it knows {len(dram_kinds)}: {', '.join(dram_kinds)})")
    return dram_kinds[index], bool(code & MEMORY_PHY)


def reply_bytes(command: Command, count: int = 0) -> int:
    """Bytes the board sends before the status byte.

    ``count``: READ's length in bytes; COUNTERS's number of counters
    (``len(hw.counters.rtl_counters(config))``: the config decides).
    """
    return {Command.INFO: INFO_BYTES, Command.READ: count, Command.STATUS: 1,
            Command.COUNTERS: COUNTER_BYTES * count, Command.CSR_READ: CSR_BYTES}.get(command, 0)


def encode_command(command: Command, *fields: int) -> bytes:
    """The command byte and its argument fields, little-endian.

    ``WRITE``/``READ`` take (address, count); ``SET_REG`` (register, value);
    ``CSR_WRITE`` (address, value); ``CSR_READ`` (address).
    """
    widths = {Command.WRITE: (4, 4), Command.READ: (4, 4), Command.SET_REG: (1, 4),
              Command.CSR_WRITE: (4, 4), Command.CSR_READ: (4,)}.get(command, ())
    if len(fields) != len(widths):
        raise ValueError(f"{command.name} takes {len(widths)} fields, got {len(fields)}")
    out = bytearray([command])
    for value, width in zip(fields, widths):
        if not 0 <= value < 1 << (8 * width):
            raise ValueError(f"{command.name}: field {value} does not fit {width} bytes")
        out += value.to_bytes(width, "little")
    assert len(out) == 1 + ARGUMENT_BYTES[command]
    return bytes(out)


def c_header(config: HwConfig | None = None) -> str:
    """The protocol as a C header, for hosts written in C or C++.

    ``config`` (default: the ``default`` preset) sets the counters COUNTERS
    sends; the header lists them in order.
    """
    if config is None:
        from vdla.hw.config import PRESETS
        config = PRESETS["default"]
    counters = rtl_counters(config)
    lines = ["// Generated from vdla/hw/boards/protocol.py; do not edit.", "#pragma once",
             f"#define VDLA_BOARD_PROTOCOL_VERSION {PROTOCOL_VERSION}"]
    lines += [f"#define VDLA_BOARD_CMD_{c.name} 0x{c.value:02x}  "
              f"/* {ARGUMENT_BYTES[c]} argument bytes */" for c in Command]
    lines += [f"#define VDLA_BOARD_STATUS_{s.name} 0x{s.value:02x}" for s in Status]
    lines += [f"#define VDLA_BOARD_REG_{r.name} {r.value}" for r in Register]
    lines += [f"#define VDLA_BOARD_STATUS_DONE {STATUS_DONE}",
              f"#define VDLA_BOARD_STATUS_RUNNING {STATUS_RUNNING}",
              f"#define VDLA_BOARD_INFO_BYTES {INFO_BYTES}",
              f"#define VDLA_BOARD_MEMORY_PHY 0x{MEMORY_PHY:02x}",
              f"#define VDLA_BOARD_COUNTERS {len(counters)}  /* {' '.join(counters)} */"]
    return "\n".join(lines) + "\n"
