"""A tuning target with deterministic costs and no simulation, for tuner and log tests.

Its cost is a fixed function of the plan that the learned model does not see
directly: the analytical estimate scaled by a penalty on loop orders and
resident operands, so the best point is not the estimate's minimum. Points
that compile to one program (`ScheduleSpace.canonical`) cost the same.
"""

from __future__ import annotations

import os
import time

from vdla.compiler.accel.cost import estimate_cost
from vdla.tune.target import AccelTarget, Measurement, register_target


def fake_cost(space, schedule) -> float | None:
    plan = space.plan(schedule)
    if plan is None:
        return None
    # Where the reduction over output-channel tiles nests among the loops that
    # iterate: the same for points that compile to one program (`canonical`).
    iterating = [axis for axis in schedule.loop_order if plan.counts[axis] > 1]
    k_depth = iterating.index("k") if "k" in iterating else 0
    penalty = 1 + 0.3 * k_depth + 0.2 * schedule.resident_input
    return round(estimate_cost(plan) * penalty)


class FakeTarget(AccelTarget):
    name = "fake"
    unit = "cycles"

    def design(self, config):
        return "fake"                       # no Verilog behind these costs

    def prepare(self, config, shared, progress=None):
        return {"delay": float(os.environ.get("VDLA_FAKE_DELAY", "0"))}

    def measure(self, op, config, schedule, options):
        time.sleep(options.get("delay", 0))
        cost = fake_cost(self.space(op, config), schedule)
        return Measurement(float(cost), True, None, {"pid": os.getpid()})


register_target(FakeTarget())
