"""Unit benches of the accelerator's blocks (see testing/cocotb/blocks.py for the top).

Every check compares against an independent numpy/Python model written here:

* token queues (depth 4 and 1): random push/pop traffic, ready/valid/count
  checked against a counter model every cycle;
* vector ALU: every op on random and edge int32 values, immediate-like and
  per-element operands, shifts beyond 31 and negative, REQUANT with random
  16-bit immediates (shift, relu, higher bits ignored) and wrapping adds;
* GEMM core: random and extreme int8 blocks against ``inp @ wgt.T`` in int32;
* load module: every padding combination, strides shorter than, equal to and
  longer than a row (and 0), rows starting mid-beat, multi-beat elements and
  bursts longer than 256 beats, with the DRAM model's random latency, gaps and
  request backpressure; SRAM writes captured and compared with numpy; token
  waits (``pop_next``) and pushes (``push_next``) checked in time;
* store module: rows starting and ending mid-beat (byte strobes), strides,
  write backpressure; DRAM compared with numpy; ``pop_prev``/``push_prev``.
"""

from __future__ import annotations

import random

import numpy as np

import cocotb
from cocotb.triggers import RisingEdge

from vdla.hw import isa
from vdla.hw.gemm import GemmCore
from vdla.hw.isa import AluOp, Load, MemType, Store
from vdla.testing.cocotb.blocks import BLOCKS_CONFIG, TOKEN_QUEUE_DEPTHS
from vdla.testing.cocotb.dram import (Backpressure, DramModel, StreamSink, StreamSource,
                               clock_and_reset, cycle_now, read)
from vdla.testing.oracles import alu, pack, unpack_signed

CONFIG = BLOCKS_CONFIG
ACC_SCALARS = CONFIG.batch * CONFIG.block_out


# ---------------------------------------------------------------- token queues
async def _token_queue(dut, name: str, depth: int, cycles: int, seed: int):
    push_valid, push_ready = getattr(dut, f"{name}__push__valid"), getattr(dut, f"{name}__push__ready")
    pop_valid, pop_ready = getattr(dut, f"{name}__pop__valid"), getattr(dut, f"{name}__pop__ready")
    count_port = getattr(dut, f"{name}__count")
    rng = random.Random(seed)
    count, pushes, pops, full_seen, both_seen = 0, 0, 0, 0, 0
    for cycle in range(cycles):
        # traffic phases: mostly pushing, mostly popping, balanced
        phase = (cycle // 200) % 3
        p_push, p_pop = ((0.8, 0.2), (0.2, 0.8), (0.5, 0.5))[phase]
        push_valid.value = int(rng.random() < p_push)
        pop_ready.value = int(rng.random() < p_pop)
        await RisingEdge(dut.clk)
        pv, pr, qv, qr = read(push_valid), read(push_ready), read(pop_valid), read(pop_ready)
        assert read(count_port) == count, f"{name} cycle {cycle}: count {read(count_port)} != {count}"
        assert pr == int(count < depth), f"{name} cycle {cycle}: push.ready {pr} with {count} held"
        assert qv == int(count > 0), f"{name} cycle {cycle}: pop.valid {qv} with {count} held"
        pushed, popped = pv and pr, qv and qr
        count += int(pushed) - int(popped)
        pushes += pushed
        pops += popped
        full_seen += count == depth
        both_seen += pushed and popped
    push_valid.value = 0
    pop_ready.value = 0
    # the traffic must have exercised the queue: many transfers, full, and (when a
    # push and a pop can coincide, depth > 1) simultaneous push and pop
    assert pushes > cycles // 8 and pops > cycles // 8 and full_seen, (pushes, pops, full_seen)
    assert both_seen or depth == 1, f"{name}: never pushed and popped in one cycle"


@cocotb.test()
async def token_queues(dut):
    await clock_and_reset(dut)
    for name, depth in TOKEN_QUEUE_DEPTHS.items():
        await _token_queue(dut, name, depth, 1500, seed=depth)


@cocotb.test()
async def token_queue_reset_clears(dut):
    await clock_and_reset(dut)
    dut.tq__push__valid.value = 1
    for _ in range(3):
        await RisingEdge(dut.clk)
    dut.tq__push__valid.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    assert read(dut.tq__count) == 3
    dut.rst.value = 1
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    assert read(dut.tq__count) == 0 and read(dut.tq__pop__valid) == 0


# ---------------------------------------------------------------- ALU and GEMM
@cocotb.test()
async def alu_ops(dut):
    await clock_and_reset(dut)
    rng = np.random.default_rng(3)
    edges = np.array([0, 1, -1, 2, -2, 31, 32, 33, -32, 255, 127, -128, (1 << 31) - 1,
                      -(1 << 31), 1 << 30, -(1 << 30), 65535, -65536], dtype=np.int64)
    checked = 0
    for op in AluOp:
        cases = []
        for _ in range(60):
            style = rng.integers(0, 4)
            if style == 0:
                a = rng.integers(-(1 << 31), 1 << 31, ACC_SCALARS)
                b = rng.integers(-(1 << 31), 1 << 31, ACC_SCALARS)
            elif style == 1:
                a, b = rng.choice(edges, ACC_SCALARS), rng.choice(edges, ACC_SCALARS)
            elif style == 2:   # immediate-like: one operand for every lane
                a = rng.integers(-(1 << 31), 1 << 31, ACC_SCALARS)
                b = np.full(ACC_SCALARS, rng.integers(-(1 << 15), 1 << 15))
            else:
                a = rng.integers(-300, 300, ACC_SCALARS)
                b = rng.integers(-40, 40, ACC_SCALARS)
            # The 16-bit immediate: REQUANT reads its low 6 bits, every op must ignore the rest.
            imm = int(rng.integers(-(1 << 15), 1 << 15))
            cases.append((a.astype(np.int64), b.astype(np.int64), imm))
        dut.alu__op.value = int(op)
        for a, b, imm in cases:
            dut.alu__a.value = pack(a, 32)
            dut.alu__b.value = pack(b, 32)
            dut.alu__imm.value = imm & 0xFFFF
            await RisingEdge(dut.clk)   # combinational: sampled at this edge
            got = unpack_signed(read(dut.alu__result), 32, ACC_SCALARS)
            want = alu(op, a, b, imm)
            assert np.array_equal(got, want), \
                f"{op.name}: a={a} b={b} imm={imm} got {got} want {want}"
            checked += 1
    dut._log.info(f"ALU: {checked} vectors over {len(AluOp)} ops")


@cocotb.test()
async def gemm_core(dut):
    await clock_and_reset(dut)
    rng = np.random.default_rng(4)
    b, bi, bo = CONFIG.batch, CONFIG.block_in, CONFIG.block_out
    cases = [(np.full((b, bi), -128), np.full((bo, bi), -128)),
             (np.full((b, bi), -128), np.full((bo, bi), 127))]
    cases += [(rng.integers(-128, 128, (b, bi)), rng.integers(-128, 128, (bo, bi)))
              for _ in range(298)]
    # A new operand pair every cycle; each product comes GemmCore's latency cycles later.
    latency = GemmCore(CONFIG).latency
    for step in range(len(cases) + latency):
        if step < len(cases):
            inp, wgt = cases[step]
            dut.gemm__inp.value = pack(inp.reshape(-1), 8)
            dut.gemm__wgt.value = pack(wgt.reshape(-1), 8)
        await RisingEdge(dut.clk)
        case = step - latency
        if case >= 0:
            inp, wgt = cases[case]
            got = unpack_signed(read(dut.gemm__product), 32, b * bo).reshape(b, bo)
            want = inp.astype(np.int64) @ wgt.astype(np.int64).T
            assert np.array_equal(got, want), f"case {case}: got {got} want {want}"


# ---------------------------------------------------------------- load module
class SramCapture:
    """Record the writes of an SRAM write port (``<name>__en/addr/data``)."""

    def __init__(self, dut, name: str, depth: int):
        self.clk = dut.clk
        self.en, self.addr, self.data = (getattr(dut, f"{name}__{m}") for m in ("en", "addr", "data"))
        self.contents: dict[int, int] = {}
        self.writes = 0
        self.first_write_edge = None
        self.last_write_edge = None
        self.task = cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await RisingEdge(self.clk)
            if read(self.en):
                self.contents[read(self.addr)] = read(self.data)
                self.writes += 1
                now = cycle_now()
                if self.first_write_edge is None:
                    self.first_write_edge = now
                self.last_write_edge = now

    def stop(self):
        self.task.cancel()


def _expected_load(image: np.ndarray, insn: Load, element_bytes: int) -> dict[int, int]:
    """entry -> element as an int, by the ISA's LOAD semantics (numpy, independent)."""
    result = {}
    entry = insn.sram_base
    for y in range(insn.padded_y):
        for x in range(insn.padded_x):
            dy, dx = y - insn.y_pad_top, x - insn.x_pad_left
            if 0 <= dy < insn.y_size and 0 <= dx < insn.x_size:
                start = (insn.dram_base + dy * insn.x_stride + dx) * element_bytes
                result[entry] = int.from_bytes(image[start:start + element_bytes].tobytes(),
                                               "little")
            else:
                result[entry] = 0
            entry += 1
    return result


def _load_cases(rng: random.Random, kind: str, depth: int, dram_elements: int):
    """Loads covering every padding pattern and stride relation, plus random ones."""
    memory_type = MemType.INP if kind == "inp" else MemType.WGT
    cases = []
    for pads in [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1),
                 (1, 1, 1, 1), (2, 0, 3, 0), (0, 2, 0, 3), (15, 0, 0, 0), (0, 0, 15, 15)]:
        for stride_kind in ("equal", "longer", "shorter", "zero"):
            y_size, x_size = rng.randint(1, 4), rng.randint(1, 5)
            stride = {"equal": x_size, "longer": x_size + rng.randint(1, 5),
                      "shorter": rng.randint(1, max(1, x_size - 1)), "zero": 0}[stride_kind]
            cases.append((pads, y_size, x_size, stride))
    # one long row: more than 256 beats in one burst sequence
    long_row = {"inp": min(depth - 1, 250), "wgt": min(depth - 1, 70)}[kind]
    cases.append(((0, 0, 0, 0), 1, long_row, long_row))
    cases.append(((0, 0, 0, 0), 0, 3, 3))   # y_size 0: padding only... here nothing at all
    for _ in range(15):
        pads = tuple(rng.choice([0, 0, 1, 2]) for _ in range(4))
        cases.append((pads, rng.randint(1, 6), rng.randint(1, 8), rng.randint(0, 10)))
    loads = []
    for (top, bottom, left, right), y_size, x_size, stride in cases:
        padded = (top + y_size + bottom) * (left + x_size + right)
        if padded > depth or (y_size and (y_size - 1) * stride + x_size > dram_elements):
            continue
        extent = (y_size - 1) * stride + x_size if y_size else 0
        loads.append(Load(memory_type=memory_type, sram_base=rng.randint(0, depth - padded),
                          dram_base=rng.randint(0, dram_elements - extent),
                          y_size=y_size, x_size=x_size, x_stride=stride, y_pad_top=top,
                          y_pad_bottom=bottom, x_pad_left=left, x_pad_right=right))
    return loads


async def _run_loads(dut, timing: Backpressure, seed: int):
    rng = random.Random(seed)
    image = np.random.default_rng(seed).integers(0, 256, 64 * 1024, dtype=np.int64).astype(np.uint8)
    drams = [DramModel(dut, image, CONFIG.dram_bus_bytes, CONFIG.dram_read_latency,
                       rd_req=f"load__mem_{kind}__req", rd_data=f"load__mem_{kind}__data",
                       wr_req=None, wr_data=None, timing=timing, seed=seed + i).start()
             for i, kind in enumerate(("inp", "wgt"))]
    commands = StreamSource(dut, "load__cmds", idle=0.3, seed=seed)
    tokens_in = StreamSource(dut, "load__from_compute", payload=False)
    tokens_out = StreamSink(dut, "load__to_compute", ready=0.7, seed=seed, payload=False).start()
    failures = []
    for kind in ("inp", "wgt"):
        element_bytes = CONFIG.element_bytes(kind)
        depth = CONFIG.depth(kind)
        dram_elements = len(image) // element_bytes
        for index, insn in enumerate(_load_cases(rng, kind, depth, dram_elements)):
            capture = SramCapture(dut, f"load__sram_{kind}", depth)
            insn = insn.replace(push_next=True)
            await commands.send([isa.encode(insn, CONFIG)])
            before = len(tokens_out.items)
            for _ in range(20000):
                await RisingEdge(dut.clk)
                if len(tokens_out.items) > before:
                    break
            capture.stop()
            expected = _expected_load(image, insn, element_bytes)
            if len(tokens_out.items) == before:
                failures.append(f"{kind} load {index} {insn}: no push_next token")
            elif capture.contents != expected or capture.writes != len(expected):
                wrong = [e for e in expected if capture.contents.get(e) != expected[e]]
                failures.append(f"{kind} load {index} {insn}: {capture.writes} writes for "
                                f"{len(expected)} entries; wrong entries {wrong[:8]}")
            elif expected and tokens_out.edges[-1] <= capture.last_write_edge:
                failures.append(f"{kind} load {index}: token pushed at edge "
                                f"{tokens_out.edges[-1]}, before the last SRAM write "
                                f"({capture.last_write_edge})")
    for dram in drams:
        dram.stop()
    tokens_out.stop()
    assert not failures, "\n".join(failures[:20])
    del tokens_in


@cocotb.test()
async def load_module(dut):
    await clock_and_reset(dut)
    await _run_loads(dut, Backpressure.none(), seed=11)


@cocotb.test()
async def load_module_backpressure(dut):
    await clock_and_reset(dut)
    await _run_loads(dut, Backpressure.heavy(), seed=12)


@cocotb.test()
async def load_waits_for_token(dut):
    """A LOAD with pop_next neither reads DRAM nor writes SRAM before its token."""
    await clock_and_reset(dut)
    image = np.arange(4096, dtype=np.int64).astype(np.uint8)
    dram = DramModel(dut, image, CONFIG.dram_bus_bytes, CONFIG.dram_read_latency,
                     rd_req="load__mem_inp__req", rd_data="load__mem_inp__data",
                     wr_req=None, wr_data=None).start()
    capture = SramCapture(dut, "load__sram_inp", CONFIG.depth("inp"))
    commands = StreamSource(dut, "load__cmds")
    tokens_in = StreamSource(dut, "load__from_compute", payload=False)
    insn = Load(memory_type=MemType.INP, sram_base=5, dram_base=3, y_size=2, x_size=3,
                x_stride=4, pop_next=True)
    await commands.send([isa.encode(insn, CONFIG)])
    for _ in range(60):
        await RisingEdge(dut.clk)
    assert capture.writes == 0 and dram.read_bursts == 0, "load ran before its token"
    await tokens_in.send([0])
    for _ in range(200):
        await RisingEdge(dut.clk)
    assert capture.contents == _expected_load(image, insn, CONFIG.element_bytes("inp"))
    dram.stop()
    capture.stop()


# ---------------------------------------------------------------- store module
class SramReadModel:
    """A synchronous read port (``<name>__en/addr/data``) over a Python list."""

    def __init__(self, dut, name: str, contents: list[int]):
        self.clk = dut.clk
        self.en, self.addr, self.data = (getattr(dut, f"{name}__{m}") for m in ("en", "addr", "data"))
        self.contents = contents
        self.reads = 0
        self.task = cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await RisingEdge(self.clk)
            if read(self.en):
                self.data.value = self.contents[read(self.addr)]
                self.reads += 1

    def stop(self):
        self.task.cancel()


async def _run_stores(dut, timing: Backpressure, seed: int):
    rng = random.Random(seed)
    element_bytes = CONFIG.element_bytes("out")
    depth = CONFIG.depth("out")
    out = [rng.getrandbits(element_bytes * 8) for _ in range(depth)]
    sram = SramReadModel(dut, "store__out_read", out)
    image = np.random.default_rng(seed).integers(0, 256, 16 * 1024, dtype=np.int64).astype(np.uint8)
    expected = image.copy()
    dram = DramModel(dut, image, CONFIG.dram_bus_bytes, CONFIG.dram_read_latency, rd_req=None,
                     rd_data=None, wr_req="store__mem__req", wr_data="store__mem__data",
                     timing=timing, seed=seed).start()
    commands = StreamSource(dut, "store__cmds", idle=0.3, seed=seed)
    tokens_out = StreamSink(dut, "store__to_compute", ready=0.8, seed=seed, payload=False).start()
    dram_elements = len(image) // element_bytes
    stores = []
    for y_size, x_size, stride in [(1, 1, 1), (1, 2, 2), (1, 3, 3), (2, 3, 3), (2, 3, 5),
                                   (3, 1, 2), (4, 5, 7), (1, depth, depth), (8, 32, 33)]:
        for _ in range(3):
            extent = (y_size - 1) * stride + x_size
            stores.append(Store(sram_base=rng.randint(0, depth - y_size * x_size),
                                dram_base=rng.randint(0, dram_elements - extent),
                                y_size=y_size, x_size=x_size, x_stride=stride, push_prev=True))
    failures = []
    for index, insn in enumerate(stores):
        before = len(tokens_out.items)
        await commands.send([isa.encode(insn, CONFIG)])
        for _ in range(20000):
            await RisingEdge(dut.clk)
            if len(tokens_out.items) > before:
                break
        for y in range(insn.y_size):
            for x in range(insn.x_size):
                start = (insn.dram_base + y * insn.x_stride + x) * element_bytes
                value = out[insn.sram_base + y * insn.x_size + x]
                expected[start:start + element_bytes] = np.frombuffer(
                    value.to_bytes(element_bytes, "little"), dtype=np.uint8)
        if len(tokens_out.items) == before:
            failures.append(f"store {index} {insn}: no push_prev token")
        elif not np.array_equal(image, expected):
            wrong = np.flatnonzero(image != expected)
            failures.append(f"store {index} {insn}: {len(wrong)} bytes differ, first at "
                            f"{wrong[0]} (element {wrong[0] // element_bytes})")
            image[:] = expected
    dram.stop()
    sram.stop()
    tokens_out.stop()
    assert not failures, "\n".join(failures[:20])


@cocotb.test()
async def store_module(dut):
    await clock_and_reset(dut)
    await _run_stores(dut, Backpressure.none(), seed=21)


@cocotb.test()
async def store_module_backpressure(dut):
    await clock_and_reset(dut)
    await _run_stores(dut, Backpressure.heavy(), seed=22)


@cocotb.test()
async def store_waits_for_token(dut):
    """A STORE with pop_prev writes nothing before its token."""
    await clock_and_reset(dut)
    out = list(range(1, CONFIG.depth("out") + 1))
    sram = SramReadModel(dut, "store__out_read", out)
    image = np.zeros(4096, dtype=np.uint8)
    dram = DramModel(dut, image, CONFIG.dram_bus_bytes, CONFIG.dram_read_latency, rd_req=None,
                     rd_data=None, wr_req="store__mem__req", wr_data="store__mem__data").start()
    commands = StreamSource(dut, "store__cmds")
    tokens_in = StreamSource(dut, "store__from_compute", payload=False)
    insn = Store(sram_base=2, dram_base=9, y_size=1, x_size=3, x_stride=3, pop_prev=True)
    await commands.send([isa.encode(insn, CONFIG)])
    for _ in range(60):
        await RisingEdge(dut.clk)
    assert dram.write_bursts == 0 and not image.any(), "store ran before its token"
    await tokens_in.send([0])
    for _ in range(100):
        await RisingEdge(dut.clk)
    element_bytes = CONFIG.element_bytes("out")
    for x in range(3):
        start = (9 + x) * element_bytes
        assert int.from_bytes(image[start:start + element_bytes].tobytes(), "little") == out[2 + x]
    dram.stop()
    sram.stop()
