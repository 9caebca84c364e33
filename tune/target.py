"""Tuning targets: what a tuner searches and how a candidate is measured.

A `Target` declares a layer's knob space on a config, its default schedule,
the features the learned model sees, what a measurement depends on besides
the config (`design`), and how to measure one schedule for real. The tuner,
the log and the executor know nothing else about the hardware, so another
target plugs in by `register_target` (the cpu target, `tune.cpu_target`). The
accelerator target (`AccelTarget`, ``"accel"``) compiles the schedule, runs
it on the Verilator RTL model through `runtime.runner.AccelRunner` and checks the output
bit for bit against the layer's numpy reference; its cost is the chip's cycle
count.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol

import numpy as np

from vdla.compiler.accel.schedule import Schedule
from vdla.compiler.accel.search import default_schedule
from vdla.compiler.accel.space import ScheduleSpace, schedule_space
from vdla.errors import VdlaError
from vdla.hw.config import HwConfig

__all__ = ["Measurement", "Target", "AccelTarget", "TUNING_TARGETS", "register_target",
           "get_target", "TuneError"]


class TuneError(VdlaError, ValueError):
    """A bad tuning request (unknown target or tuner, unreadable log, ...)."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One measured schedule.

    ``cost`` is in the target's unit (lower is better) and None when the
    schedule failed to compile or run or gave a wrong result (``error`` says
    which); ``details`` holds what the measurement also learned (instruction
    and micro-op counts, seconds spent).
    """

    cost: float | None
    correct: bool
    error: str | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.cost is not None and self.correct


class Target(Protocol):
    """What `vdla.tune` needs from a target.

    Its space needs what `compiler.accel.space.ScheduleSpace` offers the tuners
    and the log: ``shape``, ``points()``, ``schedule(point)``,
    ``point(schedule)``, ``decode(dict)``; its schedules ``to_dict()``.
    """

    name: str
    unit: str
    # Index of a feature that ranks candidates before any measurement (lower
    # first), or None: the xgb tuner then starts at random.
    prior_feature: int | None

    def space(self, op, config: HwConfig) -> ScheduleSpace: ...

    def default(self, op, config: HwConfig) -> Schedule: ...

    def features(self, space: ScheduleSpace, schedule: Schedule) -> np.ndarray | None:
        """The model's view of a schedule; None when it is illegal."""

    def design(self, config: HwConfig) -> str:
        """What a measurement depends on beyond the config's fields and the schedule
        (the Verilog, the CPU and compiler ...): part of every measurement's key."""

    def prepare(self, config: HwConfig, shared: bool,
                progress: Callable[[str], None] | None = None) -> dict:
        """Options every measurement on ``config`` gets (e.g. a prebuilt model when
        workers share this file system)."""

    def measure(self, op, config: HwConfig, schedule: Schedule, options: dict) -> Measurement:
        """Measure one schedule for real (runs in a worker process)."""


class AccelTarget:
    """The accelerator: RTL cycles, every output checked against numpy."""

    name = "accel"
    unit = "cycles"

    @property
    def prior_feature(self) -> int:
        from vdla.tune.features import FEATURE_NAMES
        return FEATURE_NAMES.index("log2_estimate")

    def space(self, op, config: HwConfig) -> ScheduleSpace:
        return schedule_space(op, config)

    def default(self, op, config: HwConfig) -> Schedule:
        return default_schedule(op, config)

    def features(self, space: ScheduleSpace, schedule: Schedule) -> np.ndarray | None:
        from vdla.tune.features import features
        plan = space.plan(schedule)
        return None if plan is None else features(plan)

    def design(self, config: HwConfig) -> str:
        """The Verilog ``config`` generates (`hw.generate.verilog_digest`): a config's
        hash names its parameters, not the design they parameterise, so the same config
        measures different cycles after the RTL changes."""
        from vdla.hw.generate import verilog_digest
        return verilog_digest(config)

    def prepare(self, config: HwConfig, shared: bool,
                progress: Callable[[str], None] | None = None) -> dict:
        from vdla.bench.suite import prepare_backend
        return prepare_backend(config, "rtl", progress, build=shared)

    def measure(self, op, config: HwConfig, schedule: Schedule, options: dict) -> Measurement:
        from vdla.bench.layer_run import run_layer
        from vdla.compiler.workloads import Workload
        layer = run_layer(Workload(op.describe(), op, 1), config, "rtl", schedule=schedule,
                          backend_options=options)
        details = {"instructions": layer.instructions, "uops": layer.uops,
                   "compile_seconds": layer.compile_seconds,
                   "simulation_seconds": layer.simulation_seconds}
        if layer.error is not None or not layer.correct:
            error = layer.error or f"{layer.mismatches} output(s) differ from numpy"
            return Measurement(None, False, error, details)
        return Measurement(float(layer.cycles), True, None, details)


TUNING_TARGETS: dict[str, Target] = {}


def register_target(target: Target) -> None:
    """Make a target available to `vdla tune` by its ``name``."""
    TUNING_TARGETS[target.name] = target


def get_target(name: str) -> Target:
    """The registered target called ``name``.

    Raises
    ------
    TuneError
        Naming the targets there are.
    """
    if name not in TUNING_TARGETS:
        raise TuneError(f"unknown target {name!r} (available: {', '.join(sorted(TUNING_TARGETS))})")
    return TUNING_TARGETS[name]


register_target(AccelTarget())
