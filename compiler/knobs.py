"""A declared knob space: named knobs, each with its options, and its points.

As AutoTVM's ``cfg.define_knob`` declares a template's knobs, a space lists
each knob of a schedule type once with the options it may take. A point is a
tuple of option indices, one per knob in declaration order; the tuners
(`vdla.tune`) walk points and the log stores schedules, so `KnobSpace` maps
between the two. The accelerator's `compiler.accel.space.ScheduleSpace` and the
CPU's `compiler.cpu.schedule.CpuSpace` are both knob spaces; each says apart
which of its points are legal.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, ClassVar, Iterator

from vdla.compiler.errors import ScheduleError

__all__ = ["KnobSpace"]


class KnobSpace:
    """Mixin for a space with ``knobs`` (``((name, options), ...)``) of ``schedule_type``.

    ``schedule_type`` is a `vdla.records.JsonRecord` whose fields include every knob.
    """

    knobs: tuple[tuple[str, tuple], ...]
    schedule_type: ClassVar[type]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.knobs)

    @property
    def shape(self) -> tuple[int, ...]:
        """Number of options of each knob."""
        return tuple(len(options) for _, options in self.knobs)

    def __len__(self) -> int:
        return math.prod(self.shape)

    def options(self, name: str) -> tuple:
        """The options of one knob."""
        return dict(self.knobs)[name]

    def schedule(self, point: tuple[int, ...]) -> Any:
        """The schedule at a point (option indices)."""
        return self.schedule_type(**{name: options[i]
                                     for (name, options), i in zip(self.knobs, point)})

    def point(self, schedule) -> tuple[int, ...]:
        """The option indices of a schedule; ScheduleError if a knob's value is not offered."""
        point = []
        for name, options in self.knobs:
            value = getattr(schedule, name)
            if value not in options:
                raise ScheduleError(f"schedule.{name}={value!r} is not in this layer's space "
                                    f"(options: {', '.join(map(str, options))})")
            point.append(options.index(value))
        return tuple(point)

    def decode(self, data: dict):
        """A schedule from its ``to_dict`` form (as tuning logs store it)."""
        return self.schedule_type.from_dict(data)

    def points(self) -> Iterator[tuple[int, ...]]:
        """Every point, legal or not, in row-major order."""
        return itertools.product(*(range(n) for n in self.shape))
