"""The cycle-accurate tier's backend: programs on the Verilator model of the accelerator.

`RtlSimulator` (registered as backend ``"rtl"``) builds or finds the cached
native model of a config (`sim.rtl.build`), copies the DRAM image into the
C++ DRAM model, pulses ``start`` and lets the harness step the clock in native
code until ``done`` — in slices, so Ctrl-C still works — then copies the image
back. A program that does not finish within the cycle limit raises
`sim.errors.DeadlockError` listing the state of every queue from the chip's
status outputs (`sim.rtl.diagnosis`). `RtlModel` (`sim.rtl.model`) is the thin
binding over one loaded library, for tests and tools that want to step the
model themselves.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from vdla.hw.config import HwConfig
from vdla.sim.backend import RunResult, register_backend
from vdla.sim.checker import MAX_UOP_EXECUTIONS, check_program
from vdla.sim.errors import AddressError, DeadlockError, OptionError
from vdla.sim.rtl.build import ModelBuild, build_model
from vdla.sim.rtl.diagnosis import decode_instructions, default_cycle_limit, hang_message
from vdla.sim.rtl.model import ACTIVITY_MAX_SEGMENTS, DONE, MEMORY_ERROR, RtlModel

__all__ = ["RtlSimulator", "RtlModel", "default_cycle_limit", "DONE"]


class RtlSimulator:
    """Backend ``"rtl"``: the generated Verilog under Verilator, cycle-accurate.

    Parameters
    ----------
    config : HwConfig
    trace : str or Path, optional
        Write an FST waveform of each run to this file (builds the slower
        tracing variant of the model).
    cycle_limit : int, optional
        Cycles after which an unfinished program raises `DeadlockError`
        (default: `default_cycle_limit` of the program).
    backpressure : int
        Percentage of cycles in which the DRAM model randomly stalls (0: never;
        a verification aid that changes timing, not results).
    seed : int
        Seed of the random stalls.
    verilog : str, optional
        Verilog of the top to simulate instead of ``hw.generate.verilog(config)``.
    build : ModelBuild, optional
        An already built model to use.
    progress : callable, optional
        Told about a cold build before it starts (``print`` for a CLI).
    activity : bool
        Record what each module does over the run (in native code; nothing is
        recorded, and nothing paid, when off) into ``details["activity"]``:
        ``{"load": [(start_cycle, end_cycle, state), ...], "compute": ...,
        "store": ...}`` with ``state`` one of ``"busy"``, ``"wait_token"``,
        ``"wait_mem"`` (idle cycles are the gaps), the format of
        `bench.plots.timeline`. ``details["activity_bin_cycles"]`` says per
        module whether the record is exact (1) or was coarsened into bins.
    activity_window : (int, int or None), optional
        Record only cycles ``start <= cycle < end`` since start.
    activity_segments : int
        Exact runs kept per module before coarsening into cycle bins.
    check : bool
        Apply `sim.checker.check_program` before every run (default True;
        only tests that probe the hardware's own error handling turn it off).
    progress_every : float, optional
        With ``progress``, report cycles run so far every this many seconds
        of a long run.
    max_uop_executions : int
        The checker's work limit (`sim.checker.MAX_UOP_EXECUTIONS`).
    """

    name = "rtl"
    checks_programs = True   # run() applies sim.checker before the model starts

    def __init__(self, config: HwConfig, trace: str | Path | None = None,
                 cycle_limit: int | None = None, *, backpressure: int = 0, seed: int = 1,
                 verilog: str | None = None, build: ModelBuild | None = None,
                 progress=None, activity: bool = False,
                 activity_window: tuple[int, int | None] | None = None,
                 activity_segments: int = ACTIVITY_MAX_SEGMENTS, check: bool = True,
                 progress_every: float | None = None,
                 max_uop_executions: int = MAX_UOP_EXECUTIONS, **options):
        if options:
            raise OptionError(f"unknown option(s) for the rtl simulator: {', '.join(sorted(options))}"
                            " (known: trace, cycle_limit, backpressure, seed, verilog, build, "
                            "activity, activity_window, activity_segments, check, "
                            "progress_every, max_uop_executions)")
        if cycle_limit is not None and cycle_limit <= 0:
            raise OptionError(f"cycle_limit must be positive, got {cycle_limit}")
        if not 0 <= backpressure < 100:
            raise OptionError(f"backpressure is a percentage in [0, 100), got {backpressure}")
        self.config = config
        self.check = bool(check)
        self.max_uop_executions = int(max_uop_executions)
        self.progress = progress
        self.progress_every = progress_every
        self.trace = Path(trace) if trace is not None else None
        self.cycle_limit = cycle_limit
        self.backpressure = backpressure
        self.seed = seed
        self.build = build or build_model(config, trace=self.trace is not None, verilog=verilog,
                                          progress=progress)
        if self.trace is not None and not self.build.trace:
            raise ValueError("trace needs a model built with trace=True")
        self.model = RtlModel(self.build)
        self.activity = bool(activity or activity_window is not None)
        if self.activity:
            self.model.record_activity(True, max_segments=activity_segments,
                                       window=activity_window)

    def close(self) -> None:
        self.model.close()

    def run(self, dram: np.ndarray, insn_offset: int, insn_count: int) -> RunResult:
        """Run the program in ``dram`` (uint8, modified in place) to completion.

        Raises
        ------
        DeadlockError
            When the program has not finished after the cycle limit; the message
            lists every token and command queue's occupancy.
        AddressError
            When the chip reads or writes outside the DRAM image or misaligned.
        sim.errors.SimulationError
            When `sim.checker.check_program` rejects the program (before the
            model runs it).
        """
        from vdla.hw.isa import INSN_BYTES
        if not isinstance(dram, np.ndarray) or dram.dtype != np.uint8 or dram.ndim != 1 \
                or not dram.flags.c_contiguous:
            raise ValueError("dram must be a 1-D C-contiguous uint8 numpy array")
        insn_offset, insn_count = int(insn_offset), int(insn_count)
        if insn_count < 0 or insn_offset < 0 or insn_offset + insn_count * INSN_BYTES > dram.size:
            raise AddressError(f"instructions [{insn_offset}, {insn_offset + insn_count * INSN_BYTES})"
                               f" lie outside the {dram.size}-byte DRAM image")
        if insn_offset % self.model.bus_bytes:
            raise AddressError(f"insn_offset {insn_offset} is not aligned to the "
                               f"{self.model.bus_bytes}-byte DRAM bus")
        if self.check:
            # The rules fsim applies (sim.checker): the model never runs a
            # program they reject, so its result can never be a silent wrong one.
            check_program(self.config, dram, insn_offset, insn_count,
                          max_uop_executions=self.max_uop_executions,
                          progress=self.progress if self.progress_every else None)
        instructions = decode_instructions(self.config, dram, insn_offset, insn_count)
        limit = self.cycle_limit or default_cycle_limit(self.config, instructions)

        model = self.model
        model.load_dram(dram)
        model.set_backpressure(self.backpressure, self.seed)
        if self.trace is not None:
            self.trace.parent.mkdir(parents=True, exist_ok=True)
            model.open_trace(self.trace)
        try:
            status = model.run(insn_offset, insn_count, limit, self._progress_reporter(limit))
        finally:
            if self.trace is not None:
                model.close_trace()
        if status == MEMORY_ERROR:
            model.store_dram(dram)
            raise AddressError(f"the chip made a bad DRAM access: {model.error}")
        if status != DONE:
            message, first = hang_message(self.config, self.model, insn_count, limit, instructions)
            raise DeadlockError(message, first)
        model.store_dram(dram)
        return self._result(instructions)

    def _progress_reporter(self, limit: int) -> Callable[[int], None] | None:
        """``on_slice`` for `RtlModel.run`: a line every ``progress_every`` seconds."""
        if self.progress is None or not self.progress_every:
            return None
        began = time.monotonic()
        last = [began]

        def report(cycles: int) -> None:
            now = time.monotonic()
            if now - last[0] >= self.progress_every:
                last[0] = now
                rate = cycles / max(now - began, 1e-9)
                self.progress(f"rtl: {cycles:,} cycles in {now - began:.0f} s "
                              f"({rate / 1e6:.2f} M cycles/s; stops at the cycle limit "
                              f"{limit:,})")
        return report

    def _result(self, instructions: list | None) -> RunResult:
        from vdla.hw import isa
        model = self.model
        counters = model.counters()
        memory = model.memory_stats()
        cycles = model.cycles
        gemm_uops = counters.get("gemm_uops", 0)
        if instructions is not None:
            accumulating_uops = sum(insn.micro_ops for insn in instructions
                                    if isinstance(insn, isa.Gemm) and not insn.reset)
        else:
            accumulating_uops = gemm_uops
        modules = {}   # empty where the hardware counts only cycles (`HwConfig.event_counters`)
        for module in isa.MODULES:
            if f"{module}_busy" not in counters:
                continue
            figures = {kind: counters.get(f"{module}_{kind}", 0)
                       for kind in ("busy", "wait_token", "wait_mem")}
            figures["busy_fraction"] = figures["busy"] / cycles if cycles else 0.0
            modules[module] = figures
        # Micro-ops, not MACs: a micro-op also computes the zero-padded lanes of a
        # layer whose channels are no multiple of the block, which only the
        # compiled layer knows (`vdla run` reports its real GEMM utilization).
        details = {
            "gemm_uops_per_cycle": accumulating_uops / cycles if cycles else 0.0,
            "accumulating_gemm_uops": accumulating_uops,
            "rtl_cycle_counter": counters.get("cycles", 0),
            "modules": modules,
            "dram_bytes_read": memory["read_beats"] * model.bus_bytes,
            "dram_bytes_written": memory["write_beats"] * model.bus_bytes,
            "dram_bytes_strobed": memory["write_bytes"],
            "memory": memory,
            "status": model.status(),
            "model": str(self.build.directory),
        }
        for module, figures in modules.items():
            for kind in ("busy", "wait_token", "wait_mem"):
                details[f"{module}_{kind}"] = figures[kind]
        if self.trace is not None:
            details["trace"] = str(self.trace)
        if self.activity:
            details["activity"] = model.activity()
            details["activity_bin_cycles"] = model.activity_bin_cycles()
        return RunResult(cycles=cycles, counters=counters, details=details)


register_backend("rtl", RtlSimulator,
                 run_options=("trace", "cycle_limit", "max_uop_executions", "activity",
                              "activity_window", "progress", "progress_every"))
