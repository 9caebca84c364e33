"""The host's DRAM bring-up (`sim.dram_bringup.bring_up`) against an independent fake controller.

`FakeController` is a CSR bus written from LiteDRAM's hardware, not from the
code under test: the DFI injector's CSRs (``litedram/dfii.py``: the control
register's fields sel/cke/odt/reset_n, each phase's command fields
cs/we/cas/ras/wren/rden, command_issue, address, baddress, wrdata, rddata; a
CSR wider than 32 bits in several words, most significant first) in front of
a tiny DRAM (a dict of bursts keyed by bank, row and column, with open rows
per bank), and the ECP5 PHY's read path per byte lane (``ecp5ddrphy.py``: the
DFI data of phase ``n // 4`` carries beat ``n % 4`` at bits
``16 * (n % 4)``, lane ``m`` at 8 more per lane; ``dly_sel`` selects the lanes
that ``rdly_dq_rst/inc`` and ``rdly_dq_bitslip_rst/bitslip`` act on). Each lane
has a hidden bitslip and windows of working delay taps: outside them
the lane's bytes come back inverted and no burst is detected, at a wrong
bitslip they come back from other beats; at the taps next to the window the
data is right but no burst is detected. LiteX's centring picks the widest
window (the first of equal ones). The test pattern's CSR words are
checked against LiteX's ``csr_wr_buf_uint8`` and ``lfsr`` re-implemented here.
"""

from __future__ import annotations

import math
import random

import pytest
from litedram import modules
from litedram.init import get_sdram_phy_init_sequence
from litedram.phy.model import get_sdram_phy_settings

from vdla.hw.boards.litedram_gen import MODULES, _module, litedram_verilog
from vdla.sim.dram_bringup import DramBringUpError, bring_up, init_sleeps

DDR3, SDRAM = MODULES["litedram-ddr3"], MODULES["litedram-sdram"]
# litedram/dfii.py's CSRField order: bit 0 first.
CONTROL = {"SEL": 1, "CKE": 2, "ODT": 4, "RESET_N": 8}
COMMAND = {"CS": 1, "WE": 2, "CAS": 4, "RAS": 8, "WRDATA": 0x10, "RDDATA": 0x20}
ACTIVATE, PRECHARGE = COMMAND["RAS"] | COMMAND["CS"], COMMAND["RAS"] | COMMAND["WE"] | COMMAND["CS"]
WRITE = COMMAND["CAS"] | COMMAND["WE"] | COMMAND["CS"] | COMMAND["WRDATA"]
READ = COMMAND["CAS"] | COMMAND["CS"] | COMMAND["RDDATA"]
MODE_REGISTER = COMMAND["RAS"] | COMMAND["CAS"] | COMMAND["WE"] | COMMAND["CS"]
REFRESH = COMMAND["RAS"] | COMMAND["CAS"] | COMMAND["CS"]
ZQ_CALIBRATION = COMMAND["WE"] | COMMAND["CS"]
HARDWARE = CONTROL["SEL"] | CONTROL["CKE"] | CONTROL["ODT"] | CONTROL["RESET_N"]


def _phy_settings(dram):
    _, phy, _ = _module(dram)
    if phy is not None:
        return phy.settings
    return get_sdram_phy_settings(memtype=dram.memtype, data_width=dram.data_bits, clk_freq=dram.clock_hz)


def _geometry(dram):
    return getattr(modules, dram.module)(dram.clock_hz, dram.rate).geom_settings


def _phy_csrs():
    return litedram_verilog(DDR3, 64, hardware=True).csrs


def _model_csrs(dram):
    """The DFI injector's CSRs as LiteX lays out the controller's bank (the model's map):
    control, then per phase command, command_issue, address, baddress, wrdata, rddata."""
    settings = _phy_settings(dram)
    words = math.ceil(settings.dfi_databits / 32)
    csrs, address = {"sdram_dfii_control": 512}, 513
    for phase in range(settings.nphases):
        for name, size in (("command", 1), ("command_issue", 1), ("address", 1), ("baddress", 1),
                           ("wrdata", words), ("rddata", words)):
            csrs[f"sdram_dfii_pi{phase}_{name}"] = address
            address += size
    return csrs


class FakeController:
    """LiteDRAM's DFI injector, a tiny DRAM and an ECP5-like read path, behind a CSR bus.

    ``lanes``: per byte lane (hidden bitslip, its windows of working delays: a tuple of
    (lo, hi), empty for none).
    """

    def __init__(self, dram, csrs, lanes=()):
        settings = _phy_settings(dram)
        geometry = _geometry(dram)
        self.settings, self.lanes = settings, list(lanes)
        self.nphases, self.databits = settings.nphases, settings.databits
        self.beats = settings.dfi_databits // settings.databits      # beats per phase
        widths = {"control": 4, "command": 8, "command_issue": 1, "address": geometry.addressbits,
                  "baddress": geometry.bankbits, "wrdata": settings.dfi_databits,
                  "rddata": settings.dfi_databits, "dly_sel": settings.strobes,
                  "burstdet_seen": settings.strobes}
        self.width, self.words = {}, {}
        for name, first in csrs.items():
            field = name.removeprefix("sdram_dfii_").removeprefix("ddrphy_")
            field = field.split("_", 1)[1] if field.startswith("pi") else field
            self.width[name] = widths.get(field, 1)
            for index in range(math.ceil(self.width[name] / 32)):
                self.words[first + index] = (name, index)
        self.storage = {name: 0 for name in csrs}
        self.storage["sdram_dfii_control"] = CONTROL["SEL"]        # reset: hardware control
        self.reads = self.writes = 0
        self.log = []               # ("control", value) / ("command", phase, cmd, address, bank)
        self.bursts, self.open_rows = {}, {}
        self.delay = [0] * settings.strobes
        self.bitslip = [0] * settings.strobes
        self.burstdet_seen = 0

    # ---------------------------------------------------------------- the bus
    def read(self, address):
        self.reads += 1
        name, index = self.words[address]
        assert name.endswith(("_rddata", "burstdet_seen")), f"unexpected read of {name}"
        value = self.burstdet_seen if name.endswith("burstdet_seen") else self.storage[name]
        return self._word(name, value, index)

    def write(self, address, value):
        self.writes += 1
        name, index = self.words[address]
        assert 0 <= value < 1 << 32, (name, value)
        if name.endswith("_rddata") or name.endswith("burstdet_seen"):
            raise AssertionError(f"write to the read-only {name}")
        count = math.ceil(self.width[name] / 32)
        shift = 32 * (count - 1 - index)
        stored = self.storage[name] & ~(0xFFFFFFFF << shift) | value << shift
        assert stored < 1 << self.width[name], f"{name} = {stored:#x} is wider than {self.width[name]} bits"
        self.storage[name] = stored
        if name == "sdram_dfii_control":
            self.log.append(("control", stored))
        elif name.endswith("_command_issue"):
            self._issue(int(name[len("sdram_dfii_pi")]))
        elif name.startswith("ddrphy_"):
            self._phy(name.removeprefix("ddrphy_"))

    def _word(self, name, value, index):
        count = math.ceil(self.width[name] / 32)
        return value >> 32 * (count - 1 - index) & 0xFFFFFFFF

    # ---------------------------------------------------------------- the DRAM
    def _issue(self, phase):
        control = self.storage["sdram_dfii_control"]
        assert not control & CONTROL["SEL"], "a command issued in hardware control"
        assert control & CONTROL["CKE"] and control & CONTROL["RESET_N"], "the DRAM is held in reset"
        command = self.storage[f"sdram_dfii_pi{phase}_command"]
        address = self.storage[f"sdram_dfii_pi{phase}_address"]
        bank = self.storage[f"sdram_dfii_pi{phase}_baddress"]
        self.log.append(("command", phase, command, address, bank))
        if command == ACTIVATE:
            assert bank not in self.open_rows, f"activate of the open bank {bank}"
            self.open_rows[bank] = address
        elif command == PRECHARGE:
            if address & 1 << 10:
                self.open_rows.clear()
            else:
                self.open_rows.pop(bank, None)
        elif command in (WRITE, READ):
            assert phase == (self.settings.wrphase if command == WRITE else self.settings.rdphase)
            assert bank in self.open_rows, f"column access to the closed bank {bank}"
            key = (bank, self.open_rows[bank], address)
            if command == WRITE:
                self.bursts[key] = [self.storage[f"sdram_dfii_pi{p}_wrdata"] for p in range(self.nphases)]
            else:
                self._read(self.bursts.get(key, [0] * self.nphases))
        elif command == REFRESH:
            assert not self.open_rows, "refresh with a row open"
        else:
            assert command in (MODE_REGISTER, ZQ_CALIBRATION), f"unknown command {command:#x}"
            assert not self.open_rows, "mode register / ZQ with a row open"

    def _byte(self, data, beat, lane):
        phase, within = divmod(beat, self.beats)
        return data[phase] >> (within * self.databits + 8 * lane) & 0xFF

    def _read(self, data):
        """The ECP5 read path: each lane's bytes through its bitslip and delay."""
        out = list(data)
        total = self.nphases * self.beats
        for lane, (hidden, windows) in enumerate(self.lanes):
            delay = self.delay[lane]
            in_window = any(low <= delay <= high for low, high in windows)
            # A tap just outside a window captures the data but not the burst: only
            # burstdet tells it from a working one.
            marginal = any(delay in (low - 1, high + 1) for low, high in windows)
            if in_window:
                self.burstdet_seen |= 1 << lane
            slip = (self.bitslip[lane] - hidden) % max(self.settings.bitslips, 1)
            for beat in range(total):
                if not in_window and not marginal:
                    byte = ~self._byte(data, beat, lane) & 0xFF
                else:
                    byte = self._byte(data, (beat + slip) % total, lane)
                phase, within = divmod(beat, self.beats)
                shift = within * self.databits + 8 * lane
                out[phase] = out[phase] & ~(0xFF << shift) | byte << shift
        for phase in range(self.nphases):
            self.storage[f"sdram_dfii_pi{phase}_rddata"] = out[phase]

    # ---------------------------------------------------------------- the PHY
    def _phy(self, field):
        selected = [lane for lane in range(self.settings.strobes)
                    if self.storage["ddrphy_dly_sel"] >> lane & 1]
        for lane in selected:
            if field == "rdly_dq_rst":
                self.delay[lane] = 0
            elif field == "rdly_dq_inc":
                self.delay[lane] = (self.delay[lane] + 1) % self.settings.delays
            elif field == "rdly_dq_bitslip_rst":
                self.bitslip[lane] = 0
            elif field == "rdly_dq_bitslip":
                self.bitslip[lane] = (self.bitslip[lane] + 1) % self.settings.bitslips
        if field == "burstdet_clr":
            self.burstdet_seen = 0


def _lfsr32(value):
    """libbase/lfsr.h's lfsr(32, prev)."""
    return (value >> 1) ^ (0x80200003 if value & 1 else 0)


def _csr_wr_buf_uint8(buf):
    """The words LiteX's _csr_wr_buf writes for a byte buffer (CSR_DW_BYTES = 4)."""
    nsubregs = math.ceil(len(buf) / 4)
    offset = nsubregs * 4 - len(buf)
    words = []
    for i in range(nsubregs):
        v = 0
        for j in range(4):
            if i * 4 + j - offset >= 0:
                v = v << 8 | buf[i * 4 + j - offset]
        words.append(v)
    return words


def _expected_init(dram):
    """Control writes and phase-0 commands of get_sdram_phy_init_sequence, in order."""
    settings = _phy_settings(dram)
    timing = getattr(modules, dram.module)(dram.clock_hz, dram.rate).timing_settings
    events = [("control", CONTROL["CKE"] | CONTROL["ODT"] | CONTROL["RESET_N"])]
    for _, address, bank, command, _ in get_sdram_phy_init_sequence(settings, timing)[0]:
        names = [name.split("_", 2)[2] for name in command.split("|")]
        if command.startswith("DFII_CONTROL_"):
            events.append(("control", sum(CONTROL[name] for name in names)))
        else:
            events.append(("command", 0, sum(COMMAND[name] for name in names), address, bank))
    return events


def _random_lanes(rng, settings):
    lanes = []
    for _ in range(settings.strobes):
        low = rng.randrange(settings.delays - 1)
        lanes.append((rng.randrange(settings.bitslips), ((low, rng.randrange(low + 1, settings.delays)),)))
    return lanes


@pytest.mark.slow
def test_ddr3_read_leveling_finds_each_lanes_hidden_bitslip_and_centres_its_window():
    settings = _phy_settings(DDR3)
    assert (settings.strobes, settings.bitslips, settings.delays) == (2, 4, 8)
    rng = random.Random(25)
    last = settings.delays - 1
    cases = [[(0, ((0, last),)), (3, ((0, 1),))], [(2, ((last - 1, last),)), (1, ((2, 6),))],
             # Two windows: the wider wins; of two alike, the first.
             [(1, ((0, 1), (4, last))), (3, ((0, 2), (5, last)))]]
    cases += [_random_lanes(rng, settings) for _ in range(6)]
    csrs = _phy_csrs()
    for lanes in cases:
        fake = FakeController(DDR3, csrs, lanes)
        report = bring_up(fake, DDR3, csrs, sleep=lambda seconds: None)
        assert report.leveled
        assert report.bitslips == tuple(hidden for hidden, _ in lanes), lanes
        widest = tuple(max(windows, key=lambda window: window[1] - window[0]) for _, windows in lanes)
        assert report.windows == widest, lanes
        # LiteX centres at (min + max) // 2.
        assert report.delays == tuple((low + high) // 2 for low, high in widest), lanes
        # What the PHY was left at, and the controller back in charge.
        assert fake.bitslip == list(report.bitslips) and fake.delay == list(report.delays)
        assert fake.log[-1] == ("control", HARDWARE) and not fake.open_rows
        assert (report.csr_reads, report.csr_writes) == (fake.reads, fake.writes)
    # The reads: LiteX runs the test pattern (all seeds) at every tap of every
    # bitslip; centring runs it at taps 0..lo+1, again at lo+1..delays-1, and once
    # at the centre. Each run reads every phase's rddata and burstdet_seen per seed.
    runs = settings.bitslips * settings.delays + settings.delays + 2
    words = math.ceil(settings.dfi_databits / 32)
    assert report.csr_reads == settings.strobes * runs * 3 * (settings.nphases * words + 1) == 1260


def test_the_first_test_pattern_is_litex_lfsr_in_csr_wr_buf_word_order():
    csrs = _phy_csrs()
    settings = _phy_settings(DDR3)
    fake = FakeController(DDR3, csrs, [(0, ((0, 7),))] * settings.strobes)
    written = []
    write = fake.write
    fake.write = lambda address, value: (written.append((address, value)), write(address, value))
    bring_up(fake, DDR3, csrs, sleep=lambda seconds: None)
    # Seed 42, as sdram.c's _seed_array starts: 8 bytes per phase, LSB first from the LFSR.
    state, expected = 42, []
    for phase in range(settings.nphases):
        buf = []
        for _ in range(settings.dfi_databits // 8):
            value = 0
            for bit in range(8):
                state = _lfsr32(state)
                value |= (state & 1) << bit
            buf.append(value)
        expected += [(csrs[f"sdram_dfii_pi{phase}_wrdata"] + i, word)
                     for i, word in enumerate(_csr_wr_buf_uint8(buf))]
    words = math.ceil(settings.dfi_databits / 32)
    wrdata = {csrs[f"sdram_dfii_pi{p}_wrdata"] + i for p in range(settings.nphases) for i in range(words)}
    assert [access for access in written if access[0] in wrdata][:len(expected)] == expected


@pytest.mark.parametrize("lanes, module, bitslip", [
    ([(1, ((2, 5),)), (2, ())], 1, 0),
    ([(3, ()), (0, ((1, 6),))], 0, 0),
    # One working tap is no window for LiteX (it needs two in a row).
    ([(2, ((4, 4),)), (0, ((0, 7),))], 0, 2),
    ([(2, ((1, 1), (4, 4))), (0, ((0, 7),))], 0, 2),
])
def test_a_lane_without_a_working_window_is_refused(lanes, module, bitslip):
    # Outside its window a lane reads back inverted at every bitslip, so every
    # bitslip scores alike and LiteX keeps the first (a higher score replaces it).
    csrs = _phy_csrs()
    fake = FakeController(DDR3, csrs, lanes)
    with pytest.raises(DramBringUpError) as error:
        bring_up(fake, DDR3, csrs, sleep=lambda seconds: None)
    assert str(error.value) == (
        f"DRAM read leveling failed: module {module} has no window of two or more working read "
        f"delays (of 8) at its best bitslip {bitslip} (of 4); an untrained DRAM must not be used")
    assert fake.storage["sdram_dfii_control"] & CONTROL["SEL"] == 0


class DriftingController(FakeController):
    """Lane 0's window is gone after ``reads`` burst reads (the DRAM warmed up)."""

    def __init__(self, dram, csrs, lanes, reads):
        super().__init__(dram, csrs, lanes)
        self.left = reads

    def _read(self, data):
        self.left -= 1
        if self.left < 0:
            self.lanes[0] = (self.lanes[0][0], ())
        super()._read(data)


def test_a_centre_that_fails_its_check_is_refused():
    settings = _phy_settings(DDR3)
    csrs = _phy_csrs()
    # Lane 0 drifts away once LiteX's scan (every tap of every bitslip) and its
    # centring scan (taps 0..3 to find the window start 2, then 3..7) are done:
    # the check at the centre fails all 8 tries.
    scans = settings.bitslips * settings.delays + (2 + 2) + (settings.delays - 3)
    fake = DriftingController(DDR3, csrs, [(1, ((2, 5),)), (0, ((0, 7),))], reads=3 * scans)
    with pytest.raises(DramBringUpError) as error:
        bring_up(fake, DDR3, csrs, sleep=lambda seconds: None)
    assert str(error.value) == (
        "DRAM read leveling failed: module 0 fails the test pattern at its centred read delay 3 "
        "(window 2-5, bitslip 1) in 8 tries; an untrained DRAM must not be used")
    assert fake.delay[0] == 3


@pytest.mark.parametrize("dram", [DDR3, SDRAM], ids=["ddr3", "sdram"])
def test_model_map_runs_the_init_sequence_and_skips_leveling(dram):
    csrs = _model_csrs(dram)
    # The layout above is the generated model's map, and (DDR3) the real one
    # without the PHY's CSRs.
    assert csrs == litedram_verilog(dram, 64).csrs
    if dram is DDR3:
        assert csrs == {name: address for name, address in _phy_csrs().items()
                        if name.startswith("sdram_")}
    fake = FakeController(dram, csrs)
    report = bring_up(fake, dram, csrs, sleep=lambda seconds: None)
    expected = _expected_init(dram) + [("control", HARDWARE)]
    assert fake.log == expected
    assert not report.leveled and report.bitslips == report.delays == report.windows == ()
    # One control write at each end; an init entry is address + bank + (control, or
    # command + issue).
    writes = 2 + sum(3 if event[0] == "control" else 4 for event in expected[1:-1])
    assert (report.csr_reads, report.csr_writes) == (0, writes) == (fake.reads, fake.writes)


def test_ddr3_init_sequence_comes_before_leveling_in_litex_order():
    csrs = _phy_csrs()
    fake = FakeController(DDR3, csrs, [(1, ((2, 5),)), (3, ((0, 3),))])
    bring_up(fake, DDR3, csrs, sleep=lambda seconds: None)
    init = _expected_init(DDR3)
    assert fake.log[:len(init)] == init
    # The mode registers of DDR3: MR2, MR3, MR1, MR0, then ZQ calibration (A10 set).
    assert [(event[2], event[4]) for event in init[3:]] == [(MODE_REGISTER, 2), (MODE_REGISTER, 3),
                                                          (MODE_REGISTER, 1), (MODE_REGISTER, 0),
                                                          (ZQ_CALIBRATION, 0)]
    assert init[-1][3] == 1 << 10
    # Leveling uses only activate, write, read, precharge; then hardware control.
    assert {event[2] for event in fake.log[len(init):-1]} == {ACTIVATE, WRITE, READ, PRECHARGE}
    assert fake.log[-1] == ("control", HARDWARE)


@pytest.mark.parametrize("dram", [DDR3, SDRAM], ids=["ddr3", "sdram"])
def test_sleeps_are_three_controller_cycles_per_cdelay_loop(dram):
    timing = getattr(modules, dram.module)(dram.clock_hz, dram.rate).timing_settings
    loops = [entry[4] for entry in get_sdram_phy_init_sequence(_phy_settings(dram), timing)[0]
             if entry[4]]
    expected = [3 * count / dram.clock_hz for count in loops]
    assert init_sleeps(dram) == expected
    slept = []
    csrs = _model_csrs(dram)
    bring_up(FakeController(dram, csrs), dram, csrs, sleep=slept.append)
    assert slept == expected


def test_ddr3_sleeps_meet_jedec_init_minimums_and_leveling_waits():
    csrs = _phy_csrs()
    slept = []
    bring_up(FakeController(DDR3, csrs, [(0, ((1, 6),)), (2, ((3, 7),))]), DDR3, csrs, sleep=slept.append)
    release_reset, cke, mode_register_0, zq = slept[:4]
    t_ck = 1 / (2 * DDR3.clock_hz)              # the DRAM clock: twice the controller's at 1:2
    assert release_reset >= 500e-6              # RESET# high to CKE high
    assert cke >= 260e-9 + 10e-9                # tXPR: tRFC (4 Gb) + 10 ns
    assert mode_register_0 >= max(12 * t_ck, 15e-9)    # tMOD
    assert zq >= max(512 * t_ck, 640e-9)        # tZQinit
    # Leveling: cdelay(15) around each command, cdelay(100) per step to the centre.
    assert set(slept[4:]) == {3 * 15 / DDR3.clock_hz, 3 * 100 / DDR3.clock_hz}


def test_a_csr_missing_from_the_map_is_refused():
    csrs = {name: address for name, address in _phy_csrs().items() if name != "sdram_dfii_pi1_rddata"}
    with pytest.raises(DramBringUpError) as error:
        bring_up(FakeController(DDR3, csrs), DDR3, csrs, sleep=lambda seconds: None)
    assert str(error.value) == ("the CSR map has no sdram_dfii_pi1_rddata: not a LiteDRAM "
                                "controller's (hw.boards.litedram_gen.litedram_verilog's) map")


def test_a_partial_phy_map_is_refused_before_any_access():
    csrs = {name: address for name, address in _phy_csrs().items() if name != "ddrphy_burstdet_seen"}
    fake = FakeController(DDR3, csrs)
    with pytest.raises(DramBringUpError) as error:
        bring_up(fake, DDR3, csrs, sleep=lambda seconds: None)
    assert str(error.value) == ("the CSR map has some of ECP5DDRPHY's CSRs but not "
                                "ddrphy_burstdet_seen: read leveling needs them all")
    assert fake.reads == fake.writes == 0


def test_a_bus_word_out_of_range_is_refused():
    csrs = _phy_csrs()
    fake = FakeController(DDR3, csrs, [(0, ((0, 7),))] * 2)
    fake.read = lambda address: 1 << 32
    with pytest.raises(DramBringUpError) as error:
        bring_up(fake, DDR3, csrs, sleep=lambda seconds: None)
    assert str(error.value) == ("CSR bus read of sdram_dfii_pi0_rddata (word 519) returned "
                                "4294967296, not a 32-bit word")
