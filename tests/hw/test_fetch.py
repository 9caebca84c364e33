"""`hw.fetch.Fetch` under the Amaranth simulator: reading and dispatching a stream.

The reference is the ISA: every instruction of the stream, read from DRAM at
``insn_addr``, reaches the command queue of the module `isa.module_of` names,
in stream order, as its encoded word; ``fetched`` counts them and ``complete``
rises once all are dispatched. A stalling DRAM and consumers that take
commands at random exercise the buffer and the queues' backpressure.
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw import isa
from vdla.hw.fetch import Fetch, fetch_chunk
from vdla.hw.isa import Alu, AluOp, Finish, Gemm, Load, MemType, Store
from tests.hw.amaranth_sim import TINY, TINY_WIDE_BUS, run
from tests.hw.dram_model import DramModel


def random_stream(rng: np.random.Generator, count: int) -> list[isa.Instruction]:
    """``count`` instructions of every kind, with random fields and flags, FINISH last."""
    def flags():
        return {name: bool(rng.random() < 0.3) for name in isa.DEPENDENCY_FLAGS}

    def sizes():
        return dict(sram_base=int(rng.integers(0, 64)), dram_base=int(rng.integers(0, 1 << 20)),
                    y_size=int(rng.integers(1, 9)), x_size=int(rng.integers(1, 9)),
                    x_stride=int(rng.integers(8, 16)))

    stream = []
    for _ in range(count - 1):
        kind = int(rng.integers(0, 4))
        if kind == 0:
            memory = list(MemType)[int(rng.integers(0, 4))]   # uop, wgt, inp, acc
            insn = Load(memory_type=memory, **sizes(), **flags())
        elif kind == 1:
            insn = Store(memory_type=MemType.OUT, **sizes(), **flags())
        elif kind == 2:
            insn = Gemm(reset=bool(rng.random() < 0.5), uop_begin=1, uop_end=3,
                        iter_out=int(rng.integers(1, 9)), **flags())
        else:
            insn = Alu(alu_op=AluOp(int(rng.integers(0, len(AluOp)))), use_imm=True,
                       imm=int(rng.integers(-100, 100)), uop_end=2, **flags())
        stream.append(insn)
    return stream + [Finish()]


SMALL_BUFFER = TINY.replace(fetch_buffer_depth=4, name="tiny-fetch4")
NO_QUEUES = TINY.replace(fetch_buffer_depth=1, cmd_queue_depth=0, name="tiny-direct")
# Beats written in place, the destination decoded into registers, dispatches counted late.
REGISTERED = NO_QUEUES.replace(registered_dispatch=1, name="tiny-registered-dispatch")
# With a buffer and queues: every head offered from an output register, the request
# decided from registers (`registered_control`).
REGISTERED_QUEUES = TINY.replace(registered_dispatch=1, registered_control=1,
                                 name="tiny-registered-queues")


@pytest.mark.parametrize("config", [TINY, TINY_WIDE_BUS, SMALL_BUFFER, NO_QUEUES, REGISTERED,
                                    REGISTERED_QUEUES], ids=lambda c: c.name)
@pytest.mark.parametrize("case, stall, take", [
    ("finish alone", 0.0, 1.0),
    ("two chunks", 0.0, 1.0),                  # full speed
    ("overfull", 0.3, 0.3),                    # the buffer and queues fill up
])
def test_fetch_dispatches_each_instruction_to_its_module(config, case, stall, take):
    chunk = fetch_chunk(config)
    count = {"finish alone": 1, "two chunks": chunk + 3,
             "overfull": 3 * config.fetch_buffer_depth + 5}[case]
    rng = np.random.default_rng(count)
    program = random_stream(rng, count)
    words = [isa.encode(insn, config) for insn in program]
    insn_addr = 3 * isa.INSN_BYTES          # not at 0, and not bus aligned on every config
    dram = rng.integers(0, 256, insn_addr + len(words) * isa.INSN_BYTES + 64, dtype=np.uint8)
    dram[insn_addr:insn_addr + len(words) * isa.INSN_BYTES] = isa.encode_program(program, config)
    memory = DramModel(dram, config.dram_bus_bits, latency=5, stall=stall, seed=count)
    dut = Fetch(config)
    expected = {name: [w for w, insn in zip(words, program)
                       if isa.MODULES[isa.module_of(insn)] == name] for name in isa.MODULES}
    received = {name: [] for name in isa.MODULES}

    def consumer(name):
        async def process(ctx):
            port = getattr(dut, f"{name}_cmds")
            while True:
                ctx.set(port.ready, int(rng.random() < take))
                _, _, valid, ready, payload = await ctx.tick().sample(port.valid, port.ready,
                                                                      port.payload)
                if valid and ready:
                    received[name].append(int(payload))
        return process

    async def testbench(ctx):
        ctx.set(dut.insn_addr, insn_addr)
        ctx.set(dut.insn_count, count)
        ctx.set(dut.go, 1)
        await ctx.tick()
        ctx.set(dut.go, 0)
        cycles = 0
        while not ctx.get(dut.complete) or any(ctx.get(getattr(dut, f"{name}_level"))
                                               for name in isa.MODULES):
            await ctx.tick()
            cycles += 1
            assert cycles < 200 * count + 200, "fetch did not finish"
        for _ in range(4):   # commands taken in the last cycle are recorded
            await ctx.tick()
        assert ctx.get(dut.fetched) == count
        assert ctx.get(dut.idle)

    run(dut, testbench,
        processes=[memory.process(read_req=dut.mem.req, read_data=dut.mem.data),
                   *(consumer(name) for name in isa.MODULES)])
    for name in isa.MODULES:
        assert received[name] == expected[name], f"{name} commands differ"
    # Reads stay on the stream's beats, in bursts of at most one chunk of instructions.
    bus = config.dram_bus_bytes
    first, end = insn_addr // bus * bus, -(-(insn_addr + count * isa.INSN_BYTES) // bus) * bus
    for addr, beats in memory.read_requests:
        assert first <= addr and addr + beats * bus <= end, (addr, beats)
        assert beats * bus <= chunk * isa.INSN_BYTES + bus
    assert len(memory.read_requests) >= -(-count // chunk)

