"""Amaranth-simulator tests of the accelerator's blocks against numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from vdla.hw import isa
from vdla.hw.alu import VectorAlu
from vdla.hw.config import PRESETS
from vdla.hw.dram_arbiter import DramArbiter
from vdla.hw.gemm import GemmCore
from vdla.hw.load import LoadEngine
from vdla.hw.token_queue import TokenQueue
from tests.hw.dram_model import DramModel
from tests.oracles import alu, pack, unpack_signed

TINY = PRESETS["tiny"]
# Tiny with a 64-bit bus: inp / uop / out elements (4 bytes) are narrower than a beat.
TINY_WIDE_BUS = TINY.replace(dram_bus_bits=64, name="tiny64")


def run(dut, *testbenches, processes=(), deadline=None):
    sim = Simulator(dut)
    sim.add_clock(1e-6, if_exists=True)
    for testbench in testbenches:
        sim.add_testbench(testbench)
    for process in processes:
        sim.add_testbench(process, background=True)
    if deadline is None:
        sim.run()
    else:
        sim.run_until(deadline * 1e-6)


# ------------------------------------------------------------------ token queue
def test_token_queue_counts_and_limits():
    depth = 3
    dut = TokenQueue(depth)
    rng = np.random.default_rng(0)

    async def testbench(ctx):
        model = 0
        for _ in range(300):
            push, pop = int(rng.random() < 0.6), int(rng.random() < 0.4)
            ctx.set(dut.push.valid, push)
            ctx.set(dut.pop.ready, pop)
            assert ctx.get(dut.count) == model
            assert ctx.get(dut.push.ready) == (model < depth)
            assert ctx.get(dut.pop.valid) == (model > 0)
            model += (push and model < depth) - (pop and model > 0)
            await ctx.tick()
        assert ctx.get(dut.count) == model

    run(dut, testbench)


# ------------------------------------------------------------------ ALU
def test_requant_reference_agrees_with_fsim():
    """The test's REQUANT model and the functional simulator's are the same function."""
    from vdla.sim.fsim import _alu_apply
    rng = np.random.default_rng(11)
    a = rng.integers(-2**31, 2**31, 2000)
    b = rng.integers(-2**31, 2**31, 2000)
    for imm in (0, 1, 7, 31, 32, 39, 63, 64 + 5, -1, -32, -2**15, 2**15 - 1):
        want = alu(isa.AluOp.REQUANT, a, b, imm)
        got = _alu_apply(isa.AluOp.REQUANT, a, b, imm)
        np.testing.assert_array_equal((got & 0xFFFFFFFF).astype(np.uint32).view(np.int32), want,
                                      err_msg=f"imm {imm}")


ALU_EDGES = np.array([0, 1, -1, 2**31 - 1, -2**31, 31, 32, 33, -31, -32, 127, 128, -128, -129,
                      255, 256, 0x12345678, -0x789ABCDF], dtype=np.int64)
# REQUANT immediates: every shift with and without relu, and bits above 5 that must be ignored.
REQUANT_IMMS = [0, 1, 8, 31, 32, 33, 40, 63, 64, 64 + 32 + 3, 0x7FC0 | 9, -1, -32, -64 + 4,
                -2**15, 2**15 - 1]


@pytest.mark.parametrize("op", list(isa.AluOp), ids=lambda op: op.name)
def test_alu_matches_numpy(op):
    config = TINY
    lanes = config.batch * config.block_out
    dut = VectorAlu(config)
    rng = np.random.default_rng(int(op))
    edges = ALU_EDGES
    cases = [(rng.choice(edges, lanes), rng.choice(edges, lanes)) for _ in range(20)]
    cases += [(rng.integers(-2**31, 2**31, lanes), rng.integers(-2**31, 2**31, lanes))
              for _ in range(20)]
    cases += [(rng.integers(-2**31, 2**31, lanes), rng.integers(-64, 64, lanes)) for _ in range(10)]
    if op == isa.AluOp.REQUANT:
        # Small sums (every clip branch), sums that wrap, sums near the clip bounds.
        cases += [(rng.integers(-5000, 5000, lanes), rng.integers(-5000, 5000, lanes))
                  for _ in range(10)]
        cases.append((np.array([2**31 - 1, -2**31, 2**31 - 100, -2**31 + 3][:lanes]),
                      np.array([1, -1, 200, -7][:lanes])))
        imms = REQUANT_IMMS
    else:
        imms = [0, -1]  # other ops ignore the immediate port

    async def testbench(ctx):
        ctx.set(dut.op, op)
        for imm in imms:
            ctx.set(dut.imm, imm & 0xFFFF)
            for a, b in cases:
                ctx.set(dut.a, pack(a, 32))
                ctx.set(dut.b, pack(b, 32))
                got = unpack_signed(ctx.get(dut.result), 32, lanes)
                np.testing.assert_array_equal(got, alu(op, a, b, imm),
                                              err_msg=f"{op.name} imm {imm} {a} {b}")

    run(dut, testbench)


# ------------------------------------------------------------------ GEMM core
@pytest.mark.parametrize("config", [TINY, TINY.replace(batch=2, block_in=8, block_out=4)],
                         ids=["tiny", "2x8x4"])
def test_gemm_core_matches_numpy(config):
    dut = GemmCore(config)
    rng = np.random.default_rng(1)
    b, bi, bo = config.batch, config.block_in, config.block_out
    cases = [(rng.integers(-128, 128, (b, bi)), rng.integers(-128, 128, (bo, bi))) for _ in range(30)]
    cases.append((np.full((b, bi), -128), np.full((bo, bi), -128)))   # largest positive sums
    cases.append((np.full((b, bi), -128), np.full((bo, bi), 127)))    # most negative sums

    async def testbench(ctx):
        for inp, wgt in cases:
            ctx.set(dut.inp, pack(inp.reshape(-1), 8))
            ctx.set(dut.wgt, pack(wgt.reshape(-1), 8))
            got = unpack_signed(ctx.get(dut.product), 32, b * bo).reshape(b, bo)
            np.testing.assert_array_equal(got, inp.astype(np.int64) @ wgt.astype(np.int64).T)

    run(dut, testbench)


# ------------------------------------------------------------------ loads
def padded_expectation(dram, insn, element_bytes):
    rows, cols = insn.padded_y, insn.padded_x
    out = np.zeros((rows, cols, element_bytes), dtype=np.uint8)
    for y in range(insn.y_size):
        first = (insn.dram_base + y * insn.x_stride) * element_bytes
        row = dram[first:first + insn.x_size * element_bytes].reshape(insn.x_size, element_bytes)
        out[insn.y_pad_top + y, insn.x_pad_left:insn.x_pad_left + insn.x_size] = row
    return out.reshape(rows * cols, element_bytes)


async def _issue_load(ctx, dut, insn, config):
    """Hand the LOAD ``insn`` to a `LoadEngine`'s ``cmd`` stream; return once it is taken."""
    fields = isa.formats(config)[isa.Opcode.LOAD]
    ctx.set(dut.cmd.payload, dut.cmd.payload.shape().const(
        {f.name: getattr(insn, f.name) for f in fields}))
    ctx.set(dut.cmd.valid, 1)
    await ctx.tick().until(dut.cmd.ready)
    ctx.set(dut.cmd.valid, 0)


@pytest.mark.parametrize("config", [TINY, TINY_WIDE_BUS], ids=lambda c: c.name)
@pytest.mark.parametrize("kind", ["inp", "wgt"])
def test_load_engine_padding_and_addresses(config, kind):
    rng = np.random.default_rng(hash((config.name, kind)) % 2**32)
    element_bytes = config.element_bytes(kind)
    dram = rng.integers(0, 256, 4096, dtype=np.uint8)
    memory = DramModel(dram, config.dram_bus_bits, latency=3, stall=0.3, seed=2)
    dut = LoadEngine(config, ("inp", "wgt"))
    loads = [
        isa.Load(memory_type=isa.MemType[kind.upper()], sram_base=5, dram_base=3, y_size=2,
                 x_size=3, x_stride=5, y_pad_top=1, y_pad_bottom=2, x_pad_left=1, x_pad_right=2),
        isa.Load(memory_type=isa.MemType[kind.upper()], sram_base=0, dram_base=1, y_size=3,
                 x_size=2, x_stride=1),                                  # overlapping rows
        isa.Load(memory_type=isa.MemType[kind.upper()], sram_base=7, dram_base=0, y_size=0,
                 x_size=4, x_stride=4, y_pad_top=1, x_pad_left=1),        # padding only
    ]
    port = getattr(dut, f"sram_{kind}")
    other = getattr(dut, f"sram_{'wgt' if kind == 'inp' else 'inp'}")
    results = []

    async def testbench(ctx):
        for insn in loads:
            written = {}
            await _issue_load(ctx, dut, insn, config)
            for _ in range(2000):
                en, addr, data, other_en, busy = (await ctx.tick().sample(
                    port.en, port.addr, port.data, other.en, dut.busy))[2:]
                assert not other_en
                if en:
                    assert addr not in written, f"entry {addr} written twice"
                    written[addr] = data
                if not ctx.get(dut.busy):
                    break
            else:
                raise AssertionError("load did not finish")
            results.append(written)

    run(dut, testbench, processes=[memory.process(getattr(dut, f"mem_{kind}").req,
                                                  getattr(dut, f"mem_{kind}").data)])
    reads_expected = 0
    for insn, written in zip(loads, results):
        expected = padded_expectation(dram, insn, element_bytes)
        assert sorted(written) == [insn.sram_base + n for n in range(len(expected))]
        for n, row in enumerate(expected):
            got = np.frombuffer(int(written[insn.sram_base + n]).to_bytes(element_bytes, "little"),
                                dtype=np.uint8)
            np.testing.assert_array_equal(got, row, err_msg=f"entry {n} of {insn}")
        bus = config.dram_bus_bytes
        for y in range(insn.y_size if insn.x_size else 0):
            first = (insn.dram_base + y * insn.x_stride) * element_bytes
            last = first + insn.x_size * element_bytes
            reads_expected += -(-last // bus) - first // bus
    # Pads cost no DRAM traffic: only the data rows' beats were read.
    assert memory.read_beats == reads_expected


def test_load_engine_splits_long_rows_into_bursts():
    from vdla.hw.layouts import MAX_BURST_BEATS
    config = TINY
    element_bytes = config.element_bytes("wgt")
    count = MAX_BURST_BEATS // config.beats("wgt") + 6          # one row, two bursts
    dram = np.random.default_rng(9).integers(0, 256, (count + 4) * element_bytes, dtype=np.uint8)
    memory = DramModel(dram, config.dram_bus_bits, latency=2)
    dut = LoadEngine(config, ("inp", "wgt"))
    insn = isa.Load(memory_type=isa.MemType.WGT, sram_base=0, dram_base=2, y_size=1,
                    x_size=count, x_stride=count)
    written = {}

    async def testbench(ctx):
        await _issue_load(ctx, dut, insn, config)
        while True:
            en, addr, data = (await ctx.tick().sample(dut.sram_wgt.en, dut.sram_wgt.addr,
                                                      dut.sram_wgt.data))[2:]
            if en:
                written[addr] = data
            if not ctx.get(dut.busy):
                break

    run(dut, testbench, processes=[memory.process(dut.mem_wgt.req, dut.mem_wgt.data)])
    beats = count * config.beats("wgt")
    start = 2 * element_bytes
    assert memory.read_requests == [(start, MAX_BURST_BEATS),
                                    (start + MAX_BURST_BEATS * config.dram_bus_bytes,
                                     beats - MAX_BURST_BEATS)]
    expected = padded_expectation(dram, insn, element_bytes)
    assert sorted(written) == list(range(count))
    for n, row in enumerate(expected):
        assert int(written[n]).to_bytes(element_bytes, "little") == row.tobytes()


# ------------------------------------------------------------------ arbiter
def test_arbiter_routes_data_in_order_under_stalls():
    config = TINY
    clients = 3
    dut = DramArbiter(config, clients)
    rng = np.random.default_rng(5)
    dram = rng.integers(0, 256, 8192, dtype=np.uint8)
    memory = DramModel(dram, config.dram_bus_bits, latency=6, stall=0.3, seed=3)
    bus = config.dram_bus_bytes
    requests = {c: [(int(rng.integers(0, 1000)) * bus, int(rng.integers(1, 9))) for _ in range(6)]
                for c in range(clients)}
    received = {c: [] for c in range(clients)}
    done = set()

    def client(c):
        async def process(ctx):
            port = dut.readers[c]
            expected_beats = sum(beats for _, beats in requests[c])
            queue = list(requests[c])
            while len(received[c]) < expected_beats:
                if queue and not ctx.get(port.req.valid):
                    addr, beats = queue[0]
                    ctx.set(port.req.payload, {"addr": addr, "beats": beats})
                    ctx.set(port.req.valid, 1)
                ctx.set(port.data.ready, int(rng.random() < 0.7))
                req_valid, req_ready, data_valid, data_ready, data = (await ctx.tick().sample(
                    port.req.valid, port.req.ready, port.data.valid, port.data.ready,
                    port.data.payload))[2:]
                if req_valid and req_ready:
                    queue.pop(0)
                    ctx.set(port.req.valid, 0)
                if data_valid and data_ready:
                    received[c].append(int(data))
            done.add(c)
        return process

    run(dut, *[client(c) for c in range(clients)],
        processes=[memory.process(dut.mem_rd_req, dut.mem_rd_data)])
    assert done == set(range(clients))
    for c in range(clients):
        expected = [memory.beat(addr + i * bus) for addr, beats in requests[c] for i in range(beats)]
        assert received[c] == expected, f"client {c}"
    # Every request went out exactly once, in some interleaving.
    assert sorted(memory.read_requests) == sorted(r for c in requests for r in requests[c])
