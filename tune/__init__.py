"""Autotuning: search a layer's declared schedule space with real measurements.

`tune` runs a search (`tuners`: grid, random, or an XGBoost ranking model
proposing batches by simulated annealing) over the knobs `compiler.accel.schedule`
declares, measuring each candidate on a target (`target`: RTL cycles on the
accelerator, bit-exactness checked; `cpu_target`: wall time of the generated C
on this CPU, checked the same way) through one executor (`bench.executor`:
local processes or Dask), and appends every trial to a JSON-lines log (`log`)
that survives a ``kill -9`` and from which `vdla compile --tuned` applies the
best schedule. `network` tunes a network's distinct layers together under one
budget (Ansor's task scheduler, one shared model) for ``vdla compile
MODEL.onnx --tuned``. `dse` searches the hardware too: accelerator configurations,
each measured on a workload (tuned through `tune` when asked) with its
synthesis estimate.
"""

from vdla.tune.log import TuneLog, best_record, read_log, workload_key
from vdla.tune.session import TuneResult, TuneSettings, tune
from vdla.tune.target import (TUNING_TARGETS, Measurement, Target, TuneError, get_target,
                              register_target)
from vdla.tune.tuners import TUNERS, make_tuner
from vdla.tune import cpu_target  # noqa: F401  (registers the "cpu" target)

__all__ = ["tune", "TuneSettings", "TuneResult", "TuneLog", "read_log", "best_record", "workload_key",
           "Target", "Measurement", "TuneError", "TUNING_TARGETS", "get_target", "register_target",
           "TUNERS", "make_tuner"]
