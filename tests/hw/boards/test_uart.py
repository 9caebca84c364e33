"""`hw.boards.uart`: the transmitter's frames against the 8N1 definition, and the
receiver fed by the transmitter, at odd and even clocks-per-bit, under the
Amaranth simulator."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import Module

from vdla.hw.boards.uart import UartReceiver, UartTransmitter
from tests.hw.amaranth_sim import run


@pytest.mark.parametrize("clocks_per_bit", [4, 5, 12])
def test_transmitter_frames_and_receiver_decodes_them(clocks_per_bit):
    payload = [int(b) for b in np.random.default_rng(clocks_per_bit).integers(0, 256, 12)]
    payload += [0x00, 0xFF, 0x55]
    m = Module()
    m.submodules.tx = tx = UartTransmitter(clocks_per_bit)
    m.submodules.rx = rx = UartReceiver(clocks_per_bit)
    m.d.comb += rx.rx.eq(tx.tx)
    line, received = [], []

    async def send(ctx):
        for byte in payload:
            ctx.set(tx.data.payload, byte)
            ctx.set(tx.data.valid, 1)
            await ctx.tick().until(tx.data.ready)
            ctx.set(tx.data.valid, 0)
        await ctx.tick().repeat(12 * clocks_per_bit)

    async def watch(ctx):
        ctx.set(rx.data.ready, 1)
        async for _, _, level, valid, data in ctx.tick().sample(tx.tx, rx.data.valid,
                                                                rx.data.payload):
            line.append(level)
            if valid:
                received.append(data)

    run(m, send, processes=[watch])
    assert received == payload
    # The line itself: idle high, then per byte a low start bit, 8 data bits LSB
    # first and a high stop bit, each `clocks_per_bit` cycles long.
    start = line.index(0)
    for byte in payload:
        bits = [line[start + i * clocks_per_bit: start + (i + 1) * clocks_per_bit]
                for i in range(10)]
        expected = [0] + [(byte >> i) & 1 for i in range(8)] + [1]
        assert [set(bit) for bit in bits] == [{value} for value in expected]
        start += 10 * clocks_per_bit
        while start < len(line) and line[start] == 1:  # the transmitter may idle between frames
            start += 1


def test_clocks_per_bit_is_checked():
    with pytest.raises(ValueError, match="clocks_per_bit: at least 4, got 3"):
        UartReceiver(3)
