"""The schedule space: every knob of one layer on one config, with its options.

As AutoTVM's ``cfg.define_split``/``define_knob`` declare a template's knobs,
`schedule_space` declares the knobs of a `compiler.accel.schedule.Schedule` once,
apart from any search: the default search (`compiler.accel.search`) walks a pruned
part of it and the tuners (`vdla.tune`) the whole of it.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from vdla.compiler.errors import ScheduleError, ShapeError
from vdla.compiler.knobs import KnobSpace
from vdla.compiler.ops import ConvGeometry, accelerator_limits
from vdla.compiler.accel.schedule import (Schedule, TilePlan, group_blocks,
                                    max_virtual_threads, plan_tiles)
from vdla.hw.config import HwConfig
from vdla.ints import ceil_div

__all__ = ["ScheduleSpace", "schedule_space", "LOOP_ORDERS", "SPACE_MAX_THREADS",
           "layer_geometry"]

# The space offers at most this many threads: more only shrink every slot.
SPACE_MAX_THREADS = 4
# The output-channel loop at each depth, the others in their natural order:
# where ``k`` sits decides whether input tiles or weights are reused.
LOOP_ORDERS = ("bhwk", "bhkw", "bkhw", "kbhw")


def _balanced(extent: int) -> list[int]:
    """Tile sizes that cut ``extent`` into equal-ish tiles: ceil(extent / n) for each n."""
    return sorted({ceil_div(extent, n) for n in range(1, extent + 1)}, reverse=True)


def layer_geometry(op, config: HwConfig | None = None) -> ConvGeometry:
    """The `ConvGeometry` of a Conv2d or Dense (a geometry stays itself).

    With ``config``, a grouped layer's is the geometry it compiles to there
    (`compiler.ops.accelerator_limits`: groups merged into dense ones keep fewer,
    larger groups), where the accelerator takes it.
    """
    if not hasattr(op, "geometry"):
        return op
    geometry = op.geometry()
    if config is not None and geometry.groups > 1:
        try:
            return accelerator_limits(geometry, config)
        except ShapeError:
            pass        # refused where it compiles; schedules still describe it
    return geometry


@dataclasses.dataclass(frozen=True)
class ScheduleSpace(KnobSpace):
    """The declared knobs of one layer on one config, each with its options.

    As AutoTVM's ``cfg.define_split``/``define_knob`` declare a template's
    knobs, `schedule_space` declares these once; the default search
    (`default_schedule`) and the tuners (`vdla.tune`) both walk them. A point
    is a tuple of option indices, one per knob in `knobs` order
    (`compiler.knobs.KnobSpace`); not every point is legal (`plan` says which
    are).
    """

    schedule_type: ClassVar[type] = Schedule
    geometry: ConvGeometry
    config: HwConfig
    knobs: tuple[tuple[str, tuple], ...]

    def plan(self, schedule: Schedule) -> TilePlan | None:
        """The schedule's `TilePlan` if it is legal here, else None."""
        try:
            return schedule.check(self.geometry, self.config)
        except ScheduleError:
            return None

    def canonical(self, point: tuple[int, ...]) -> tuple[int, ...]:
        """One representative of the points that compile to the same program.

        Loops of one iteration emit nothing, so loop orders that differ only in
        where such loops stand are one order: the representative takes the
        first `LOOP_ORDERS` entry that nests the iterating loops alike. An
        illegal point is its own representative.
        """
        schedule = self.schedule(point)
        plan = self.plan(schedule)
        if plan is None:
            return point
        knob = self.names.index("loop_order")

        def iterating(order: str) -> list[str]:
            return [axis for axis in order if plan.counts[axis] > 1]

        mine = iterating(schedule.loop_order)
        first = next(i for i, order in enumerate(self.knobs[knob][1]) if iterating(order) == mine)
        return point[:knob] + (first,) + point[knob + 1:]


def schedule_space(op, config: HwConfig, latency_hiding: bool = True) -> ScheduleSpace:
    """Declare the knobs of a layer (Conv2d, Dense or their geometry) on a config.

    Tile sizes are the balanced cuts of each extent (`_balanced`; a grouped
    layer's tile_k the divisors of a group's blocks), threads run
    from 1 to the token queues' limit (`max_virtual_threads`, at most
    `SPACE_MAX_THREADS`), loop orders are `LOOP_ORDERS`, and either operand may
    be resident.
    """
    geometry = layer_geometry(op, config)
    blocks = plan_tiles(geometry, config, Schedule()).blocks
    threads = min(SPACE_MAX_THREADS, max_virtual_threads(config)) if latency_hiding else 1
    options = {axis: tuple(_balanced(blocks[axis])) for axis in "bhwkc"}
    if geometry.groups > 1:
        # A tile's output channels lie in one group (`plan_tiles`): the divisors
        # of a group's blocks.
        group_k = group_blocks(geometry, config)[0]
        options["k"] = tuple(t for t in range(group_k, 0, -1) if group_k % t == 0)
    knobs = tuple((f"tile_{axis}", options[axis]) for axis in "bhwkc")
    knobs += (("virtual_threads", tuple(range(1, threads + 1))),
              ("loop_order", LOOP_ORDERS),
              ("latency_hiding", (latency_hiding,)),
              ("resident_weights", (False, True)),
              ("resident_input", (False, True)))
    return ScheduleSpace(geometry, config, knobs)

