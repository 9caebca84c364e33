"""The GPU schedule: its declared knobs, the space they span, and a cost model.

A `GpuSchedule` says how `compiler.gpu.codegen` tiles the implicit GEMM of a
convolution (``M`` = output pixels ``N*OH*OW``, ``N`` = output channels,
``R`` = reduction ``KH*KW*ceil(C/group)`` in words of ``group`` channels: 4
int8 channels packed in one 32-bit word for ``__dp4a``, 1 for fp16/fp32):

- ``block_m`` x ``block_n``: the thread block's output tile (pixels x channels);
- ``block_k``: reduction words staged in shared memory per step of the K loop;
- ``warps_m`` x ``warps_n``: the block's warps, each owning a warp tile of
  ``block_m / warps_m`` x ``block_n / warps_n`` outputs;
- ``thread_m`` x ``thread_n``: each thread's register tile inside its warp
  tile (the 32 lanes are ``lanes_m`` x ``lanes_n``, derived).

The space is declared apart from the search (`gpu_knob_space` yields legal
candidates, `estimate_gpu_cost` scores one, `default_gpu_schedule` takes the
minimum), as the cpu target's is (`compiler.cpu.schedule`). The problem is the
cpu target's normalised convolution, `compiler.cpu.schedule.CpuProblem`.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import ClassVar, Iterator

from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.errors import ScheduleError, check_mode
from vdla.records import JsonRecord
from vdla.ints import ceil_div

__all__ = ["GpuSchedule", "gpu_knob_space", "estimate_gpu_cost", "default_gpu_schedule",
           "GPU_MODES", "GROUP", "WARP", "H100"]

GPU_MODES = ("int8", "fp16", "fp32")
# Reduction channels per shared-memory word: __dp4a reduces 4 int8 pairs at once.
GROUP = {"int8": 4, "fp16": 1, "fp32": 1}
WARP = 32
# Limits the candidates respect and the cost model uses (NVIDIA H100 SXM, sm_90:
# CUDA C Programming Guide, "Technical Specifications per Compute Capability").
H100 = {"sms": 132, "static_shared_bytes": 48 * 1024, "registers_per_thread": 255,
        "registers_per_sm": 65536, "threads_per_sm": 2048, "max_threads_per_block": 1024}


@dataclasses.dataclass(frozen=True)
class GpuSchedule(JsonRecord):
    """Knobs of one GPU kernel (see the module docstring for each)."""

    record_kind: ClassVar[str] = "GPU schedule"
    record_error: ClassVar[type[Exception]] = ScheduleError

    block_m: int = 64
    block_n: int = 64
    block_k: int = 8
    warps_m: int = 2
    warps_n: int = 2
    thread_m: int = 4
    thread_n: int = 8

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ScheduleError(f"{field.name}: expected a positive integer, got {value!r}")
        for axis in ("m", "n"):
            block, warps, thread = (getattr(self, f"block_{axis}"), getattr(self, f"warps_{axis}"),
                                    getattr(self, f"thread_{axis}"))
            if block % (warps * thread):
                raise ScheduleError(f"block_{axis} {block} is not a multiple of warps_{axis} x "
                                    f"thread_{axis} = {warps * thread}")
        if self.lanes_m * self.lanes_n != WARP:
            raise ScheduleError(
                f"a warp tile of {self.warp_m}x{self.warp_n} outputs with thread tiles of "
                f"{self.thread_m}x{self.thread_n} needs {self.lanes_m * self.lanes_n} lanes, "
                f"not a warp's {WARP}")
        if self.threads > H100["max_threads_per_block"]:
            raise ScheduleError(f"{self.threads} threads per block exceed the GPU's "
                                f"{H100['max_threads_per_block']}")
        shared = max(self.shared_bytes(mode) for mode in GPU_MODES)
        if shared > H100["static_shared_bytes"]:
            raise ScheduleError(f"staged tiles of {shared} bytes ((block_m + block_n) x block_k "
                                f"words) exceed the GPU's {H100['static_shared_bytes']} bytes "
                                "of static shared memory")
        if estimated_registers(self) > H100["registers_per_thread"]:
            raise ScheduleError(f"a {self.thread_m}x{self.thread_n} register tile needs about "
                                f"{estimated_registers(self)} registers a thread, more than the "
                                f"GPU's {H100['registers_per_thread']}")

    @property
    def warp_m(self) -> int:
        return self.block_m // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.block_n // self.warps_n

    @property
    def lanes_m(self) -> int:
        """Lanes of a warp along the pixels (``warp_m / thread_m``)."""
        return self.warp_m // self.thread_m

    @property
    def lanes_n(self) -> int:
        return self.warp_n // self.thread_n

    @property
    def threads(self) -> int:
        return self.warps_m * self.warps_n * WARP

    def shared_bytes(self, mode: str) -> int:
        """Shared memory of the two staged tiles (4-byte words: packed int8 or float)."""
        return (self.block_m + self.block_n) * self.block_k * 4

def reduction_words(problem: CpuProblem, mode: str) -> int:
    """``R``: the implicit GEMM's reduction length in shared-memory words."""
    kh, kw = problem.kernel
    return kh * kw * ceil_div(problem.group_in, GROUP[mode])


def gemm_rows(problem: CpuProblem) -> int:
    """``M``: output pixels over the whole batch."""
    return problem.batch * problem.out_height * problem.out_width


def gpu_knob_space(problem: CpuProblem, mode: str) -> Iterator[GpuSchedule]:
    """Every legal schedule of ``problem`` in ``mode``.

    Yields
    ------
    GpuSchedule
        Candidates whose staged tiles fit the static shared memory, whose
        register tile stays well inside 255 registers a thread, and whose
        tiles do not dwarf the problem (a tuner measures these).
    """
    rows, words = gemm_rows(problem), reduction_words(problem, mode)
    for block_m, block_n, block_k in itertools.product((16, 32, 64, 128), (16, 32, 64, 128),
                                                       (4, 8, 16, 32)):
        # A grouped layer's columns are per group (`tiling.Tiling`): a block
        # tile wider than twice a group's would be mostly padding.
        if block_m >= 2 * rows and block_m > 16 or block_n >= 2 * problem.group_out \
                and block_n > 16 or block_k >= 2 * words and block_k > 4:
            continue
        for warps_m, warps_n, thread_m, thread_n in itertools.product(
                (1, 2, 4), (1, 2, 4), (1, 2, 4, 8), (1, 2, 4, 8)):
            if block_m % (warps_m * thread_m) or block_n % (warps_n * thread_n):
                continue
            if (block_m // warps_m // thread_m) * (block_n // warps_n // thread_n) != WARP:
                continue
            schedule = GpuSchedule(block_m, block_n, block_k, warps_m, warps_n, thread_m,
                                   thread_n)
            if schedule.shared_bytes(mode) > H100["static_shared_bytes"]:
                continue
            if estimated_registers(schedule) > 128:
                continue
            yield schedule


def estimated_registers(schedule: GpuSchedule) -> int:
    """A register count for ranking: accumulators, operand fragments and ~32 for addressing.

    `compiler.gpu.nvcc` measures the real count (``ptxas -v``); tests compare.
    """
    return schedule.thread_m * schedule.thread_n + schedule.thread_m + schedule.thread_n + 32


def estimate_gpu_cost(problem: CpuProblem, schedule: GpuSchedule, mode: str) -> float:
    """Estimated time of one launch in SM cycles (a model for ranking, not a figure to quote).

    Blocks run in waves over the SMs (as many blocks per SM as threads,
    registers and shared memory allow); a block's time is its K loop, each
    step limited by its shared-memory traffic (operand fragments per thread)
    or its arithmetic (one dp4a / FMA per output per word), plus two barriers,
    plus the global loads of the staged tiles. Work on padded rows, channels
    and words counts in full: that is what the GPU spends.
    """
    rows, words = gemm_rows(problem), reduction_words(problem, mode)
    blocks = ceil_div(rows, schedule.block_m) * problem.groups * ceil_div(problem.group_out,
                                                                             schedule.block_n)
    per_sm = max(1, min(H100["threads_per_sm"] // schedule.threads,
                        H100["registers_per_sm"] // (schedule.threads
                                                     * estimated_registers(schedule)),
                        (228 * 1024) // schedule.shared_bytes(mode), 32))
    waves = ceil_div(blocks, H100["sms"] * per_sm)
    steps = ceil_div(words, schedule.block_k)
    warps = schedule.warps_m * schedule.warps_n
    # Per step and warp: a dp4a/FMA per output and word (4 schedulers an SM), fragment reads.
    math = schedule.block_k * schedule.thread_m * schedule.thread_n
    shared = schedule.block_k * (schedule.thread_m + schedule.thread_n)
    staging = (schedule.block_m + schedule.block_n) * schedule.block_k * GROUP[mode] / (
        schedule.threads) * 2
    step = max(math, shared) * max(1, warps * min(per_sm, ceil_div(blocks, H100["sms"])) / 4) \
        + staging + 40  # two __syncthreads and the loop
    launch = 2000  # a launch's fixed cost in cycles (~1-2 us), the same for all candidates
    return launch + waves * (steps * step + schedule.thread_m * schedule.thread_n * 4)


def default_gpu_schedule(problem: CpuProblem, mode: str) -> GpuSchedule:
    """The candidate of `gpu_knob_space` with the lowest `estimate_gpu_cost`."""
    check_mode(mode, GPU_MODES)
    return min(gpu_knob_space(problem, mode),
               key=lambda schedule: estimate_gpu_cost(problem, schedule, mode))
