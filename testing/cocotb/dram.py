"""Reusable cocotb-side pieces: clock/reset, a DRAM model and stream drivers.

Timing convention (cocotb 2.1 + Verilator): a value read right after ``await
RisingEdge(clk)`` is the one sampled at that edge, and a value written then
takes effect for the next edge. So a stream transfer happened at an edge iff
``valid`` and ``ready`` read right after it are both 1, and every coroutine
here drives its outputs right after an edge, like a register would.

`DramModel` serves the accelerator's memory port (or a block's) from a numpy
byte image with one coroutine per stream. Idle streams cost nothing: a
coroutine with nothing to do sleeps on a value change of ``valid`` or on a
`Timer` until its next beat is due, so long compute phases run at the bare
clock speed. Random read latency, random gaps between read beats and random
``ready`` backpressure on requests and write beats are knobs (`Backpressure`).
"""

from __future__ import annotations

import collections
import dataclasses
import random

import numpy as np

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, First, RisingEdge, Timer

from vdla.hw.layouts import REQUEST_LAYOUT

PERIOD_NS = 10


def signal(dut, name: str):
    return getattr(dut, name)


def read(handle) -> int:
    return int(handle.value)


async def clock_and_reset(dut, cycles: int = 3):
    """Start the clock and hold ``rst`` for a few cycles."""
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    dut.rst.value = 1
    for _ in range(cycles):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def request_fields(word: int) -> tuple[int, int]:
    """``(addr, beats)`` of a burst request payload, placed as `hw.layouts.REQUEST_LAYOUT` says."""
    return tuple((word >> field.offset) & ((1 << field.width) - 1)
                 for field in (REQUEST_LAYOUT["addr"], REQUEST_LAYOUT["beats"]))


def cycle_now() -> int:
    """Index of the last rising edge (edges at 0, 10, 20 ... ns)."""
    return int(get_sim_time("ns")) // PERIOD_NS


@dataclasses.dataclass
class Backpressure:
    """Random timing of a memory port.

    Parameters
    ----------
    extra_latency : int
        Up to this many cycles added (uniformly) to each read burst's latency.
    read_gap : float
        Chance per beat that the memory idles one or more cycles before it.
    request_ready : float
        Chance per cycle that a request is accepted (ready high).
    write_ready : float
        Chance per cycle that a write beat is accepted.
    """

    extra_latency: int = 0
    read_gap: float = 0.0
    request_ready: float = 1.0
    write_ready: float = 1.0

    @classmethod
    def none(cls) -> "Backpressure":
        return cls()

    @classmethod
    def heavy(cls) -> "Backpressure":
        return cls(extra_latency=12, read_gap=0.3, request_ready=0.4, write_ready=0.5)


class DramModel:
    """A DRAM behind burst read/write streams, backed by a numpy byte image.

    Parameters
    ----------
    dut : cocotb handle
    image : numpy.ndarray
        uint8 byte image; writes go straight into it.
    bus_bytes : int
    latency : int
        Cycles from a read request's acceptance to its first beat.
    rd_req, rd_data, wr_req, wr_data : str or None
        Verilog names of the streams, without ``__valid`` etc. (None: no such
        stream on this DUT). A DUT with ``<wr_req minus _req>_resp`` (the
        accelerator on a memory system with write responses,
        `hw.config.MemorySystem`) gets one response per write burst, the cycle
        after its last beat (its bytes are written as they arrive).
    timing : Backpressure
    seed : int
    """

    def __init__(self, dut, image: np.ndarray, bus_bytes: int, latency: int,
                 rd_req: str | None = "mem_rd_req", rd_data: str | None = "mem_rd_data",
                 wr_req: str | None = "mem_wr_req", wr_data: str | None = "mem_wr_data",
                 timing: Backpressure | None = None, seed: int = 1):
        self.dut = dut
        self.clk = dut.clk
        self.image = image
        self.bus_bytes = bus_bytes
        self.latency = max(1, latency)
        self.timing = timing or Backpressure.none()
        self.rng = random.Random(seed)
        self.names = (rd_req, rd_data, wr_req, wr_data)
        self.pending = collections.deque()    # [due edge, addr, beats left]
        self.new_request = Event()
        self.errors: list[str] = []
        self.read_bursts = self.read_beats = self.write_bursts = self.write_beats = 0
        self.responses_owed = 0
        self.burst_written = Event()
        self.tasks = []

    # ------------------------------------------------------------------ control
    def start(self):
        rd_req, rd_data, wr_req, wr_data = self.names
        if rd_req:
            self._port(rd_req, "ready").value = 0
            self.tasks.append(cocotb.start_soon(self._read_requests()))
        if rd_data:
            self._port(rd_data, "valid").value = 0
            self.tasks.append(cocotb.start_soon(self._read_data()))
        if wr_req:
            self._port(wr_req, "ready").value = 0
            self._port(wr_data, "ready").value = 0
            self.tasks.append(cocotb.start_soon(self._writes()))
            responses = wr_req.removesuffix("_req") + "_resp"
            if hasattr(self.dut, f"{responses}__valid"):
                self._port(responses, "valid").value = 0
                self._port(responses, "payload").value = 0   # BRESP OKAY
                self.tasks.append(cocotb.start_soon(self._write_responses(responses)))
        return self

    def stop(self):
        for task in self.tasks:
            task.cancel()
        self.tasks = []

    def _port(self, stream: str, member: str):
        return getattr(self.dut, f"{stream}__{member}")

    def _chance(self, probability: float) -> bool:
        return probability >= 1.0 or self.rng.random() < probability

    # ------------------------------------------------------------------ reads
    async def _read_requests(self):
        stream = self.names[0]
        valid, ready, payload = (self._port(stream, m) for m in ("valid", "ready", "payload"))
        timing = self.timing
        ready_now = int(self._chance(timing.request_ready))
        ready.value = ready_now
        while True:
            await RisingEdge(self.clk)
            if ready_now and read(valid):
                word = read(payload)
                addr, beats = request_fields(word)
                self._check_request("read", addr, beats)
                due = cycle_now() + self.latency + (self.rng.randint(0, timing.extra_latency)
                                                      if timing.extra_latency else 0)
                self.pending.append([due, addr, beats])
                self.read_bursts += 1
                self.new_request.set()
            if timing.request_ready < 1.0:
                ready_now = int(self._chance(timing.request_ready))
                ready.value = ready_now
            if timing.request_ready >= 1.0 and not read(valid):
                # nothing offered: sleep until the DUT raises valid
                await RisingEdge(valid)

    async def _read_data(self):
        stream = self.names[1]
        valid, ready, payload = (self._port(stream, m) for m in ("valid", "ready", "payload"))
        timing = self.timing
        driving = False
        valid.value = 0
        while True:
            await RisingEdge(self.clk)
            was_driving = driving
            if driving and read(ready):
                burst = self.pending[0]
                burst[1] += self.bus_bytes
                burst[2] -= 1
                self.read_beats += 1
                if burst[2] == 0:
                    self.pending.popleft()
            now = cycle_now()
            driving = False
            if self.pending:
                due, addr, _ = self.pending[0]
                if due <= now + 1:
                    if timing.read_gap and self.rng.random() < timing.read_gap:
                        pass   # a gap: valid low this cycle
                    else:
                        payload.value = int.from_bytes(
                            self.image[addr:addr + self.bus_bytes].tobytes(), "little")
                        driving = True
                if driving != was_driving:
                    valid.value = int(driving)
                if not driving and due > now + 3:
                    await Timer((due - now - 2) * PERIOD_NS - PERIOD_NS // 2, unit="ns")
            else:
                if was_driving:
                    valid.value = 0
                self.new_request.clear()
                await self.new_request.wait()

    # ------------------------------------------------------------------ writes
    async def _writes(self):
        req_stream, data_stream = self.names[2], self.names[3]
        req_valid, req_ready, req_payload = (self._port(req_stream, m)
                                             for m in ("valid", "ready", "payload"))
        data_valid, data_ready, data_payload = (self._port(data_stream, m)
                                                for m in ("valid", "ready", "payload"))
        timing = self.timing
        bus_bits = self.bus_bytes * 8
        strobe_mask = (1 << self.bus_bytes) - 1
        while True:
            # wait for a request
            if not read(req_valid):
                await RisingEdge(req_valid)
            req_ready.value = int(self._chance(timing.write_ready))
            while True:
                await RisingEdge(self.clk)
                if read(req_valid) and read(req_ready):
                    break
                req_ready.value = int(self._chance(timing.write_ready))
            req_ready.value = 0
            word = read(req_payload)
            addr, beats = request_fields(word)
            self._check_request("write", addr, beats)
            self.write_bursts += 1
            ready_now = int(self._chance(timing.write_ready))
            data_ready.value = ready_now
            full = bytearray()      # consecutive full-strobe beats, written at once
            start = addr
            while beats:
                await RisingEdge(self.clk)
                if ready_now and read(data_valid):
                    word = read(data_payload)
                    data, strobes = word & ((1 << bus_bits) - 1), word >> bus_bits
                    if strobes == strobe_mask:
                        full += data.to_bytes(self.bus_bytes, "little")
                    else:
                        self._flush(start, full)
                        full = bytearray()
                        self._write_beat(addr, data, strobes & strobe_mask)
                        start = addr + self.bus_bytes
                    addr += self.bus_bytes
                    beats -= 1
                    self.write_beats += 1
                if beats:
                    if timing.write_ready < 1.0:
                        ready_now = int(self._chance(timing.write_ready))
                        data_ready.value = ready_now
                    elif not read(data_valid):
                        await RisingEdge(data_valid)
            self._flush(start, full)
            data_ready.value = 0
            self.responses_owed += 1
            self.burst_written.set()

    async def _write_responses(self, stream: str):
        valid, ready = self._port(stream, "valid"), self._port(stream, "ready")
        while True:
            if not self.responses_owed:
                self.burst_written.clear()
                await self.burst_written.wait()
            valid.value = 1
            await RisingEdge(self.clk)
            if read(ready):
                self.responses_owed -= 1
            if not self.responses_owed:
                valid.value = 0

    def _flush(self, start: int, data: bytearray):
        if data:
            self.image[start:start + len(data)] = np.frombuffer(bytes(data), dtype=np.uint8)

    def _write_beat(self, addr: int, data: int, strobes: int):
        raw = data.to_bytes(self.bus_bytes, "little")
        if strobes == (1 << self.bus_bytes) - 1:
            self.image[addr:addr + self.bus_bytes] = np.frombuffer(raw, dtype=np.uint8)
            return
        for i in range(self.bus_bytes):
            if strobes >> i & 1:
                self.image[addr + i] = raw[i]

    def _check_request(self, kind: str, addr: int, beats: int):
        problem = None
        if addr % self.bus_bytes:
            problem = "is not aligned to the bus"
        elif beats == 0:
            problem = "has zero beats"
        elif addr + beats * self.bus_bytes > len(self.image):
            problem = f"runs past the {len(self.image)}-byte DRAM image"
        if problem:
            message = f"{kind} request addr={addr:#x} beats={beats} {problem}"
            self.errors.append(message)
            raise AssertionError(message)


# ---------------------------------------------------------------------- streams
class _StreamEnd:
    """The handles of a stream ``<name>__valid/ready/payload`` and a seeded RNG."""

    def __init__(self, dut, name: str, seed: int, payload: bool):
        self.clk = dut.clk
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload") if payload else None
        self.rng = random.Random(seed)


class StreamSource(_StreamEnd):
    """Drive a stream (``<name>__valid/ready/payload``) from a list, with idle cycles."""

    def __init__(self, dut, name: str, idle: float = 0.0, seed: int = 1, payload: bool = True):
        super().__init__(dut, name, seed, payload)
        self.idle = idle
        self.valid.value = 0
        self.sent = 0

    async def send(self, items):
        """Offer every item in order; returns after the last one is taken.

        Transfers complete at a rising edge; the edge of each is recorded in
        `edges`.
        """
        self.edges = []
        for item in items:
            while self.idle and self.rng.random() < self.idle:
                self.valid.value = 0
                await RisingEdge(self.clk)
            if self.payload is not None:
                self.payload.value = int(item)
            self.valid.value = 1
            while True:
                await RisingEdge(self.clk)
                if read(self.ready):
                    break
            self.sent += 1
            self.edges.append(cycle_now())
        self.valid.value = 0


class StreamSink(_StreamEnd):
    """Take a stream's transfers into `items` with random ``ready`` backpressure."""

    def __init__(self, dut, name: str, ready: float = 1.0, seed: int = 1, payload: bool = True):
        super().__init__(dut, name, seed, payload)
        self.probability = ready
        self.items: list[int] = []
        self.edges: list[int] = []
        self.ready.value = 0
        self.task = None

    def start(self):
        self.task = cocotb.start_soon(self._run())
        return self

    def stop(self):
        if self.task:
            self.task.cancel()
        self.ready.value = 0

    async def _run(self):
        self.ready.value = int(self.rng.random() < self.probability)
        while True:
            await RisingEdge(self.clk)
            if read(self.valid) and read(self.ready):
                self.items.append(read(self.payload) if self.payload is not None else 1)
                self.edges.append(cycle_now())
            self.ready.value = int(self.rng.random() < self.probability)


async def wait_level(dut, handle, limit_cycles: int) -> bool:
    """Wait until ``handle`` reads 1 after a rising edge; False on timeout."""
    if read(handle):
        return True
    await First(RisingEdge(handle), Timer(limit_cycles * PERIOD_NS, unit="ns"))
    await RisingEdge(dut.clk)
    return bool(read(handle))
