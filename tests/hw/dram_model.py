"""A cycle-level DRAM model for Amaranth-simulator testbenches of the hw blocks.

It serves the memory-port contract of `hw.accelerator` (burst read requests
answered in order after ``latency`` cycles, burst writes with byte strobes) on
a numpy byte array, with optional random stalls on every handshake it controls,
and checks the protocol (bus alignment, beats >= 1, in-range addresses).
"""

from __future__ import annotations

import collections

import numpy as np


class DramModel:
    """Serve ``read`` / ``write`` ports of a DUT from ``self.data`` (uint8).

    Parameters
    ----------
    data : numpy.ndarray
        The memory image (modified by writes).
    bus_bits : int
    latency : int
        Cycles from an accepted read request to its first beat.
    stall : float
        Probability that the model holds a ready / valid low in a cycle.
    seed : int
    """

    def __init__(self, data: np.ndarray, bus_bits: int, latency: int = 4, stall: float = 0.0,
                 seed: int = 0):
        self.data = data
        self.bus_bytes = bus_bits // 8
        self.latency = latency
        self.stall = stall
        self.rng = np.random.default_rng(seed)
        self.read_requests: list[tuple[int, int]] = []
        self.write_requests: list[tuple[int, int]] = []
        self.read_beats = 0
        self.write_beats = 0

    def _go(self) -> int:
        return int(self.rng.random() >= self.stall)

    def _check(self, addr: int, beats: int, what: str) -> None:
        assert beats >= 1, f"{what} request of {beats} beats"
        assert addr % self.bus_bytes == 0, f"{what} address {addr:#x} not bus aligned"
        assert addr + beats * self.bus_bytes <= self.data.size, \
            f"{what} [{addr:#x}, +{beats} beats) outside the {self.data.size}-byte image"

    def beat(self, addr: int) -> int:
        return int.from_bytes(self.data[addr:addr + self.bus_bytes].tobytes(), "little")

    def process(self, read_req=None, read_data=None, write_req=None, write_data=None):
        """An async function for ``Simulator.add_testbench(..., background=True)``."""
        async def serve(ctx):
            await self.serve(ctx, read_req, read_data, write_req, write_data)
        return serve

    async def serve(self, ctx, read_req=None, read_data=None, write_req=None, write_data=None):
        """Testbench coroutine: run forever, serving whichever ports are given."""
        pending = collections.deque()    # (ready_at_cycle, addr, beats)
        writes = collections.deque()     # (addr, beats) awaiting data
        cycle = 0
        current = None                   # [addr, beats left] of the read being returned
        while True:
            signals = []
            if read_req is not None:
                ctx.set(read_req.ready, self._go())
                signals += [read_req.valid, read_req.ready, read_req.payload]
            offered = None
            if read_data is not None:
                if current is None and pending and pending[0][0] <= cycle:
                    _, addr, beats = pending.popleft()
                    current = [addr, beats]
                valid = int(current is not None and self._go())
                ctx.set(read_data.valid, valid)
                if valid:
                    offered = current[0]
                    ctx.set(read_data.payload, self.beat(current[0]))
                signals += [read_data.valid, read_data.ready]
            if write_req is not None:
                ctx.set(write_req.ready, self._go())
                ctx.set(write_data.ready, int(bool(writes)) & self._go())
                signals += [write_req.valid, write_req.ready, write_req.payload,
                            write_data.valid, write_data.ready, write_data.payload]
            sampled = (await ctx.tick().sample(*signals))[2:]
            cycle += 1
            index = 0
            if read_req is not None:
                valid, ready, payload = sampled[index:index + 3]
                index += 3
                if valid and ready:
                    addr, beats = int(payload.addr), int(payload.beats)
                    self._check(addr, beats, "read")
                    self.read_requests.append((addr, beats))
                    pending.append((cycle + self.latency, addr, beats))
            if read_data is not None:
                valid, ready = sampled[index:index + 2]
                index += 2
                if valid and ready:
                    assert offered is not None
                    self.read_beats += 1
                    current[0] += self.bus_bytes
                    current[1] -= 1
                    if current[1] == 0:
                        current = None
            if write_req is not None:
                req_valid, req_ready, req_payload, data_valid, data_ready, data_payload = \
                    sampled[index:index + 6]
                if data_valid and data_ready:
                    addr, beats = writes[0]
                    data = int(data_payload.data)
                    strobes = int(data_payload.strb)
                    for byte in range(self.bus_bytes):
                        if strobes >> byte & 1:
                            self.data[addr + byte] = (data >> (8 * byte)) & 0xFF
                    self.write_beats += 1
                    if beats == 1:
                        writes.popleft()
                    else:
                        writes[0] = (addr + self.bus_bytes, beats - 1)
                if req_valid and req_ready:
                    addr, beats = int(req_payload.addr), int(req_payload.beats)
                    self._check(addr, beats, "write")
                    self.write_requests.append((addr, beats))
                    writes.append((addr, beats))
