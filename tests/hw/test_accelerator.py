"""The whole accelerator in Amaranth's simulator against the functional simulator,
and its generated Verilog under ``verilator --lint-only``."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from amaranth.sim import Simulator

from vdla.hw import isa
from vdla.hw.accelerator import Accelerator
from vdla.hw.config import PRESETS
from vdla.hw.counters import RTL_ACTIVITY, RTL_COUNTERS, RTL_STATUS
from vdla.sim.fsim import FunctionalSimulator
from vdla.testing.programs import GeneratorOptions, generate
from tests.hw.amaranth_sim import TINY_PIPELINED
from tests.hw.unelaborated import built
from tests.hw.compute_programs import overlap_program
from tests.hw.dram_model import DramModel

TINY = PRESETS["tiny"]
# tiny with the icebreaker preset's area switches: one load engine shared by load and
# compute (inp / uop and wgt / acc each share a reader), narrow walkers, collision
# don't-care buffers, a gap between a unit's instructions, a two-cycle ALU, the load walk in
# registers, early decode, no command queues, a one-instruction fetch buffer (its reader
# takes no beat while full).
TINY_COMPACT = TINY.replace(shared_load_engine=1, narrow_walkers=1, ram_collision_dont_care=1,
                            sequencer_gap=1, two_cycle_alu=1, registered_load_walk=1,
                            registered_dispatch=1, cmd_queue_depth=0, fetch_buffer_depth=1,
                            name="tiny-compact")
# ... on a 64-bit bus: uop and inp elements are half beats (`hw.dma`'s lanes).
TINY_PIPELINED_WIDE_BUS = TINY_PIPELINED.replace(dram_bus_bits=64, name="tiny64-pipelined")


def run_chip(config, dram, insn_offset, insn_count, *, stall=0.0, seed=0, max_cycles=60000):
    """Run a program on the Amaranth model of the chip; returns (cycles, counters, memory)."""
    dut = Accelerator(config)
    memory = DramModel(dram, config.dram_bus_bits, latency=config.dram_read_latency,
                       stall=stall, seed=seed)
    outcome = {}

    async def testbench(ctx):
        ctx.set(dut.insn_addr, insn_offset)
        ctx.set(dut.insn_count, insn_count)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for cycle in range(max_cycles):  # noqa: B007 (read after the loop)
            await ctx.tick()
            if ctx.get(dut.done):
                break
        else:
            status = {name: ctx.get(getattr(dut, f"status_{name}")) for name in RTL_STATUS}
            raise AssertionError(f"no done after {max_cycles} cycles; status {status}")
        outcome["counters"] = {name: ctx.get(getattr(dut, f"counter_{name}"))
                               for name in RTL_COUNTERS}
        outcome["cycles"] = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.add_testbench(memory.process(dut.mem_rd_req, dut.mem_rd_data, dut.mem_wr_req,
                                     dut.mem_wr_data), background=True)
    sim.run()
    return outcome["cycles"], outcome["counters"], memory


SMALL = GeneratorOptions(actions=(6, 12), max_uops_per_insn=24, max_load_elements=16)


@pytest.mark.parametrize("config, seed, stall", [(TINY, 0, 0.0), (TINY, 1, 0.3),
                                                 (TINY_COMPACT, 2, 0.0), (TINY_COMPACT, 3, 0.3),
                                                 (TINY_PIPELINED, 4, 0.3),
                                                 (TINY_PIPELINED_WIDE_BUS, 5, 0.3)],
                         ids=["tiny-0", "tiny-1-stall", "compact-2", "compact-3-stall",
                              "pipelined-4-stall", "pipelined64-5-stall"])
@pytest.mark.slow
def test_random_program_matches_fsim(config, seed, stall):
    """A random legal program (every instruction kind, tokens, padding) bit-exact vs fsim."""
    program = generate(config, seed, SMALL)
    expected, _ = program.run(FunctionalSimulator(config))
    actual = program.dram.copy()
    _, counters, memory = run_chip(config, actual, program.insn_offset, program.insn_count,
                                   stall=stall, seed=seed)
    assert np.array_equal(expected, actual), program.describe_difference(expected, actual)
    assert counters["dram_read_beats"] == memory.read_beats
    assert counters["dram_write_beats"] == memory.write_beats


@pytest.mark.parametrize("config", [TINY, TINY_COMPACT, TINY_PIPELINED],
                         ids=lambda c: c.name)
def test_back_to_back_micro_ops_on_one_acc_row(config):
    """Read-after-write hazards: GEMM and ALU micro-ops hitting the same acc row every
    cycle, and an ALU reading (src) the row the previous micro-op wrote."""
    rng = np.random.default_rng(7)
    b, bi, bo = config.batch, config.block_in, config.block_out
    inp = rng.integers(-128, 128, (4, b, bi)).astype(np.int8)
    wgt = rng.integers(-128, 128, (4, bo, bi)).astype(np.int8)
    uops = [isa.Uop(dst=0, src=k, wgt=k) for k in range(4)]              # 0..3: same dst
    uops += [isa.Uop(dst=1, src=0), isa.Uop(dst=2, src=1), isa.Uop(dst=1, src=2)]  # 4..6: chain
    alignment = config.dram_alignment
    layout = {"insn": 0, "inp": 1024, "wgt": 2048, "uop": 3072, "out": 4096}
    dram = np.zeros(8192, dtype=np.uint8)
    dram[layout["inp"]:layout["inp"] + inp.size] = inp.view(np.uint8).reshape(-1)
    dram[layout["wgt"]:layout["wgt"] + wgt.size] = wgt.view(np.uint8).reshape(-1)
    words = isa.encode_uops(uops, config).astype("<u4").view(np.uint8)
    dram[layout["uop"]:layout["uop"] + words.size] = words
    assert all(offset % alignment == 0 for offset in layout.values())
    base = {kind: layout[kind] // config.element_bytes(kind) for kind in ("inp", "wgt", "uop", "out")}
    program = [
        isa.Load(memory_type=isa.MemType.UOP, dram_base=base["uop"], y_size=1, x_size=len(uops),
                 x_stride=len(uops)),
        isa.Load(memory_type=isa.MemType.INP, dram_base=base["inp"], y_size=1, x_size=4, x_stride=4),
        isa.Load(memory_type=isa.MemType.WGT, dram_base=base["wgt"], y_size=1, x_size=4, x_stride=4,
                 push_next=True),
        isa.Gemm(pop_prev=True, reset=True, uop_begin=0, uop_end=1, iter_out=3, dst_factor_out=1),
        isa.Gemm(uop_begin=0, uop_end=4, iter_out=3, iter_in=2),        # 24 uops into acc[0]
        isa.Alu(alu_op=isa.AluOp.ADD, uop_begin=4, uop_end=7, iter_out=3),   # chains through src
        isa.Alu(alu_op=isa.AluOp.SHR, use_imm=True, imm=1, uop_begin=0, uop_end=1, iter_out=5),
        isa.Alu(alu_op=isa.AluOp.MUL, uop_begin=4, uop_end=6, iter_out=2, push_next=True),
        isa.Store(pop_prev=True, memory_type=isa.MemType.OUT, dram_base=base["out"], y_size=1,
                  x_size=3, x_stride=3),
        isa.Finish(),
    ]
    code = isa.encode_program(program, config)
    dram[:code.size] = code
    expected = dram.copy()
    FunctionalSimulator(config).run(expected, 0, len(program))
    actual = dram.copy()
    cycles, counters, _ = run_chip(config, actual, 0, len(program))
    assert np.array_equal(expected, actual), np.flatnonzero(expected != actual)[:16]
    assert counters["gemm_uops"] == 3 + 24
    assert counters["alu_uops"] == 9 + 5 + 4


@pytest.mark.parametrize("config", [TINY, TINY_COMPACT, TINY_PIPELINED],
                         ids=lambda c: c.name)
@pytest.mark.parametrize("m, n, k", [(1, 1, 4), (2, 1, 3), (2, 2, 3)])
@pytest.mark.slow
def test_overlapping_gemm_and_alu_units(config, m, n, k):
    """GEMM tiles with their REQUANT epilogues overlapped on the two units: bit-exact
    vs fsim and numpy, the units really run at once, and in fewer cycles than the
    same program with every overlap bit clear. 1x1 and 2x1 tiles put micro-ops on
    the same acc row one and two cycles apart across instruction boundaries."""
    cycles, both_busy = {}, {}
    for overlap in (True, False):
        program = overlap_program(config, tiles=4, m=m, n=n, k=k, overlap=overlap)
        expected = program.dram.copy()
        reference = FunctionalSimulator(config).run(expected, 0, program.insn_count)
        actual = program.dram.copy()
        cycles[overlap], counters, _ = run_chip(config, actual, 0, program.insn_count)
        assert np.array_equal(expected, actual), np.flatnonzero(expected != actual)[:16]
        np.testing.assert_array_equal(program.out_bytes(actual), program.expected_out)
        for name in ("gemm_uops", "alu_uops"):
            assert counters[name] == reference.counters[name], name
        # compute_busy also counts the uop / acc LOADs at the start (the same in both runs).
        both_busy[overlap] = counters["gemm_busy"] + counters["alu_busy"] - counters["compute_busy"]
    assert both_busy[True] > both_busy[False], both_busy
    assert cycles[True] < cycles[False], cycles


# ------------------------------------------------------------------ Verilog
def verilator_lint(path):
    from vdla.sim.rtl.toolchain import verilator_bin, verilator_env
    return subprocess.run([str(verilator_bin()), "--lint-only", "-Wno-fatal", str(path)],
                          env=verilator_env(), capture_output=True, text=True)


@pytest.mark.rtl
@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_generated_verilog_lints_and_has_the_contract_ports(preset, tmp_path):
    from vdla.hw.generate import TOP_NAME, verilog
    config = PRESETS[preset]
    text = verilog(config)
    path = tmp_path / "accel.v"
    path.write_text(text)
    result = verilator_lint(path)
    errors = [line for line in result.stderr.splitlines() if line.startswith("%Error")]
    assert result.returncode == 0 and not errors, "\n".join(errors[:20])
    header = re.search(rf"^module {TOP_NAME}\((.*?)\);", text, re.MULTILINE | re.DOTALL).group(1)
    ports = {name.strip() for name in header.split(",")}
    bus = config.dram_bus_bits
    widths = {"start": 1, "insn_addr": 32, "insn_count": 32, "done": 1, "clk": 1, "rst": 1,
              "mem_rd_req__valid": 1, "mem_rd_req__ready": 1, "mem_rd_req__payload": 48,
              "mem_rd_data__valid": 1, "mem_rd_data__ready": 1, "mem_rd_data__payload": bus,
              "mem_wr_req__valid": 1, "mem_wr_req__ready": 1, "mem_wr_req__payload": 48,
              "mem_wr_data__valid": 1, "mem_wr_data__ready": 1,
              "mem_wr_data__payload": bus + bus // 8}
    if config.memory_system.write_response:   # default: AXI4's write responses
        widths.update({"mem_wr_resp__valid": 1, "mem_wr_resp__ready": 1,
                       "mem_wr_resp__payload": 2})
    assert ("mem_wr_resp__valid" in widths) == (preset == "default")
    widths.update({f"counter_{name}": 32 for name in RTL_COUNTERS})
    widths.update({f"status_{name}": 16 for name in RTL_STATUS})
    widths.update({f"activity_{name}": 2 for name in RTL_ACTIVITY})
    assert ports == set(widths)
    for name, width in widths.items():
        declared = re.search(rf"^  (?:input|output) (?:\[(\d+):0\] )?{name};", text, re.MULTILINE)
        assert declared, name
        assert (int(declared.group(1)) + 1 if declared.group(1) else 1) == width, name
    # The all-zero memory initialisation is gone.
    assert "initial begin" not in text or text.count("initial") < 50


@pytest.mark.parametrize("name", ["default", "ulx3s", "icebreaker"])
def test_variants_are_chosen_once_by_the_preset(name):
    """The blocks a preset's switches change are built from the classes those
    switches choose (`hw.compute.InFlight`, `hw.alu.alu_variant`, ...)."""
    from vdla.hw.alu import RegisteredTwoCycleAlu, TwoCycleAlu, VectorAlu, alu_variant
    from vdla.hw.compute import Compute, InFlight, RegisteredInFlight
    from vdla.hw.dram_arbiter import DramArbiter, SkidDramArbiter, arbiter_variant
    from vdla.hw.unit_pipeline import AluUnit, TwoCycleAluUnit, unit_variant
    config = PRESETS[name]
    chosen = (built(Compute, config).in_flight_kind, alu_variant(config), unit_variant(config, "alu"),
              arbiter_variant(config))
    assert chosen == {
        "default": (InFlight, VectorAlu, AluUnit, DramArbiter),
        "ulx3s": (RegisteredInFlight, RegisteredTwoCycleAlu, TwoCycleAluUnit, SkidDramArbiter),
        "icebreaker": (RegisteredInFlight, TwoCycleAlu, TwoCycleAluUnit, DramArbiter)}[name]


@pytest.mark.parametrize("name", ["default", "ulx3s", "icebreaker"])
def test_port_variants_are_chosen_once_by_the_preset(name):
    """Compute's LOAD ports and head decode, and the top's read clients, follow the
    preset's ``shared_load_engine`` and in-place decode without command queues."""
    from vdla.hw import accelerator, compute
    config = PRESETS[name]
    shared = name == "icebreaker"
    assert compute._loads_variant(config) is (compute._SharedLoads if shared
                                              else compute._OwnLoads)
    assert compute._head_variant(config) is (compute._RegisteredHead if shared
                                             else compute._Head)
    loads = {"engine", "sram_uop", "sram_acc"} if shared else {"mem_uop", "mem_acc"}
    members = set(compute.ComputeSignature(config).members)
    assert loads <= members and not ({"engine", "mem_uop"} - loads) & members
    # icebreaker's inp, wgt, uop and acc elements are all 4 bytes: one shared reader.
    assert accelerator.read_clients(config) == (
        ("fetch", "engine_inp") if shared else accelerator.READ_CLIENTS)
