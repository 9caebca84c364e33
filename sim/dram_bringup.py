"""DRAM bring-up from the host: LiteX BIOS's ``sdram_init`` run over the board's CSR bus.

Why the host runs it. LiteDRAM's controller with a real PHY (the ECPIX-5's
DDR3 behind ``ECP5DDRPHY``, `hw.boards.litedram_gen.litedram_verilog(..., hardware=True)`) only
works after a software init sequence and, for that PHY, read leveling. In a
LiteX SoC the BIOS does both, in C, on the soft CPU. A vdla board has no CPU:
its host link (UART) gives the host a word read and a word write on the
controller's 32-bit CSR bus, and this module drives the same sequence through
them. It is independent of the transport: it takes any `CsrBus`.

Contract. `bring_up(bus, dram, csrs)` leaves the DFI injector in hardware
control (the controller owns the DRAM) with every byte lane's read bitslip
and read delay trained, and returns a `BringUpReport`; or it raises
`DramBringUpError` (one line naming the module, or the CSR, at fault), after
which the DRAM must not be used. ``csrs`` is the map of CSR name -> first word
address that `litedram_verilog` returns (the model's map, with only the
``sdram_*`` CSRs, is accepted too: then there is nothing to level). A CSR
wider than 32 bits takes several words, most significant first (LiteX's CSR
bus convention).

Where each step comes from (LiteX's ``litex/soc/software/liblitedram``, and
LiteDRAM's ``litedram/init.py``; the same order, the same CSR writes):

1. ``sdram_software_control_on``: ``sdram_dfii_control`` = CKE|ODT|RESET_N
   (SEL clear: the DFI injector drives the DRAM).
2. ``init_sequence()``, which LiteDRAM's ``get_sdram_phy_c_header`` emits from
   ``get_sdram_phy_init_sequence(phy_settings, timing_settings)``: per entry,
   phase 0's address and bank address, then either a ``sdram_dfii_control``
   write (``DFII_CONTROL_*`` entries) or phase 0's command and command_issue,
   then ``cdelay(delay)``. The DFII bit values are read from LiteDRAM's own
   Python header (``get_sdram_phy_py_header``), not restated here.
3. ``sdram_leveling`` / ``sdram_read_leveling`` (``sdram.c``), when the PHY
   reads-levels and its CSRs are in the map: every module's (byte lane's)
   read delay and bitslip reset; then per module, for each bitslip, a scan of
   every delay tap with ``sdram_write_read_check_test_pattern`` for the three
   seeds (42, 84, 36) scored as ``sdram_read_leveling_scan_module`` scores it;
   the best bitslip selected and the delay centred in its working window by
   ``sdram_leveling_center_module`` (including its check of the centre, up to
   8 tries). The ``read_*`` actions, ``sdram_select`` and ``sdram_deselect``
   (with the ECP5's DQSBUFM pause toggle) are ``accessors.c``'s. One
   difference: the BIOS also centres every bitslip it scans, only to print
   it; that has no effect on the result, so it is not done here.
4. ``sdram_software_control_off``: ``sdram_dfii_control`` = SEL|CKE|ODT|RESET_N
   (the controller drives the DRAM). LiteX writes SEL alone; under SEL the
   controller's multiplexer holds CKE, ODT and RESET_N high itself, so the
   other bits change nothing there, but they keep the DRAM out of reset and
   clocked should software control be taken again.

The LiteX BIOS's memory test after step 4 goes through the controller's user
port, which the host link's DRAM read and write reach: the host driver runs
it (`sim.board.BoardBackend`), not this module. (LiteDRAM's DRAM module model
takes a write's data only from the phases whose ``wrdata_en`` is set, while
the injector sets it on the write phase alone, as the ECP5 PHY reads it; so
the test pattern does not round-trip through the injector on the model, and
a simulated board has nothing to level anyway.)

Delays. ``cdelay(n)`` in LiteX is a busy loop of ``n`` iterations, each at
least a nop, a decrement and a branch: three instructions, at least one
cycle each on LiteX's soft CPUs at the controller's clock. The host sleeps
``CDELAY_CYCLES * n / dram.clock_hz`` seconds for each, so it waits no less
than the BIOS does. For the ECPIX-5's DDR3 (100 MHz, DRAM clock 200 MHz) that
is 1.5 ms after releasing reset (JEDEC DDR3 asks 500 us before CKE), 300 us
after CKE (tXPR: tRFC + 10 ns = 270 ns for this 4 Gb part), 6 us after
mode register 0 (tMOD: 12 clocks = 60 ns) and after ZQ calibration (tZQinit:
512 clocks = 2.56 us; ``n / clock_hz`` alone would be 2 us, too short).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import re
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from vdla.errors import VdlaError
from vdla.hw.boards.litedram_gen import CSR_DATA_BITS, DramModule, dram_settings

__all__ = ["CsrBus", "BringUpReport", "DramBringUpError", "bring_up", "init_sleeps",
           "CDELAY_CYCLES", "SEEDS"]

# Controller clock cycles per iteration of LiteX's ``cdelay`` loop (module docstring).
CDELAY_CYCLES = 3
# ``_seed_array`` of sdram.c: each test pattern is run once per seed.
SEEDS = (42, 84, 36)
# sdram.c's cdelay after activate, write, read and precharge in the test pattern,
# and after each delay step when it sets the centred delay.
_COMMAND_LOOPS = 15
_STEP_LOOPS = 100
# sdram_leveling_center_module's tries at the centred delay before it gives up.
_CENTRE_TRIES = 8
# libbase/lfsr.h's Galois taps for a 32-bit LFSR (``lfsr(32, prev)``).
_LFSR32_TAPS = 0x80200003
# PHYs whose DQSBUFMs report a burst (``burstdet``) and need the pause toggle in
# sdram_deselect (sdram.c / accessors.c: SDRAM_PHY_ECP5DDRPHY, SDRAM_PHY_GW2DDRPHY).
_BURSTDET_PHYS = ("ECP5DDRPHY", "GW2DDRPHY")


class DramBringUpError(VdlaError):
    """The DRAM could not be brought up (a CSR missing, a PHY this host sequence does not
    train, a byte lane without a working read window): the board must not use it."""


class CsrBus(Protocol):
    """The controller's CSR bus as the host reaches it (the host link's CSR commands).

    Words are ``CSR_DATA_BITS`` wide, at word addresses (the values of the map
    `hw.boards.litedram_gen.litedram_verilog(..., hardware=True)` returns).
    """

    def read(self, address: int) -> int:
        """The word at ``address``."""

    def write(self, address: int, value: int) -> None:
        """Write ``value`` (0 <= value < 2**32) to the word at ``address``."""


@dataclasses.dataclass(frozen=True)
class BringUpReport:
    """What `bring_up` did.

    Attributes
    ----------
    leveled : bool
        Whether read leveling ran (the PHY levels reads and its CSRs were in the map).
    bitslips, delays : tuple of int
        Per module (byte lane, ``phy_settings.strobes`` of them) the read bitslip
        and delay tap left set; empty when leveling did not run.
    windows : tuple of (int, int)
        Per module, the first and last tap of its widest working delay window at
        the chosen bitslip (``delays`` is their midpoint, as LiteX centres).
    csr_reads, csr_writes : int
        CSR bus words read and written.
    """

    leveled: bool
    bitslips: tuple[int, ...]
    delays: tuple[int, ...]
    windows: tuple[tuple[int, int], ...]
    csr_reads: int
    csr_writes: int

    @property
    def csr_accesses(self) -> int:
        """CSR words read or written in all."""
        return self.csr_reads + self.csr_writes


def _dfii_bits(phy_settings, timing_settings) -> dict[str, int]:
    """``DFII_CONTROL_*`` / ``DFII_COMMAND_*`` -> value, read from LiteDRAM's Python header."""
    from litedram.init import get_sdram_phy_py_header
    text = get_sdram_phy_py_header(phy_settings, timing_settings)
    bits = {name.upper(): int(value, 16)
            for name, value in re.findall(r"^(dfii_\w+)\s*=\s*0x([0-9a-fA-F]+)$", text, re.M)}
    if not bits:
        raise DramBringUpError("LiteDRAM's get_sdram_phy_py_header lists no DFII_* constants: "
                               "this LiteDRAM version is not supported")
    return bits


def _combine(bits: dict[str, int], names) -> int:
    """The DFII bits ``names`` OR-ed together."""
    return functools.reduce(operator.or_, (bits[name] for name in names), 0)


def _init_sequence(phy_settings, timing_settings, bits):
    """`get_sdram_phy_init_sequence` as (comment, address, bank, is_control, value, loops)."""
    from litedram.init import get_sdram_phy_init_sequence
    if phy_settings.is_clam_shell or phy_settings.is_rdimm:
        raise DramBringUpError("clam-shell and RDIMM DDR4 init sequences are not supported")
    entries = []
    for comment, address, bank, command, loops in get_sdram_phy_init_sequence(phy_settings,
                                                                            timing_settings)[0]:
        names = command.split("|")
        unknown = [name for name in names if name not in bits]
        if unknown:
            raise DramBringUpError(f"init sequence entry {comment!r}: unknown DFII bit {unknown[0]}")
        is_control = all(name.startswith("DFII_CONTROL_") for name in names)
        if not is_control and not all(name.startswith("DFII_COMMAND_") for name in names):
            raise DramBringUpError(f"init sequence entry {comment!r} mixes control and "
                                   f"command bits: {command}")
        entries.append((comment, address, bank, is_control, _combine(bits, names), loops))
    return entries


def init_sleeps(dram: DramModule) -> list[float]:
    """The seconds `bring_up` sleeps in the init sequence (step 2), in order.

    Parameters
    ----------
    dram : hw.boards.litedram_gen.DramModule
        The table row (its PHY settings, timings and clock).

    Returns
    -------
    list of float
        One per entry of LiteDRAM's init sequence with a nonzero ``cdelay``:
        ``CDELAY_CYCLES * loops / dram.clock_hz``.
    """
    phy_settings, timing_settings = dram_settings(dram)
    entries = _init_sequence(phy_settings, timing_settings, _dfii_bits(phy_settings, timing_settings))
    return [_seconds(dram, loops) for *_, loops in entries if loops]


def _seconds(dram: DramModule, loops: int) -> float:
    return CDELAY_CYCLES * loops / dram.clock_hz


def _lfsr32(previous: int) -> int:
    """One step of libbase's ``lfsr(32, prev)`` (a Galois LFSR)."""
    lsb = previous & 1
    previous >>= 1
    return previous ^ _LFSR32_TAPS if lsb else previous


class _Host:
    """The BIOS's CSR accessors and leveling routines, over a `CsrBus`."""

    def __init__(self, bus: CsrBus, dram: DramModule, csrs: Mapping[str, int], phy_settings,
                 bits: dict[str, int], sleep: Callable[[float], object]):
        self.bus, self.dram, self.csrs, self.settings = bus, dram, csrs, phy_settings
        self.bits, self.sleep = bits, sleep
        self.reads = self.writes = 0
        self.nphases = phy_settings.nphases
        self.strobes = phy_settings.strobes
        self.data_bytes = phy_settings.dfi_databits // 8         # DFII_PIX_DATA_BYTES
        self.data_words = -(-phy_settings.dfi_databits // CSR_DATA_BITS)
        self.xdr = 1 if phy_settings.memtype == "SDR" else 2
        self.dq_dqs_ratio = phy_settings.databits // phy_settings.strobes
        # The ECP5's burst detector, where its CSRs are (not on the model's map).
        self.burstdet = (phy_settings.phytype in _BURSTDET_PHYS
                         and "ddrphy_burstdet_seen" in csrs)
        # READ_CHECK_TEST_PATTERN_MAX_ERRORS, for all seeds.
        self.max_errors = len(SEEDS) * (8 * self.nphases * self.data_bytes // self.strobes)
        for phase in range(self.nphases):
            for name in ("command", "command_issue", "address", "baddress", "wrdata", "rddata"):
                self.address(f"sdram_dfii_pi{phase}_{name}")

    # ------------------------------------------------------------ CSR accessors
    def address(self, name: str) -> int:
        if name not in self.csrs:
            raise DramBringUpError(f"the CSR map has no {name}: not a LiteDRAM controller's "
                                   "(hw.boards.litedram_gen.litedram_verilog's) map")
        return self.csrs[name]

    def write(self, name: str, value: int, words: int = 1) -> None:
        """Write a CSR of ``words`` words, most significant word first (csr_wr_buf)."""
        base = self.address(name)
        mask = (1 << CSR_DATA_BITS) - 1
        for index in range(words):
            self.bus.write(base + index, (value >> (CSR_DATA_BITS * (words - 1 - index))) & mask)
            self.writes += 1

    def read(self, name: str, words: int = 1) -> int:
        """Read a CSR of ``words`` words, most significant word first (csr_rd_buf)."""
        base, value = self.address(name), 0
        for index in range(words):
            word = self.bus.read(base + index)
            self.reads += 1
            if not isinstance(word, int) or not 0 <= word < 1 << CSR_DATA_BITS:
                raise DramBringUpError(f"CSR bus read of {name} (word {base + index}) returned "
                                       f"{word!r}, not a {CSR_DATA_BITS}-bit word")
            value = value << CSR_DATA_BITS | word
        return value

    def cdelay(self, loops: int) -> None:
        self.sleep(_seconds(self.dram, loops))

    def at(self, phase: int, address: int = 0, bank: int = 0) -> None:
        """Phase ``phase``'s address and bank address (``sdram_dfii_pi*_address``,
        ``_baddress``), as the BIOS writes them before a command."""
        self.write(f"sdram_dfii_pi{phase}_address", address)
        self.write(f"sdram_dfii_pi{phase}_baddress", bank)

    def command(self, phase: int, command: int) -> None:
        """``command_p<phase>``: the command, then command_issue."""
        self.write(f"sdram_dfii_pi{phase}_command", command)
        self.write(f"sdram_dfii_pi{phase}_command_issue", 1)

    def command_bits(self, *names: str) -> int:
        return _combine(self.bits, [f"DFII_COMMAND_{name}" for name in names])

    def control(self, *names: str) -> None:
        self.write("sdram_dfii_control",
                   _combine(self.bits, [f"DFII_CONTROL_{name}" for name in names]))

    # ------------------------------------------------------------ init sequence
    def init_sequence(self, entries) -> None:
        for _, address, bank, is_control, value, loops in entries:
            self.at(0, address, bank)
            if is_control:
                self.write("sdram_dfii_control", value)
            else:
                self.command(0, value)
            if loops:
                self.cdelay(loops)

    # ------------------------------------------------------------ leveling actions
    def action(self, module: int, csr: str) -> None:
        """``sdram_leveling_action``: select the module, pulse ``csr``, deselect."""
        self.write("ddrphy_dly_sel", 1 << module)
        self.write(csr, 1)
        self.write("ddrphy_dly_sel", 0)
        if self.burstdet:
            # Sync every DQSBUFM by toggling all their PAUSE inputs (dly_sel).
            self.write("ddrphy_dly_sel", (1 << self.strobes) - 1)
            self.write("ddrphy_dly_sel", 0)

    def pattern(self, seed: int) -> list[bytes]:
        """Each phase's write data bytes for ``seed``: the LFSR's low bits, LSB first."""
        state, phases = seed, []
        for _ in range(self.nphases):
            data = bytearray()
            for _ in range(self.data_bytes):
                value = 0
                for bit in range(8):
                    state = _lfsr32(state)
                    value |= (state & 1) << bit
                data.append(value)
            phases.append(bytes(data))
        return phases

    def row_command(self, command: int) -> None:
        """Phase 0 at bank 0, address 0 (activate / precharge the test row), then cdelay(15)."""
        self.at(0)
        self.command(0, command)
        self.cdelay(_COMMAND_LOOPS)

    def check_pattern(self, module: int, seed: int) -> int:
        """``sdram_write_read_check_test_pattern``: the module's bit errors (+1 without a burst)."""
        written = self.pattern(seed)
        self.row_command(self.command_bits("RAS", "CS"))
        for phase, data in enumerate(written):
            # csr_wr_buf_uint8: byte 0 is the most significant byte of the CSR.
            self.write(f"sdram_dfii_pi{phase}_wrdata", int.from_bytes(data, "big"), self.data_words)
        wrphase, rdphase = int(self.settings.wrphase), int(self.settings.rdphase)
        self.at(wrphase)
        self.command(wrphase, self.command_bits("CAS", "WE", "CS", "WRDATA"))
        self.cdelay(_COMMAND_LOOPS)
        if self.burstdet:
            self.write("ddrphy_burstdet_clr", 1)
        self.at(rdphase)
        self.command(rdphase, self.command_bits("CAS", "CS", "RDDATA"))
        self.cdelay(_COMMAND_LOOPS)
        self.row_command(self.command_bits("RAS", "WE", "CS"))
        errors = 0
        mask = (1 << self.dq_dqs_ratio) - 1
        half = self.data_bytes // self.xdr
        for phase in range(self.nphases):
            read = self.read(f"sdram_dfii_pi{phase}_rddata", self.data_words)
            read_bytes = (read & ((1 << 8 * self.data_bytes) - 1)).to_bytes(self.data_bytes, "big")
            # The module's byte offsets in the big-endian buffer: its byte of the
            # first (positive-edge) half of the phase's data and of the second.
            nebo = half - 1 - (module * self.dq_dqs_ratio) // 8
            pebo = nebo + half
            if half == 0:
                pebo = nebo = 0
            ibo = (module * self.dq_dqs_ratio) % 8      # within a byte: x4 chips only
            # SDR (one beat per phase): the module's one byte is at ``nebo`` (LiteX's
            # ``pebo`` would be past the buffer; no SDR PHY levels there).
            offsets = [pebo, nebo] if self.xdr == 2 else [nebo]
            for count, offset in enumerate(offsets):
                if count == 1 and self.data_bytes == 1:
                    ibo = 4
                lanes = [offset, offset + 1] if self.dq_dqs_ratio == 16 else [offset]
                for lane in lanes:
                    errors += (((written[phase][lane] >> ibo) & mask)
                               ^ ((read_bytes[lane] >> ibo) & mask)).bit_count()
        if self.burstdet and not (self.read("ddrphy_burstdet_seen") >> module) & 1:
            errors += 1
        return errors

    def run_pattern(self, module: int) -> int:
        return sum(self.check_pattern(module, seed) for seed in SEEDS)

    def scan(self, module: int) -> int:
        """``sdram_read_leveling_scan_module``: the score of the current bitslip."""
        delays = self.settings.delays
        score = 0
        self.action(module, "ddrphy_rdly_dq_rst")
        for _ in range(delays):
            errors = self.run_pattern(module)
            working = errors == 0
            score += working * self.max_errors * delays + (self.max_errors - errors)
            self.action(module, "ddrphy_rdly_dq_inc")
        return score

    def centre(self, module: int) -> tuple[int, int, int, bool]:
        """``sdram_leveling_center_module``: (window min, max, centre, centre checked);
        min is -1 without a window of two working taps."""
        delays = self.settings.delays
        delay, working, delay_min = 0, False, -1
        self.action(module, "ddrphy_rdly_dq_rst")
        # The smallest working delay: the first of two working taps in a row.
        while True:
            last_working = working
            working = self.run_pattern(module) == 0
            if working and last_working and delay_min < 0:
                delay_min = delay - 1
                break
            delay += 1
            if delay >= delays:
                break
            self.action(module, "ddrphy_rdly_dq_inc")
        delay_max = current_min = delay_min
        # The widest working window from there.
        while True:
            working = self.run_pattern(module) == 0
            if working:
                if delay - current_min > delay_max - delay_min:
                    delay_min, delay_max = current_min, delay
            else:
                current_min = delay + 1
            delay += 1
            if delay >= delays:
                break
            self.action(module, "ddrphy_rdly_dq_inc")
        if delay_max < 0:
            delay_max = delay
        middle = (delay_min + delay_max) // 2 % delays
        checked = False
        if delay_min >= 0:
            for _ in range(_CENTRE_TRIES):
                self.action(module, "ddrphy_rdly_dq_rst")
                self.cdelay(_STEP_LOOPS)
                for _ in range(middle):
                    self.action(module, "ddrphy_rdly_dq_inc")
                    self.cdelay(_STEP_LOOPS)
                if self.run_pattern(module) == 0:
                    checked = True
                    break
        return delay_min, delay_max, middle, checked

    def read_leveling(self) -> tuple[list[int], list[int], list[tuple[int, int]]]:
        """``sdram_leveling``'s resets, then ``sdram_read_leveling``."""
        bitslips, delays = self.settings.bitslips, self.settings.delays
        for module in range(self.strobes):
            self.action(module, "ddrphy_rdly_dq_rst")
            self.action(module, "ddrphy_rdly_dq_bitslip_rst")
        chosen, centres, windows = [], [], []
        for module in range(self.strobes):
            best_score, best_bitslip = 0, 0
            self.action(module, "ddrphy_rdly_dq_bitslip_rst")
            for bitslip in range(bitslips):
                score = self.scan(module)
                if score > best_score:
                    best_score, best_bitslip = score, bitslip
                if bitslip == bitslips - 1:
                    break
                self.action(module, "ddrphy_rdly_dq_bitslip")
            self.action(module, "ddrphy_rdly_dq_bitslip_rst")
            for _ in range(best_bitslip):
                self.action(module, "ddrphy_rdly_dq_bitslip")
            low, high, middle, checked = self.centre(module)
            if low < 0:
                raise DramBringUpError(
                    f"DRAM read leveling failed: module {module} has no window of two or more "
                    f"working read delays (of {delays}) at its best bitslip {best_bitslip} "
                    f"(of {bitslips}); an untrained DRAM must not be used")
            if not checked:
                raise DramBringUpError(
                    f"DRAM read leveling failed: module {module} fails the test pattern at its "
                    f"centred read delay {middle} (window {low}-{high}, bitslip {best_bitslip}) "
                    f"in {_CENTRE_TRIES} tries; an untrained DRAM must not be used")
            chosen.append(best_bitslip)
            centres.append(middle)
            windows.append((low, high))
        return chosen, centres, windows


_LEVELING_CSRS = ("ddrphy_dly_sel", "ddrphy_rdly_dq_rst", "ddrphy_rdly_dq_inc",
                  "ddrphy_rdly_dq_bitslip_rst", "ddrphy_rdly_dq_bitslip")


def _leveling_csrs(phy_settings) -> tuple[str, ...]:
    extra = ("ddrphy_burstdet_clr", "ddrphy_burstdet_seen") if phy_settings.phytype in _BURSTDET_PHYS \
        else ()
    return _LEVELING_CSRS + extra


def bring_up(bus: CsrBus, dram: DramModule, csrs: Mapping[str, int],
             sleep: Callable[[float], object] = time.sleep) -> BringUpReport:
    """Initialise and read-level ``dram`` through its controller's CSRs, as LiteX's BIOS does.

    Parameters
    ----------
    bus : CsrBus
        The controller's CSR bus (32-bit words at word addresses).
    dram : hw.boards.litedram_gen.DramModule
        The table row the controller was generated for (``MODULES[...]``): its PHY
        settings, timings and clock.
    csrs : mapping of str to int
        CSR name -> first word address, as `hw.boards.litedram_gen.litedram_verilog(..., hardware=True)`
        returns it; without the ``ddrphy_*`` CSRs (the model's map) leveling is skipped.
    sleep : callable
        Called with the seconds of each of the BIOS's ``cdelay`` waits (module
        docstring: ``CDELAY_CYCLES * loops / dram.clock_hz``).

    Returns
    -------
    BringUpReport
        The bitslip, delay and window chosen per module, and the CSR words moved.

    Raises
    ------
    DramBringUpError
        A CSR the sequence needs missing from ``csrs``, a PHY that needs training
        this host sequence does not do (write leveling, write latency calibration,
        write DQ-DQS training), or a module without a working read window; the
        DRAM must not be used then.
    hw.boards.litedram_gen.DramError
        A table row that contradicts itself, or LiteDRAM missing.
    """
    phy_settings, timing_settings = dram_settings(dram)
    bits = _dfii_bits(phy_settings, timing_settings)
    entries = _init_sequence(phy_settings, timing_settings, bits)
    present = [name for name in csrs if name.startswith("ddrphy_")]
    level = bool(phy_settings.read_leveling and present)
    if present:
        for training in ("write_leveling", "write_latency_calibration", "write_dq_dqs_training"):
            if getattr(phy_settings, training, False):
                raise DramBringUpError(f"{phy_settings.phytype} needs {training.replace('_', ' ')}, "
                                       "which the host bring-up does not do")
    if level:
        missing = [name for name in _leveling_csrs(phy_settings) if name not in csrs]
        if missing:
            raise DramBringUpError(f"the CSR map has some of {phy_settings.phytype}'s CSRs but not "
                                   f"{', '.join(missing)}: read leveling needs them all")
        if phy_settings.bitslips < 1 or phy_settings.delays < 2:
            raise DramBringUpError(f"{phy_settings.phytype} reports {phy_settings.bitslips} bitslips "
                                   f"and {phy_settings.delays} delays: nothing to level")
    host = _Host(bus, dram, csrs, phy_settings, bits, sleep)
    host.control("CKE", "ODT", "RESET_N")
    host.init_sequence(entries)
    bitslips, delays, windows = host.read_leveling() if level else ([], [], [])
    host.control("SEL", "CKE", "ODT", "RESET_N")        # step 4 (module docstring)
    return BringUpReport(leveled=level, bitslips=tuple(bitslips), delays=tuple(delays),
                         windows=tuple(windows), csr_reads=host.reads, csr_writes=host.writes)
