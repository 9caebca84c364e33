"""Whole-chip cocotb bench: programs on the accelerator top against fsim.

Each test pulses ``start`` with a program in the Python DRAM model
(`testing.cocotb.dram.DramModel`), waits for ``done`` and compares the final
DRAM image byte for byte with the functional simulator's. Programs come from
the random program generator (which ends by dumping the whole out buffer and
every accumulator byte, so the comparison covers final SRAM state) and from
the compiler (a small conv2d layer with bias, shift and ReLU). Configuration
and seeds come from the environment set by the pytest wrapper.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

import cocotb
from cocotb.triggers import RisingEdge

from vdla.compiler import Conv2d, compile_op
from vdla.hw.counters import RTL_STATUS, rtl_counters
from vdla.hw.isa import MODULES
from vdla.runtime.runner import AccelRunner
from vdla.sim.backends import get_backend
from vdla.testing.programs import GeneratorOptions, generate
from vdla.testing.cocotb.dram import Backpressure, DramModel, clock_and_reset, read, wait_level
from vdla.testing.cocotb.harness import bench_config

CONFIG = bench_config()
SEEDS = [int(s) for s in os.environ.get("VDLA_BENCH_SEEDS", "0,1,2").split(",") if s]
# Small programs: cocotb runs at tens of kcycles/s.
OPTIONS = GeneratorOptions(actions=(12, 30), max_uops_per_insn=32, max_load_elements=32)


def _counters(dut) -> dict[str, int]:
    return {name: read(getattr(dut, f"counter_{name}")) for name in rtl_counters(CONFIG)}


def _status(dut) -> dict[str, int]:
    return {name: read(getattr(dut, f"status_{name}")) for name in RTL_STATUS}


async def run_program(dut, image: np.ndarray, insn_offset: int, insn_count: int,
                      timing: Backpressure, seed: int, limit_cycles: int = 400_000):
    """Run one program on the chip; returns (counters, status). ``image`` is updated."""
    dram = DramModel(dut, image, CONFIG.dram_bus_bytes, CONFIG.dram_read_latency,
                     timing=timing, seed=seed).start()
    dut.insn_addr.value = insn_offset
    dut.insn_count.value = insn_count
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    finished = await wait_level(dut, dut.done, limit_cycles)
    dram.stop()
    status = _status(dut)
    assert not dram.errors, dram.errors
    assert finished, f"no done within {limit_cycles} cycles; status: {status}"
    return _counters(dut), status


def _fsim_image(image: np.ndarray, insn_offset: int, insn_count: int):
    expected = image.copy()
    result = get_backend("fsim", CONFIG).run(expected, insn_offset, insn_count)
    return expected, result


async def _random_programs(dut, timing: Backpressure, seeds, label: str):
    await clock_and_reset(dut)
    failures = []
    for seed in seeds:
        program = generate(CONFIG, seed, OPTIONS)
        expected, reference = _fsim_image(program.dram, program.insn_offset, program.insn_count)
        if os.environ.get("VDLA_BENCH_CORRUPT_REFERENCE"):
            # self-test of the bench: a wrong reference must be reported
            offset, size = program.regions["dump"]
            expected[offset + size // 2] ^= 1
        image = program.dram.copy()
        counters, status = await run_program(dut, image, program.insn_offset,
                                             program.insn_count, timing, seed)
        if not np.array_equal(image, expected):
            failures.append(f"seed {seed}: " + program.describe_difference(expected, image))
            continue
        # counters the hardware reports must agree with the reference's counts
        for name in ("gemm_uops", "alu_uops"):
            if name in counters and counters[name] != reference.counters[name]:
                failures.append(f"seed {seed}: counter {name} {counters[name]} != fsim "
                                f"{reference.counters[name]}")
        retired = sum(status[f"retired_{module}"] for module in MODULES)
        if retired != program.insn_count or status["fetched"] != program.insn_count:
            failures.append(f"seed {seed}: fetched {status['fetched']}, retired {retired} of "
                            f"{program.insn_count} instructions")
        if counters["cycles"] <= 0:
            failures.append(f"seed {seed}: cycle counter {counters['cycles']}")
        dut._log.info(f"{label} seed {seed}: {program.insn_count} instructions, "
                      f"{counters['cycles']} cycles, equal to fsim")
    assert not failures, "\n".join(failures)


@cocotb.test()
async def random_programs(dut):
    """Random programs, memory at full speed."""
    await _random_programs(dut, Backpressure.none(), SEEDS, "full speed")


@cocotb.test()
async def random_programs_backpressure(dut):
    """Random programs under random latency, read gaps and ready backpressure."""
    await _random_programs(dut, Backpressure.heavy(), [s + 1000 for s in SEEDS], "backpressure")


@cocotb.test()
async def restart_after_done(dut):
    """The same program twice without reset gives the same image (start restarts cleanly)."""
    await clock_and_reset(dut)
    program = generate(CONFIG, 77, OPTIONS)
    expected, _ = _fsim_image(program.dram, program.insn_offset, program.insn_count)
    for attempt in range(2):
        image = program.dram.copy()
        await run_program(dut, image, program.insn_offset, program.insn_count,
                          Backpressure(read_gap=0.1), seed=attempt)
        assert np.array_equal(image, expected), \
            f"run {attempt}: " + program.describe_difference(expected, image)


@cocotb.test()
async def compiled_layer(dut):
    """A small conv2d (bias, shift, ReLU) from the compiler, against fsim and numpy."""
    await clock_and_reset(dut)
    rng = np.random.default_rng(5)
    op = Conv2d(batch=1, in_channels=6, out_channels=5, height=5, width=5, kernel=(3, 3),
                padding=(1, 1), bias=True, shift=3, relu=True)
    program = compile_op(op, CONFIG)
    inputs = op.random_inputs(rng)
    device = AccelRunner(CONFIG)
    image = device.build_image(program, inputs)
    expected, _ = _fsim_image(image, program.insn_offset, len(program.instructions))
    counters, _ = await run_program(dut, image, program.insn_offset, len(program.instructions),
                                    Backpressure(extra_latency=4, read_gap=0.2,
                                                 request_ready=0.7, write_ready=0.7), seed=3)
    assert np.array_equal(image, expected), "compiled conv2d: chip and fsim images differ"
    # and the layer itself against the op's own numpy reference
    from vdla.runtime.layout import unpack
    out = program.tensor("out")
    size = out.nbytes(CONFIG)
    result = unpack(out.layout, image[out.dram_offset:out.dram_offset + size].view(out.dtype),
                    out.shape, CONFIG)
    reference = op.reference(inputs["data"], inputs["weight"], inputs["bias"])
    assert np.array_equal(result, reference), "compiled conv2d: output differs from numpy"
    dut._log.info(f"compiled conv2d: {len(program.instructions)} instructions, "
                  f"{counters['cycles']} cycles, equal to fsim and numpy")


@cocotb.test()
async def speed(dut):
    """Cycles per second of this bench on one long program (benchmarks/cocotb_speed.py)."""
    output = os.environ.get("VDLA_SPEED_JSON")
    if not output:
        return
    await clock_and_reset(dut)
    options = GeneratorOptions(actions=(int(os.environ.get("VDLA_SPEED_ACTIONS", "60")),) * 2,
                               max_uops_per_insn=512, max_load_elements=64)
    program = generate(CONFIG, int(os.environ.get("VDLA_SPEED_SEED", "1")), options)
    expected, _ = _fsim_image(program.dram, program.insn_offset, program.insn_count)
    image = program.dram.copy()
    started = time.perf_counter()
    counters, _ = await run_program(dut, image, program.insn_offset, program.insn_count,
                                    Backpressure.none(), seed=1, limit_cycles=5_000_000)
    seconds = time.perf_counter() - started
    equal = bool(np.array_equal(image, expected))
    with open(output, "w") as handle:
        json.dump({"cycles": counters["cycles"], "seconds": seconds,
                   "cycles_per_second": counters["cycles"] / seconds,
                   "instructions": program.insn_count, "equal_to_fsim": equal,
                   "counters": counters}, handle, indent=2)
    assert equal, program.describe_difference(expected, image)
