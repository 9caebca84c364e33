"""The ``cpu`` tuning target: wall time of the generated C kernel on this machine.

`CpuTarget` searches the knobs `compiler.cpu.schedule.cpu_space` declares (the
space `default_cpu_schedule` picks the default from by `estimate_cpu_cost`).
A measurement generates the layer's C, builds it (`compiler.cpu.build`,
cached by content), checks the first of `WARMUP_RUNS` int8 runs bit for bit
against the layer's numpy reference, then times `TIMED_RUNS` single calls on
`THREADS` thread(s) and keeps the median. Single calls, not batches of calls:
on a machine whose cores other processes share, a batch of a few milliseconds
mostly straddles another process's time slice, so most batches are slowed and
their median with them (3x on this 2-core machine at load 6), while a call of
tens to hundreds of microseconds is rarely interrupted and the median call is
not. A time depends on the CPU, the compiler and its flags, the threads and
this protocol, so `CpuTarget.design` names them and a measurement's key
(`tune.log.measurement_key`) carries it, as the accelerator's carries its
Verilog's digest. One thread by default: a second thread waits on whatever
else runs, and the time measures the load more than the schedule.

The model's features (`schedule_features`) are the knobs and what they imply
on the layer: register use, padded channels and partial tiles, loads per
multiply-add, the weight and input blocks against the L1 cache, parallel items,
and the analytical estimate (`prior_feature`), so the xgb tuner starts from
the hand-written model and learns where it is wrong.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from typing import Callable

import numpy as np

from vdla.compiler.cpu.schedule import (CPU_LOOP_ORDERS, PARALLEL_AXES, CpuProblem, CpuSchedule,
                                        CpuSpace, cpu_space, default_cpu_schedule,
                                        estimate_cpu_cost)
from vdla.hw.config import HwConfig
from vdla.ints import ceil_div
from vdla.tune.target import Measurement, register_target

__all__ = ["CpuTarget", "schedule_features", "FEATURE_NAMES", "THREADS", "TIMED_RUNS",
           "WARMUP_RUNS"]

MODE = "int8"
THREADS = 1
WARMUP_RUNS = 2             # the first touches cold pages and caches
TIMED_RUNS = 31
L1_BYTES = 32768            # as `estimate_cpu_cost` assumes


def _log2(value: float) -> float:
    return math.log2(max(value, 1e-9))


def schedule_features(space: CpuSpace, schedule: CpuSchedule,
                      threads: int = THREADS) -> np.ndarray | None:
    """The feature vector of ``schedule`` (see `FEATURE_NAMES`); None when it is illegal."""
    if not space.legal(schedule):
        return None
    problem = space.problem
    lanes, vectors, tile = schedule.lanes, schedule.oc_vectors, schedule.ow_tile
    icb, ocb = schedule.ic_block, schedule.oc_block
    kh, kw = problem.kernel
    oh, ow = problem.out_height, problem.out_width
    oc_blocks = ceil_div(problem.out_channels, ocb)
    ic_blocks = ceil_div(problem.in_channels, icb)
    row_tiles = ceil_div(ow, tile)
    items = {"rows": problem.batch * oh, "channels": problem.batch * oc_blocks,
             "both": problem.batch * oh * oc_blocks}[schedule.parallel]
    weight_block = icb * kh * kw * ocb
    input_rows = kh * (ow * problem.stride[1] + kw) * icb
    estimate = estimate_cpu_cost(problem, schedule, MODE, threads)
    values = [_log2(lanes), vectors, tile, _log2(icb), _log2(schedule.unroll)]
    values += [float(schedule.loop_order == order) for order in CPU_LOOP_ORDERS]
    values += [float(schedule.parallel == axis) for axis in PARALLEL_AXES]
    values += [schedule.accumulators, (schedule.accumulators + vectors) / space.registers,
               _log2(ocb), oc_blocks * ocb / problem.out_channels,
               ic_blocks * icb / problem.in_channels, (ow % tile) / ow,
               (vectors + tile) / (vectors * tile)]
    values += [_log2(weight_block), _log2(input_rows), (weight_block + input_rows) / L1_BYTES]
    values += [_log2(items), ceil_div(items, threads) * threads / items]
    values += [_log2(problem.batch * oc_blocks * oh * row_tiles), _log2(ic_blocks),
               _log2(icb / 4 / schedule.unroll)]
    values += [_log2(estimate), estimate / problem.macs]
    return np.asarray(values, dtype=np.float32)


FEATURE_NAMES: tuple[str, ...] = (
    ("log2_lanes", "oc_vectors", "ow_tile", "log2_ic_block", "log2_unroll")
    + tuple(f"order_{order}" for order in CPU_LOOP_ORDERS)
    + tuple(f"parallel_{axis}" for axis in PARALLEL_AXES)
    + ("accumulators", "register_use", "log2_oc_block", "oc_padding", "ic_padding",
       "row_tail_fraction", "loads_per_fma")
    + ("log2_weight_block_bytes", "log2_input_rows_bytes", "l1_fraction")
    + ("log2_parallel_items", "thread_balance")
    + ("log2_register_tiles", "log2_channel_blocks", "log2_inner_trips")
    + ("log2_estimate", "estimate_per_mac"))


@functools.lru_cache(maxsize=None)
def _machine(threads: int) -> str:
    from vdla.compiler.cpu.build import compiler_flags, compiler_version, cpu_model
    from vdla.cache import cpu_fingerprint
    return (f"{cpu_model()} [{cpu_fingerprint()}]; {compiler_version()} "
            f"{' '.join(compiler_flags())}; threads {threads}; {MODE}; median of "
            f"{TIMED_RUNS} calls")


@functools.lru_cache(maxsize=4)
def _checked_inputs(op) -> tuple[dict, np.ndarray]:
    """Fixed random int8 inputs of ``op`` and the numpy reference output (per process)."""
    inputs = op.random_inputs(np.random.default_rng(0))
    return inputs, op.reference(**inputs)


class CpuTarget:
    """This machine's CPU: wall time of the generated int8 C, checked against numpy."""

    name = "cpu"
    unit = "us"
    prior_feature = FEATURE_NAMES.index("log2_estimate")
    threads = THREADS

    def space(self, op, config: HwConfig) -> CpuSpace:
        return cpu_space(CpuProblem.from_op(op))

    def default(self, op, config: HwConfig) -> CpuSchedule:
        """What ``vdla compile --target cpu`` picks without a schedule."""
        return default_cpu_schedule(op, MODE)

    def features(self, space: CpuSpace, schedule: CpuSchedule) -> np.ndarray | None:
        return schedule_features(space, schedule, self.threads)

    def design(self, config: HwConfig | None = None) -> str:
        """The CPU, compiler and flags, threads and mode a time depends on (no config)."""
        return _machine(self.threads)

    def prepare(self, config: HwConfig, shared: bool,
                progress: Callable[[str], None] | None = None) -> dict:
        from vdla.compiler.cpu.build import compiler_flags, cpu_features
        compiler_flags(), cpu_features()        # a missing compiler fails here, once
        return {"threads": self.threads, "warmup": WARMUP_RUNS, "runs": TIMED_RUNS}

    def measure(self, op, config: HwConfig, schedule: CpuSchedule,
                options: dict) -> Measurement:
        from vdla.compiler.cpu import CpuKernel
        from vdla.compiler.cpu.build import CpuBuildError
        from vdla.compiler.errors import CompileError
        threads = options["threads"]
        began = time.perf_counter()
        try:
            kernel = CpuKernel(op, MODE, schedule)
        except (CompileError, CpuBuildError) as error:
            return Measurement(None, False, str(error).splitlines()[0], {})
        details = {"build_seconds": round(time.perf_counter() - began, 3), "isa": kernel.isa,
                   "threads": threads}
        inputs, reference = _checked_inputs(op)
        kernel.set_weights(inputs["weight"], inputs.get("bias"))
        out = np.empty(op.output_shape, kernel.dtypes["out"])
        kernel.run(inputs["data"], threads, out)        # the first warm-up run, checked
        wrong = int(np.count_nonzero(out != reference))
        if wrong:
            return Measurement(None, False, f"{wrong} output(s) differ from numpy", details)
        for _ in range(options["warmup"] - 1):
            kernel.run(inputs["data"], threads, out)
        seconds = []
        for _ in range(options["runs"]):
            began = time.perf_counter()
            kernel.run(inputs["data"], threads, out)
            seconds.append(time.perf_counter() - began)
        median = statistics.median(seconds)
        first, _, third = statistics.quantiles(seconds, n=4)
        details.update(warmup=options["warmup"], runs=options["runs"],
                       quartile_spread=round((third - first) / median, 4))
        return Measurement(median * 1e6, True, None, details)


register_target(CpuTarget())
