"""Compile, run and check one layer: the measurement every bench, tuner and sweep shares.

`run_layer` compiles a `compiler.workloads.Workload` (the default schedule or
a given one), runs it on a `runtime.runner.AccelRunner` with seeded random inputs,
checks it against the layer's numpy reference and returns a
`bench.records.LayerResult` with its cycles, GEMM utilization, DRAM traffic
and how each module spent its cycles. It never raises for a layer that
fails: one broken layer must not lose the others' results.
"""

from __future__ import annotations

import time
import zlib

import numpy as np

from vdla.bench.records import LayerResult
from vdla.compiler.workloads import Workload
from vdla.hw.config import HwConfig
from vdla.hw.isa import MODULES
from vdla.ints import ceil_div

__all__ = ["run_layer", "ideal_cycles", "layer_seed"]


def ideal_cycles(op, config: HwConfig) -> int:
    """Cycles of a GEMM core that does ``macs_per_cycle`` useful MACs every cycle (ceil)."""
    return ceil_div(op.macs, config.macs_per_cycle)


def layer_seed(seed: int, name: str) -> list[int]:
    """The RNG seed of a layer's inputs: the same whichever other layers run."""
    return [seed, zlib.crc32(name.encode())]


def run_layer(workload: Workload, config: HwConfig, sim: str = "rtl", *,
              latency_hiding: bool = True, seed: int = 0,
              backend_options: dict | None = None, schedule=None) -> LayerResult:
    """Compile, run and check one layer; never raises for a layer that fails.

    Parameters
    ----------
    workload : Workload
    config : HwConfig
    sim : str
        A `sim.backend` name.
    latency_hiding : bool
        False compiles the ablation baseline (one thread, serialising tokens).
    seed : int
        Inputs come from ``numpy.random.default_rng(layer_seed(seed, name))``.
    backend_options : dict, optional
        Passed to the `AccelRunner` (e.g. ``build=`` a prebuilt rtl model).
    schedule : Schedule, optional
        Compile with these knobs instead of the default schedule (tuning).

    Returns
    -------
    LayerResult
        With ``error`` set (and ``correct`` False) when compiling or
        simulating raised.
    """
    from vdla.compiler import compile_op
    from vdla.compiler.accel.dump import summarize
    from vdla.runtime.runner import AccelRunner

    op = workload.op
    result = LayerResult(name=workload.name, op=op.describe(), uses=workload.uses, macs=op.macs,
                         ideal_cycles=ideal_cycles(op, config),
                         latency_hiding=latency_hiding)
    stage = "compiling"
    try:
        began = time.perf_counter()
        program = compile_op(op, config, schedule, latency_hiding=latency_hiding)
        result.compile_seconds = round(time.perf_counter() - began, 4)
        summary = summarize(program)
        result.instructions = summary["instructions"]
        result.instructions_per_module = summary["per_module"]
        result.uops = summary["uops"]
        result.schedule = program.metadata.get("schedule")

        stage = "preparing"
        inputs = op.random_inputs(np.random.default_rng(layer_seed(seed, workload.name)))
        device = AccelRunner(config, sim=sim, **(backend_options or {}))
        stage = "simulating"
        began = time.perf_counter()
        run = device.run(program, inputs)
        result.simulation_seconds = round(time.perf_counter() - began, 4)
        close = getattr(device.backend, "close", None)
        if close is not None:
            close()

        stage = "checking"
        expected = op.reference(**inputs)
        got = run.outputs["out"]
        result.mismatches = (int(np.count_nonzero(got != expected))
                             if got.shape == expected.shape else int(expected.size))
        result.correct = result.mismatches == 0
    except Exception as error:  # one broken layer must not lose the others' results
        first_line = (str(error).strip().splitlines() or [""])[0]
        result.correct = False
        result.error = f"{stage}: {type(error).__name__}: {first_line}"
        return result

    if run.cycles is not None:
        details = run.details
        result.cycles = int(run.cycles)
        result.gemm_utilization = op.macs / (run.cycles * config.macs_per_cycle)
        result.dram_bytes_read = _int_or_none(details.get("dram_bytes_read"))
        result.dram_bytes_written = _int_or_none(details.get("dram_bytes_written"))
        if isinstance(details.get("modules"), dict):
            result.modules = {module: {kind: int(details["modules"][module].get(kind, 0))
                                       for kind in ("busy", "wait_token", "wait_mem")}
                              for module in MODULES if module in details["modules"]}
    return result


def _int_or_none(value) -> int | None:
    return None if value is None else int(value)
