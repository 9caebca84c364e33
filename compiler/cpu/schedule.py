"""The CPU schedule: its declared knobs, the space they span, and a cost model.

A `CpuSchedule` says how `compiler.cpu.codegen` turns a convolution (a dense
layer is a 1x1 convolution over a 1 x M image) into C:

- ``lanes``: the vector width in 32-bit lanes (16 = one AVX-512 register, 8 = AVX2);
- ``oc_vectors`` x ``ow_tile``: the register tile, ``oc_vectors * lanes``
  output channels by ``ow_tile`` output pixels of one row, held in
  ``oc_vectors * ow_tile`` accumulator registers for the whole reduction;
- ``ic_block``: the input-channel block of the blocked data layout
  ``N C/ic_block H W ic_block`` (NCHW[x]c) and of the weights
  ``K/ocb C/ic_block KH KW ic_block/4 ocb 4`` (int8) or ``... ic_block ocb`` (fp32);
- ``loop_order``: ``"block_kernel"`` (channel block outside the kernel taps)
  or ``"kernel_block"`` (taps outside);
- ``unroll``: unroll factor of the innermost channel loop;
- ``parallel``: the loops split between threads, ``"rows"`` (batch x output rows),
  ``"channels"`` (batch x output-channel blocks) or ``"both"``.

The space is declared apart from the search (`cpu_space` declares the knobs,
`cpu_knob_space` yields the legal candidates, `estimate_cpu_cost` scores one,
`default_cpu_schedule` takes the minimum), so a tuner (`vdla.tune`'s ``cpu``
target) can measure the same space instead of estimating it.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Iterator

from vdla.compiler.errors import ScheduleError, check_mode
from vdla.compiler.knobs import KnobSpace
from vdla.records import JsonRecord
from vdla.compiler.ops import _ConvOutput
from vdla.ints import ceil_div

__all__ = ["CpuSchedule", "CpuProblem", "CpuSpace", "cpu_space", "cpu_knob_space",
           "estimate_cpu_cost", "default_cpu_schedule", "CPU_MODES", "CPU_LOOP_ORDERS",
           "PARALLEL_AXES", "epilogue_entries"]

CPU_MODES = ("int8", "fp32")
CPU_LOOP_ORDERS = ("block_kernel", "kernel_block")
PARALLEL_AXES = ("rows", "channels", "both")
# The options `cpu_space` declares; their largest also bound every schedule,
# since beyond them a kernel's unrolled C (oc_vectors x ow_tile accumulators,
# unroll copies) or its packed workspace (ic_block) grows for no gain.
OC_VECTORS = (1, 2, 3, 4)
MAX_OW_TILE = 28
IC_BLOCKS = (16, 32, 64, 128, 256)
UNROLLS = (1, 2, 4)
_UPPER_BOUNDS = {"oc_vectors": max(OC_VECTORS), "ow_tile": MAX_OW_TILE,
                 "ic_block": max(IC_BLOCKS), "unroll": max(UNROLLS)}
# Vector registers left for weights and a broadcast operand besides the accumulators.
_SPARE_REGISTERS = 3


def epilogue_entries(problem: "CpuProblem", schedule: "CpuSchedule") -> int:
    """Entries of a kernel's epilogue vector (the biases, padded as its C reads them).

    Per-channel multipliers come after them, laid out the same way
    (`compiler.cpu.kernel.CpuKernel.set_weights`).
    """
    if problem.depthwise:  # the channels in whole vectors, then one spare vector
        return ceil_div(problem.out_channels, schedule.lanes) * schedule.lanes + schedule.lanes
    # Each group's channels in whole register tiles, then one spare vector.
    return (problem.groups * ceil_div(problem.group_out, schedule.oc_block) * schedule.oc_block
            + schedule.lanes)


@dataclasses.dataclass(frozen=True)
class CpuProblem(_ConvOutput):
    """The convolution a CPU kernel computes, normalised (dense: N=1, H=1, W=batch).

    ``data_strides`` and ``out_strides`` are element strides of the user's
    arrays along (n, c, h, w) and (n, k, h, w), so one kernel reads NCHW
    tensors and dense (M, K) matrices alike. ``padding`` is (top, left,
    bottom, right); ``groups`` and ``dilation`` as in `compiler.ops.Conv2d`.
    """

    batch: int
    in_channels: int
    out_channels: int
    height: int
    width: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]
    data_strides: tuple[int, int, int, int]
    out_strides: tuple[int, int, int, int]
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1

    @property
    def group_in(self) -> int:
        """Input channels of one group (the reduction's channels)."""
        return self.in_channels // self.groups

    @property
    def group_out(self) -> int:
        """Output channels of one group."""
        return self.out_channels // self.groups

    @property
    def depthwise(self) -> bool:
        """One input and one output channel per group: `compiler.cpu.depthwise`'s kernel."""
        return self.groups > 1 and self.group_in == self.group_out == 1

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * self.out_height * self.out_width
                * self.group_in * self.kernel[0] * self.kernel[1])

    @classmethod
    def from_op(cls, op) -> "CpuProblem":
        """The problem of a `compiler.ops.Conv2d` or `Dense`."""
        if op.kind == "dense":
            m, k_in, k_out = op.batch, op.in_features, op.out_features
            return cls(1, k_in, k_out, 1, m, (1, 1), (1, 1), (0, 0, 0, 0),
                       data_strides=(0, 1, 0, k_in), out_strides=(0, 1, 0, k_out))
        c, h, w, k = op.in_channels, op.height, op.width, op.out_channels
        oh, ow = op.out_height, op.out_width
        return cls(op.batch, c, k, h, w, op.kernel, op.stride, op.padding,
                   data_strides=(c * h * w, h * w, w, 1), out_strides=(k * oh * ow, oh * ow, ow, 1),
                   dilation=op.dilation, groups=op.groups)


@dataclasses.dataclass(frozen=True)
class CpuSchedule(JsonRecord):
    """Knobs of one CPU kernel (see the module docstring for each)."""

    record_kind: ClassVar[str] = "CPU schedule"
    record_error: ClassVar[type[Exception]] = ScheduleError

    lanes: int = 16
    oc_vectors: int = 2
    ow_tile: int = 12
    ic_block: int = 64
    loop_order: str = "block_kernel"
    unroll: int = 4
    parallel: str = "both"

    def __post_init__(self):
        if not isinstance(self.lanes, int) or isinstance(self.lanes, bool) \
                or self.lanes not in (8, 16):
            raise ScheduleError(f"lanes: expected 8 or 16, got {self.lanes!r}")
        for name, bound in _UPPER_BOUNDS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ScheduleError(f"{name}: expected a positive integer, got {value!r}")
            if value > bound:
                raise ScheduleError(f"{name}: at most {bound} (the knob space's largest), "
                                    f"got {value}")
        if self.ic_block % 4:
            raise ScheduleError(f"ic_block: expected a multiple of 4 (the int8 dot product's "
                                f"group), got {self.ic_block}")
        if self.loop_order not in CPU_LOOP_ORDERS:
            raise ScheduleError(f"loop_order: expected one of {', '.join(CPU_LOOP_ORDERS)}, "
                                f"got {self.loop_order!r}")
        if self.parallel not in PARALLEL_AXES:
            raise ScheduleError(f"parallel: expected one of {', '.join(PARALLEL_AXES)}, "
                                f"got {self.parallel!r}")

    @property
    def oc_block(self) -> int:
        """Output channels of one register tile."""
        return self.lanes * self.oc_vectors

    @property
    def accumulators(self) -> int:
        return self.oc_vectors * self.ow_tile

def _registers(features: dict) -> int:
    return 32 if features.get("avx512") else 16


def _lane_choices(features: dict) -> tuple[int, ...]:
    return (16, 8) if features.get("avx512") else (8,)


def _problem_and_features(problem, features):
    if not isinstance(problem, CpuProblem):
        problem = CpuProblem.from_op(problem)
    if features is None:
        from vdla.compiler.cpu.build import cpu_features
        features = cpu_features()
    return problem, features


@dataclasses.dataclass(frozen=True)
class CpuSpace(KnobSpace):
    """The declared knobs of one CPU problem, each with its options (`cpu_space`).

    Points are option indices in `knobs` order (`compiler.knobs.KnobSpace`);
    a point is legal (`legal`) when its accumulators and their operands fit
    the ``registers`` and no vector of output channels is wholly padding.
    """

    schedule_type: ClassVar[type] = CpuSchedule
    problem: CpuProblem
    registers: int
    knobs: tuple[tuple[str, tuple], ...]

    def legal(self, schedule: CpuSchedule) -> bool:
        """Whether ``schedule`` is one of this space's candidates."""
        try:
            self.point(schedule)
        except ScheduleError:
            return False
        lanes, vectors = schedule.lanes, schedule.oc_vectors
        if vectors > 1 and (vectors - 1) * lanes >= self.problem.group_out:
            return False
        return vectors * schedule.ow_tile + vectors + _SPARE_REGISTERS - 1 <= self.registers

    def candidates(self) -> Iterator[CpuSchedule]:
        """The legal schedules, in row-major order of their points."""
        for point in self.points():
            schedule = self.schedule(point)
            if self.legal(schedule):
                yield schedule


def cpu_space(problem, features: dict | None = None) -> CpuSpace:
    """Declare the knobs of ``problem`` on a CPU with ``features``.

    Parameters
    ----------
    problem : CpuProblem, compiler.ops.Conv2d or compiler.ops.Dense
    features : dict, optional
        `compiler.cpu.build.cpu_features` output (``avx512``, ``vnni`` ...);
        this machine's by default.
    """
    problem, features = _problem_and_features(problem, features)
    channels = ceil_div(problem.group_in, 4) * 4
    largest = max(IC_BLOCKS)
    ic_blocks = sorted({b for b in IC_BLOCKS if b < channels} | {min(channels, largest)})
    # The depthwise kernel (`compiler.cpu.depthwise`) has no channel reduction
    # and one vector of channels per tile: one option for those knobs.
    depthwise = problem.depthwise
    knobs = (("lanes", _lane_choices(features)), ("oc_vectors", (1,) if depthwise else OC_VECTORS),
             ("ow_tile", tuple(range(1, min(problem.out_width, MAX_OW_TILE) + 1))),
             ("ic_block", tuple(ic_blocks)),
             ("loop_order", CPU_LOOP_ORDERS[:1] if depthwise else CPU_LOOP_ORDERS),
             ("unroll", (1,) if depthwise else UNROLLS), ("parallel", PARALLEL_AXES))
    return CpuSpace(problem, _registers(features), knobs)


def cpu_knob_space(problem, mode: str = "int8",
                   features: dict | None = None) -> Iterator[CpuSchedule]:
    """Every legal schedule of ``problem`` on a CPU with ``features`` (`cpu_space`).

    Parameters
    ----------
    problem : CpuProblem, compiler.ops.Conv2d or compiler.ops.Dense
    mode : str
        ``"int8"`` or ``"fp32"`` (both have the same candidates).
    features : dict, optional
        As for `cpu_space`.

    Yields
    ------
    CpuSchedule
        Candidates whose accumulators fit the register file and whose blocks
        do not exceed the problem (a tuner measures these).
    """
    return cpu_space(problem, features).candidates()


def estimate_cpu_cost(problem: CpuProblem, schedule: CpuSchedule, mode: str,
                      threads: int = 2) -> float:
    """Estimated cycles of one run (a model for ranking, not a prediction to quote).

    Counts the inner steps of the register tile, each limited by its
    multiply-adds (one vector per cycle) or its loads (two per cycle), adds the
    work wasted on padded channels and partial tiles, divides by the threads
    the parallel loops can keep busy, and penalises a weight block that spills
    out of a 32 KiB L1 data cache.
    """
    lanes, vectors, tile = schedule.lanes, schedule.oc_vectors, schedule.ow_tile
    oh, ow = problem.out_height, problem.out_width
    kh, kw = problem.kernel
    if problem.depthwise:
        return _depthwise_cost(problem, schedule, mode, threads)
    group = 4 if mode == "int8" else 1  # channels one vector instruction reduces
    channel_steps = ceil_div(problem.group_in, schedule.ic_block) * schedule.ic_block // group
    full, tail = divmod(ow, tile)

    def tile_cycles(width: int) -> float:
        fmas = vectors * width
        loads = vectors + width
        per_step = max(fmas, loads / 2) + (4.0 / schedule.unroll)  # loop overhead per step
        width_factor = 512 / (lanes * 32)  # a 256-bit vector does half the work
        return channel_steps * kh * kw * per_step / width_factor + 4 * fmas  # + epilogue

    row = full * tile_cycles(tile) + (tile_cycles(tail) if tail else 0)
    oc_blocks = problem.groups * ceil_div(problem.group_out, schedule.oc_block)
    # Wider registers than channels waste lanes; 256-bit vectors are half speed.
    total = problem.batch * oc_blocks * oh * row
    items = {"rows": problem.batch * oh, "channels": problem.batch * oc_blocks,
             "both": problem.batch * oh * oc_blocks}[schedule.parallel]
    balance = ceil_div(items, threads) / (items / threads)
    element = 1 if mode == "int8" else 4
    weight_block = schedule.ic_block * kh * kw * schedule.oc_block * element
    input_rows = kh * (ow * problem.stride[1] + kw) * schedule.ic_block * element
    spill = 1.0 + 0.15 * max(0.0, (weight_block + input_rows) / 32768 - 1.0)
    order = 1.0 if schedule.loop_order == "block_kernel" else 1.02
    return total / threads * balance * spill * order


def _depthwise_cost(problem: CpuProblem, schedule: CpuSchedule, mode: str,
                    threads: int) -> float:
    """`estimate_cpu_cost` of `compiler.cpu.depthwise`'s kernel: per pixel and tap a
    vector load and a multiply-add (int32 multiplies take two cycles), per tile the
    weights' loads and the epilogue."""
    tile, (kh, kw) = schedule.ow_tile, problem.kernel
    multiply = 2 if mode == "int8" else 1

    def tile_cycles(width: int) -> float:
        return kh * kw * (max(multiply * width, (width + 1) / 2) + 1) + 4 * width

    full, tail = divmod(problem.out_width, tile)
    row = full * tile_cycles(tile) + (tile_cycles(tail) if tail else 0)
    blocks = ceil_div(problem.out_channels, schedule.lanes)
    width_factor = 512 / (schedule.lanes * 32)
    items = {"rows": problem.batch * problem.out_height, "channels": problem.batch * blocks,
             "both": problem.batch * problem.out_height * blocks}[schedule.parallel]
    balance = ceil_div(items, threads) / (items / threads)
    return problem.batch * blocks * problem.out_height * row * width_factor / threads * balance


def default_cpu_schedule(problem, mode: str = "int8", features: dict | None = None,
                         threads: int = 2) -> CpuSchedule:
    """The candidate of `cpu_knob_space` with the lowest `estimate_cpu_cost`.

    ``problem`` and ``features`` as for `cpu_knob_space`.
    """
    check_mode(mode, CPU_MODES)
    problem, features = _problem_and_features(problem, features)
    return min(cpu_knob_space(problem, mode, features),
               key=lambda schedule: estimate_cpu_cost(problem, schedule, mode, threads))
