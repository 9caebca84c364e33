"""The whole board top in Verilator, with a UART model on its pins: a serial port
that is a simulation.

`build_board_model` turns `hw.boards.top.board_verilog` and ``board_uart.cpp``
(the UART model and a C ABI) into a shared library, an entry of the one build
cache like the RTL tier's models (`vdla.cache.get_or_build`, kind ``board``,
keyed by the hw sources, the harness, the flags and the Verilator version),
so the library is checked against its recorded size and SHA-256 before every
load and rebuilt when damaged. `SimulatedBoard` loads it and offers the transport interface of
`sim.board` (``write`` bytes, ``read`` exactly n bytes), so the host
driver that would talk to a real board's serial port talks to the simulated
pins through the same bytes.

Time passes only while the host waits for bytes (``read``): the simulated
board runs its clock until the bytes asked for have arrived, or gives up
after ``timeout_cycles`` and raises `TransportTimeout`.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from importlib import resources
from pathlib import Path

from vdla.errors import VdlaError
from vdla import cache
from vdla.hw.config import HwConfig
from vdla.sim.rtl.build import RtlBuildError
from vdla.sim.rtl.toolchain import check_toolchain, verilator_bin, verilator_env, verilator_version

__all__ = ["build_board_model", "SimulatedBoard", "TransportTimeout"]

LIBRARY_NAME = "libvdla_board.so"
RECIPE_VERSION = 1
VERILATOR_FLAGS = ("--cc", "--exe", "--build", "-O3", "-Wno-fatal", "--prefix", "Vboard",
                   "--top-module", "vdla_board", "--x-assign", "fast", "--x-initial", "fast")
OPT_FAST = "-O2"


class TransportTimeout(VdlaError, TimeoutError):
    """The board did not send the bytes the host waited for."""


def build_board_model(config: HwConfig, memory_bytes: int, clocks_per_bit: int,
                      memory_kind: str = "bram") -> Path:
    """Build (or find in the cache) the simulated board; returns the shared library."""
    harness = resources.files("vdla.sim").joinpath("board_uart.cpp").read_text()
    header = (f"#pragma once\n#define VDLA_CLOCKS_PER_BIT {clocks_per_bit}\n")
    # The Verilog depends on the hw sources: key on their digest, not on the text,
    # so a cache hit does not pay for Amaranth's conversion.
    from vdla.hw.generate import hw_source_digest
    from vdla.hw.boards.litedram_gen import MODULES, litedram_versions
    dram = memory_kind in MODULES
    sources = ["board.v"] + (["litedram.v"] if dram else [])
    digest = cache.key_of(f"recipe {RECIPE_VERSION}", config.hash, f"memory {memory_bytes}",
                          f"memory kind {memory_kind}", hw_source_digest(), harness, header,
                          litedram_versions() if dram else "",
                          verilator_version(), " ".join(VERILATOR_FLAGS), OPT_FAST, length=16)

    def build(work: Path) -> None:
        from vdla.hw.boards.top import board_verilog
        from vdla.hw.boards.litedram_gen import litedram_verilog
        check_toolchain()
        (work / "board.v").write_text(board_verilog(config, memory_bytes, clocks_per_bit,
                                                    memory_kind))
        if dram:
            (work / "litedram.v").write_text(
                litedram_verilog(MODULES[memory_kind], config.dram_bus_bits).verilog)
        (work / "board_uart.cpp").write_text(harness)
        (work / "board_config.h").write_text(header)
        command = [str(verilator_bin()), *VERILATOR_FLAGS, "-j", str(os.cpu_count() or 2),
                   "-Mdir", "obj", "-o", f"../{LIBRARY_NAME}",
                   "-CFLAGS", "-fPIC", "-CFLAGS", "-I..", "-LDFLAGS", "-shared",
                   *sources, "board_uart.cpp"]
        cache.run_tool(command, work, "building the simulated board", RtlBuildError,
                       env=verilator_env(opt_fast=OPT_FAST))
        shutil.rmtree(work / "obj")
    entry = cache.get_or_build("board", f"{config.hash}-{digest}", build, [LIBRARY_NAME],
                               what="board model")
    return entry.directory / LIBRARY_NAME


class SimulatedBoard:
    """The board top under Verilator, as a byte transport (``write``/``read``).

    Parameters
    ----------
    config : HwConfig
    memory_bytes : int
        The on-chip memory standing in for DRAM.
    clocks_per_bit : int
        UART clocks per bit (small values simulate faster).
    memory_kind : str
        The memory's RAM (`hw.boards.memory.MEMORY_KINDS`).
    timeout_cycles : int
        Cycles ``read`` waits for its bytes before raising `TransportTimeout`.
    """

    def __init__(self, config: HwConfig, memory_bytes: int, clocks_per_bit: int = 8,
                 timeout_cycles: int = 50_000_000, memory_kind: str = "bram"):
        self.config = config
        self.memory_bytes = memory_bytes
        self.memory_kind = memory_kind
        self.clocks_per_bit = clocks_per_bit
        self.timeout_cycles = timeout_cycles
        lib = ctypes.CDLL(str(build_board_model(config, memory_bytes, clocks_per_bit,
                                                memory_kind)))
        lib.board_create.restype = ctypes.c_void_p
        lib.board_destroy.argtypes = [ctypes.c_void_p]
        lib.board_write.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_long]
        lib.board_read.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_long,
                                   ctypes.c_uint64]
        lib.board_read.restype = ctypes.c_long
        lib.board_cycles.argtypes = [ctypes.c_void_p]
        lib.board_cycles.restype = ctypes.c_uint64
        self._lib = lib
        self._handle = lib.board_create()

    @property
    def cycles(self) -> int:
        """Clock cycles simulated so far (UART traffic included)."""
        return int(self._lib.board_cycles(self._handle))

    def write(self, data: bytes) -> None:
        """Queue bytes for the board's ``uart_rx`` pin."""
        self._lib.board_write(self._handle, bytes(data), len(data))

    def read(self, count: int) -> bytes:
        """Run the board until ``count`` bytes came from its ``uart_tx`` pin."""
        buffer = ctypes.create_string_buffer(max(count, 1))
        got = self._lib.board_read(self._handle, buffer, count, self.timeout_cycles)
        if got < count:
            raise TransportTimeout(f"the simulated board sent {got} of {count} bytes in "
                                   f"{self.timeout_cycles} cycles")
        return buffer.raw[:count]

    def close(self) -> None:
        if self._handle:
            self._lib.board_destroy(self._handle)
            self._handle = None

    def __del__(self):
        self.close()
