"""The binding over one built Verilator model: `RtlModel`, through ctypes.

`RtlModel` loads a model's shared library (once per path, after checking the
cache entry it came from: `vdla.cache.entry_problem`), declares the C ABI of
``harness.cpp`` and wraps one instance of the design, its DRAM model and the
host interface: DRAM in and out, start and step, counters, status outputs,
memory statistics, activity records and waveforms. It knows nothing of
programs; `sim.rtl.backend` runs them on it.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path
from typing import Callable

import numpy as np

from vdla.cache import entry_problem
from vdla.hw.counters import ACTIVITY_STATES
from vdla.sim.rtl.build import ModelBuild, RtlBuildError, RunStatus

__all__ = ["RtlModel", "DONE", "TIMEOUT", "MEMORY_ERROR", "NOT_STARTED", "STEP_SLICE",
           "ACTIVITY_MAX_SEGMENTS"]

DONE, TIMEOUT, MEMORY_ERROR, NOT_STARTED = RunStatus
# Cycles stepped per native call: long enough to amortise the call, short
# enough (~0.1-1 s) that KeyboardInterrupt is seen promptly.
STEP_SLICE = 1 << 20
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
