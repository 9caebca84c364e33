"""The cycle-accurate tier: the Verilator model of the accelerator, driven through ctypes.

`RtlSimulator` (registered as backend ``"rtl"``) builds or finds the cached
native model of a config (`sim.rtl.build`), copies the DRAM image into the
C++ DRAM model, pulses ``start`` and lets the harness step the clock in native
code until ``done`` — in slices, so Ctrl-C still works — then copies the image
back. A program that does not finish within the cycle limit raises
`sim.errors.DeadlockError` listing the state of every queue from the chip's
status outputs. `RtlModel` is the thin binding over one loaded library, for
tests and tools that want to step the model themselves.
"""

from __future__ import annotations

import ctypes
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from vdla.hw.cache import entry_problem
from vdla.hw.config import HwConfig
from vdla.hw.counters import ACTIVITY_STATES, STATUS_BITS
from vdla.sim.backend import RunResult, register_backend
from vdla.sim.checker import MAX_UOP_EXECUTIONS, check_program
from vdla.sim.errors import AddressError, DeadlockError
from vdla.sim.rtl.build import ModelBuild, RtlBuildError, RunStatus, build_model

__all__ = ["RtlSimulator", "RtlModel", "default_cycle_limit"]

DONE, TIMEOUT, MEMORY_ERROR, NOT_STARTED = RunStatus
# Cycles stepped per native call: long enough to amortise the call, short
# enough (~0.1-1 s) that KeyboardInterrupt is seen promptly.
STEP_SLICE = 1 << 20
# Cycle limit when the program cannot be decoded to estimate its length.
FALLBACK_CYCLE_LIMIT = 50_000_000
# Activity runs kept per module before the record turns into cycle bins (then
# at most this many segments, ~24 bytes each, come out per module).
ACTIVITY_MAX_SEGMENTS = 1 << 16

_LIBRARIES: dict[Path, ctypes.CDLL] = {}
_LIBRARIES_LOCK = threading.Lock()


def _load_library(path: Path) -> ctypes.CDLL:
    with _LIBRARIES_LOCK:
        if path in _LIBRARIES:
            return _LIBRARIES[path]
        # A ModelBuild may be older than this load: its library is checked again first.
        problem = entry_problem(path.parent)
        if problem is not None:
            raise RtlBuildError(f"the RTL model {path.parent} changed after it was built "
                                f"({problem}); build_model builds it again")
        lib = ctypes.CDLL(str(path))  # RTLD_LOCAL: several models can coexist
        handle, u32, u64, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
        u8p = ctypes.POINTER(ctypes.c_uint8)
        signatures = {
            "vdla_build_id": ([], ctypes.c_char_p),
            "vdla_bus_bits": ([], u32),
            "vdla_read_latency": ([], u32),
            "vdla_has_trace": ([], i32),
            "vdla_num_counters": ([], i32),
            "vdla_num_status": ([], i32),
            "vdla_num_memory_stats": ([], i32),
            "vdla_counter_name": ([i32], ctypes.c_char_p),
            "vdla_status_name": ([i32], ctypes.c_char_p),
            "vdla_memory_stat_name": ([i32], ctypes.c_char_p),
            "vdla_create": ([u64], handle),
            "vdla_destroy": ([handle], None),
            "vdla_dram_size": ([handle], u64),
            "vdla_dram_resize": ([handle, u64], None),
            "vdla_dram_write": ([handle, u64, u8p, u64], i32),
            "vdla_dram_read": ([handle, u64, u8p, u64], i32),
            "vdla_set_backpressure": ([handle, u32, u64], None),
            "vdla_trace_open": ([handle, ctypes.c_char_p], i32),
            "vdla_trace_close": ([handle], None),
            "vdla_start": ([handle, u32, u32], i32),
            "vdla_step": ([handle, u64], i32),
            "vdla_run": ([handle, u32, u32, u64], i32),
            "vdla_cycles": ([handle], u64),
            "vdla_done": ([handle], i32),
            "vdla_error": ([handle], ctypes.c_char_p),
            "vdla_read_counters": ([handle, ctypes.POINTER(u32)], None),
            "vdla_read_status": ([handle, ctypes.POINTER(u32)], None),
            "vdla_read_memory_stats": ([handle, ctypes.POINTER(u64)], None),
            "vdla_memory_queues": ([handle, ctypes.POINTER(u64)], None),
            "vdla_num_activity": ([], i32),
            "vdla_activity_name": ([i32], ctypes.c_char_p),
            "vdla_activity_enable": ([handle, i32, u64, u64, u64], None),
            "vdla_activity_read": ([handle, i32, ctypes.POINTER(u64), ctypes.POINTER(u64),
                                    u8p, u64], ctypes.c_int64),
            "vdla_activity_bin_cycles": ([handle, i32], u64),
        }
        for name, (arguments, result) in signatures.items():
            function = getattr(lib, name)
            function.argtypes = arguments
            function.restype = result
        _LIBRARIES[path] = lib
        return lib


class RtlModel:
    """One instance of a built model: the design, its DRAM and the host interface.

    Parameters
    ----------
    build : ModelBuild
        A model from `sim.rtl.build.build_model`.
    dram_bytes : int
        Initial DRAM size (``load_dram`` resizes it to the image).
    """

    def __init__(self, build: ModelBuild, dram_bytes: int = 0):
        self.build = build
        self._lib = _load_library(build.library)
        lib = self._lib
        self.counter_names = tuple(lib.vdla_counter_name(i).decode()
                                   for i in range(lib.vdla_num_counters()))
        self.status_names = tuple(lib.vdla_status_name(i).decode()
                                  for i in range(lib.vdla_num_status()))
        self.memory_stat_names = tuple(lib.vdla_memory_stat_name(i).decode()
                                       for i in range(lib.vdla_num_memory_stats()))
        self.activity_names = tuple(lib.vdla_activity_name(i).decode()
                                    for i in range(lib.vdla_num_activity()))
        self.bus_bytes = lib.vdla_bus_bits() // 8
        self.read_latency = lib.vdla_read_latency()
        self._handle = lib.vdla_create(dram_bytes)
        self._trace_open = False

    # ------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Free the native model (closing its trace); later calls do nothing."""
        if self._handle:
            self._lib.vdla_destroy(self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "RtlModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ DRAM
    @property
    def dram_size(self) -> int:
        """Bytes of the model's DRAM."""
        return self._lib.vdla_dram_size(self._handle)

    def load_dram(self, image: np.ndarray) -> None:
        """Make the model's DRAM a copy of ``image`` (uint8, resized to fit)."""
        image = np.ascontiguousarray(image, dtype=np.uint8).reshape(-1)
        self._lib.vdla_dram_resize(self._handle, image.size)
        pointer = image.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        if self._lib.vdla_dram_write(self._handle, 0, pointer, image.size):
            raise AssertionError("DRAM copy-in out of range")  # resized above: cannot happen

    def store_dram(self, image: np.ndarray) -> None:
        """Copy the model's DRAM into ``image`` (uint8, C-contiguous, same size)."""
        if image.dtype != np.uint8 or not image.flags.c_contiguous or image.size != self.dram_size:
            raise ValueError("store_dram needs a C-contiguous uint8 array of the DRAM's size "
                             f"({self.dram_size} bytes)")
        pointer = image.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        self._lib.vdla_dram_read(self._handle, 0, pointer, image.size)

    def read_dram(self, offset: int = 0, size: int | None = None) -> np.ndarray:
        """A copy of ``size`` DRAM bytes from ``offset``."""
        size = self.dram_size - offset if size is None else size
        out = np.empty(size, dtype=np.uint8)
        if self._lib.vdla_dram_read(self._handle, offset, out.ctypes.data_as(
                ctypes.POINTER(ctypes.c_uint8)), size):
            raise ValueError(f"DRAM bytes [{offset}, {offset + size}) are outside the "
                             f"{self.dram_size}-byte DRAM")
        return out

    # ------------------------------------------------------------ control
    def set_backpressure(self, percent: int, seed: int = 1) -> None:
        """Make the memory stall randomly ``percent`` % of cycles (0 turns it off)."""
        self._lib.vdla_set_backpressure(self._handle, int(percent), int(seed))

    def open_trace(self, path: str | Path) -> None:
        """Write an FST waveform of the following cycles to ``path``.

        Raises
        ------
        ValueError
            The model was built without ``trace=True``.
        OSError
            The file cannot be opened.
        """
        if not self._lib.vdla_has_trace():
            raise ValueError("this model was built without tracing; build it with trace=True")
        if self._lib.vdla_trace_open(self._handle, str(path).encode()):
            raise OSError(f"cannot open FST trace {path}")
        self._trace_open = True

    def close_trace(self) -> None:
        """Flush and close the waveform, if one is open."""
        self._lib.vdla_trace_close(self._handle)
        self._trace_open = False

    def record_activity(self, enabled: bool = True, *,
                        max_segments: int = ACTIVITY_MAX_SEGMENTS,
                        window: tuple[int, int | None] | None = None) -> None:
        """Record each module's activity from the next ``start`` on (or stop).

        Parameters
        ----------
        enabled : bool
        max_segments : int
            Runs kept per module exactly; beyond that the record turns into
            power-of-two cycle bins (exact totals per state, order within a bin
            lost) holding at most about this many segments.
        window : (int, int or None), optional
            Record only cycles ``start <= cycle < end`` since start (``None``:
            no end), to see a part of a long run at full resolution.
        """
        if max_segments < 8:
            raise ValueError(f"max_segments must be at least 8, got {max_segments}")
        begin, end = window if window is not None else (0, None)
        if begin < 0 or (end is not None and end <= begin):
            raise ValueError(f"activity window must satisfy 0 <= start < end, got {window}")
        self._lib.vdla_activity_enable(self._handle, int(bool(enabled)), int(max_segments),
                                       int(begin), int(end or 0))

    def activity(self, *, idle: bool = False) -> dict[str, list[tuple[int, int, str]]]:
        """The recorded activity: ``{module: [(start_cycle, end_cycle, state), ...]}``.

        Intervals are half-open, in cycles since start, ordered and disjoint;
        ``state`` is a name of `hw.counters.ACTIVITY_STATES`; idle runs are
        left out unless ``idle``.
        """
        out = {}
        for index, module in enumerate(self.activity_names):
            count = self._lib.vdla_activity_read(self._handle, index, None, None, None, 0)
            starts = np.empty(count, dtype=np.uint64)
            ends = np.empty(count, dtype=np.uint64)
            states = np.empty(count, dtype=np.uint8)
            if count:
                u64p = ctypes.POINTER(ctypes.c_uint64)
                self._lib.vdla_activity_read(self._handle, index, starts.ctypes.data_as(u64p),
                                             ends.ctypes.data_as(u64p),
                                             states.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)),
                                             count)
            keep = np.ones(count, dtype=bool) if idle else states != 0
            out[module] = [(int(a), int(b), ACTIVITY_STATES[c])
                           for a, b, c in zip(starts[keep].tolist(), ends[keep].tolist(),
                                              states[keep].tolist())]
        return out

    def activity_bin_cycles(self) -> dict[str, int]:
        """Cycles per bin of each module's record (1: exact)."""
        return {module: int(self._lib.vdla_activity_bin_cycles(self._handle, index))
                for index, module in enumerate(self.activity_names)}

    def start(self, insn_addr: int, insn_count: int) -> int:
        """Reset the design and memory queues and pulse ``start``; returns a status code."""
        return self._lib.vdla_start(self._handle, insn_addr, insn_count)

    def step(self, cycles: int) -> int:
        """Run up to ``cycles`` cycles, stopping at ``done``: DONE, TIMEOUT or MEMORY_ERROR."""
        return self._lib.vdla_step(self._handle, cycles)

    def run(self, insn_addr: int, insn_count: int, cycle_limit: int,
            on_slice: Callable[[int], None] | None = None) -> int:
        """Start and step in slices until done, an error, or ``cycle_limit`` cycles.

        ``on_slice(cycles)`` is called after every slice of `STEP_SLICE` cycles.
        """
        status = self.start(insn_addr, insn_count)
        while status == DONE and not self.done:
            remaining = cycle_limit - self.cycles
            if remaining <= 0:
                return TIMEOUT
            status = self.step(min(STEP_SLICE, remaining))
            if status == TIMEOUT and self.cycles < cycle_limit:
                status = DONE  # the slice ended, not the limit
            if on_slice is not None and not self.done:
                on_slice(self.cycles)
        return status

    @property
    def cycles(self) -> int:
        """Cycles since the last ``start`` (the start cycle included)."""
        return self._lib.vdla_cycles(self._handle)

    @property
    def done(self) -> bool:
        """The design's ``done`` output."""
        return bool(self._lib.vdla_done(self._handle))

    @property
    def error(self) -> str:
        """The first memory protocol or range error since start ('' if none)."""
        return self._lib.vdla_error(self._handle).decode()

    def counters(self) -> dict[str, int]:
        """The design's event counters (`hw.counters.rtl_counters`) by name."""
        values = (ctypes.c_uint32 * len(self.counter_names))()
        self._lib.vdla_read_counters(self._handle, values)
        return dict(zip(self.counter_names, map(int, values)))

    def status(self) -> dict[str, int]:
        """The design's status outputs (`hw.counters.RTL_STATUS`) by name."""
        values = (ctypes.c_uint32 * len(self.status_names))()
        self._lib.vdla_read_status(self._handle, values)
        return dict(zip(self.status_names, map(int, values)))

    def memory_stats(self) -> dict[str, int]:
        """What the DRAM model saw: requests, beats, bytes written, stall cycles."""
        values = (ctypes.c_uint64 * len(self.memory_stat_names))()
        self._lib.vdla_read_memory_stats(self._handle, values)
        return dict(zip(self.memory_stat_names, map(int, values)))

    def memory_queues(self) -> dict[str, int]:
        """Read bursts accepted but not fully answered, write bursts still owed data,
        write bursts owed their response."""
        values = (ctypes.c_uint64 * 3)()
        self._lib.vdla_memory_queues(self._handle, values)
        return dict(zip(("read_bursts_pending", "write_bursts_owed_data",
                         "write_bursts_owed_response"), map(int, values)))


def _decode_instructions(config: HwConfig, dram: np.ndarray, insn_offset: int,
                         insn_count: int) -> list | None:
    from vdla.hw import isa
    try:
        return isa.decode_program(dram[insn_offset:insn_offset + insn_count * isa.INSN_BYTES],
                                  config)
    except (isa.IsaError, ValueError):
        return None


def default_cycle_limit(config: HwConfig, instructions: list | None) -> int:
    """A generous bound on a program's cycles: 8x a serial estimate plus 100 k.

    The estimate charges every instruction a fixed overhead, every load and
    store row a full read latency, every element its bus beats and every
    micro-op one cycle, as if nothing overlapped.
    """
    from vdla.hw import isa
    if instructions is None:
        return FALLBACK_CYCLE_LIMIT
    latency = config.dram_read_latency
    estimate = 0
    for insn in instructions:
        estimate += 64 + latency
        if isinstance(insn, (isa.Load, isa.Store)):
            kind = insn.memory_type.kind
            estimate += insn.padded_y * (latency + 8 + insn.padded_x * config.beats(kind))
        elif isinstance(insn, (isa.Gemm, isa.Alu)):
            estimate += insn.iter_out * insn.iter_in * (max(0, insn.uop_end - insn.uop_begin) + 4)
    return 100_000 + 8 * estimate


def _blocked_instructions(instructions: list | None, status: dict[str, int],
                          tokens: dict[str, int], depth: int) -> tuple[list[str], int | None]:
    """Where each module stopped, from its retired count: ``["compute blocked at ..."]``."""
    from vdla.hw import isa
    from vdla.sim.errors import describe_instruction
    if instructions is None:
        return [], None
    order = isa.MODULES
    queues: dict[str, list[int]] = {module: [] for module in order}
    for index, insn in enumerate(instructions):
        queues[isa.MODULES[isa.module_of(insn)]].append(index)
    lines, first = [], None
    for position, module in enumerate(order):
        retired = status.get(f"retired_{module}")
        queue = queues[module]
        if retired is None or len(queue) >= 1 << STATUS_BITS:  # status counters wrap
            continue
        if retired >= len(queue):
            lines.append(f"{module} done ({len(queue)} instructions)")
            continue
        index = queue[retired]
        insn = instructions[index]
        first = index if first is None else min(first, index)
        waits, fulls = [], []
        for flag in isa.DEPENDENCY_FLAGS:
            queue = isa.flag_queue(position, flag) if getattr(insn, flag) else None
            if queue is None:
                continue
            label = "->".join(isa.MODULES[m] for m in queue)
            held = tokens.get(isa.TOKEN_QUEUES[queue], 0)
            if flag.startswith("pop") and held == 0:
                waits.append(f"{label} (empty)")
            elif flag.startswith("push") and held >= depth:
                fulls.append(f"{label} (full, {depth})")
        where = describe_instruction(index, insn)
        if waits:
            lines.append(f"{module} blocked at {where} waiting to pop from {', '.join(waits)}")
        elif fulls:
            lines.append(f"{module} blocked after {where} pushing into {', '.join(fulls)}")
        else:
            lines.append(f"{module} stopped at {where} (not waiting for a token)")
    return lines, first


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
            raise TypeError(f"unknown option(s) for the rtl simulator: {', '.join(sorted(options))}"
                            " (known: trace, cycle_limit, backpressure, seed, verilog, build, "
                            "activity, activity_window, activity_segments, check, "
                            "progress_every, max_uop_executions)")
        if cycle_limit is not None and cycle_limit <= 0:
            raise ValueError(f"cycle_limit must be positive, got {cycle_limit}")
        if not 0 <= backpressure < 100:
            raise ValueError(f"backpressure is a percentage in [0, 100), got {backpressure}")
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
        instructions = _decode_instructions(self.config, dram, insn_offset, insn_count)
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
            message, first = self._hang_message(insn_count, limit, instructions)
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

    def _hang_message(self, insn_count: int, limit: int,
                      instructions: list | None) -> tuple[str, int | None]:
        status = self.model.status()
        queues = self.model.memory_queues()
        tokens = {name.removeprefix("tokens_"): value for name, value in status.items()
                  if name.startswith("tokens_")}
        token_text = ", ".join(f"{name.replace('_to_', '->')} {value}"
                               for name, value in tokens.items())
        commands = ", ".join(f"{name.removeprefix('cmds_')} {status[name]}"
                             for name in status if name.startswith("cmds_"))
        retired = ", ".join(f"{name.removeprefix('retired_')} {status[name]}"
                            for name in status if name.startswith("retired_"))
        other = ", ".join(f"{name} {value}" for name, value in status.items()
                          if not name.startswith(("tokens_", "cmds_", "retired_", "fetched")))
        blocked, first = _blocked_instructions(instructions, status, tokens,
                                               self.config.token_queue_depth)
        lines = [
            f"the program did not finish within {limit} cycles (rtl, config {self.config.name!r}): "
            f"fetched {status.get('fetched', '?')} of {insn_count} instructions",
            *[f"  {line}" for line in blocked],
            f"  retired: {retired}",
            f"  token queues: {token_text}",
            f"  command queues waiting: {commands}",
            f"  DRAM: {queues['read_bursts_pending']} read bursts pending, "
            f"{queues['write_bursts_owed_data']} write bursts owed data"
            + (f", {queues['write_bursts_owed_response']} owed a response"
               if self.config.memory_system.write_response else ""),
        ]
        if other:
            lines.append(f"  other status: {other}")
        if not blocked:
            lines.append("  (a module waits for a dependency token that is never pushed, or the "
                         "program lacks FINISH)")
        return "\n".join(lines), first

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


register_backend("rtl", RtlSimulator)
