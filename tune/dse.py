"""Design-space exploration: which accelerator configuration is best per unit of area?

`load_space` reads a sweep (a base config and, per `HwConfig` field, the
values to try: GEMM shape, buffer sizes, bus width, DRAM latency, ...);
`run_dse` evaluates each configuration on a workload (every layer compiled
with the default schedule, or tuned with a trial budget, run on the RTL and
checked against numpy) together with its synthesis estimate (LUTs, FFs, block
RAMs, DSPs, and Fmax where the flow gives one), on the executor of
`bench.executor`. Each configuration's result is appended to a JSON-lines log
as it finishes, so a sweep resumes where it stopped. `pareto_front` keeps the
configurations no other beats on both time (cycles / Fmax) and area.

The space file::

    {"base": "default",                      # a preset name or a config object
     "vary": {"block_out": [8, 16], "acc_buffer_bytes": [65536, 131072]},
     "configs": ["tiny", {...}],             # and/or whole configs (presets or objects)
     "schedules": "default",                 # or "tuned"
     "trials": 16, "tuner": "xgb"}           # the tuning budget per layer
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import Any, Callable, Sequence

from vdla.bench.executor import Pool
from vdla.compiler.workloads import Workload
from vdla.errors import VdlaError
from vdla.hw.config import PRESETS, ConfigError, HwConfig
from vdla.hw.generate import verilog_digest
from vdla.records import (AMOUNT, COUNT, OBJECT, TEXT, check_fields, optional, parse_json,
                             read_record_text)

__all__ = ["DseError", "DesignSpace", "load_space", "evaluate_config", "run_dse",
           "pareto_front", "synth_area", "check_record", "AREA_METRICS", "MAX_CONFIGS"]

# Resources a front can be drawn against (SynthReport attributes).
AREA_METRICS = ("luts", "ffs", "brams", "dsps")
# Time needs a clock: without an Fmax from the flow, this nominal one (MHz).
NOMINAL_MHZ = 100.0
# Configurations a space may give (``vary``'s combinations and the listed ones): each
# is minutes of RTL simulation and synthesis, so more is a typo (12 values of 8
# fields: 430 million), refused up front.
MAX_CONFIGS = 4096

# What a DSE log record holds (`evaluate_config`), checked when a log is resumed;
# a successful one also its cycles, area and time.
RECORD_FIELDS = {"config": OBJECT, "config_hash": TEXT, "design": TEXT, "schedules": TEXT,
                 "layers": OBJECT, "error": optional(TEXT)}
RESULT_FIELDS = {"cycles": COUNT, "area": OBJECT, "clock_mhz": AMOUNT, "time_s": AMOUNT}


class DseError(VdlaError, ValueError):
    """A malformed design space or sweep request."""


@dataclasses.dataclass(frozen=True)
class DesignSpace:
    """The configurations to sweep and how each is scheduled."""

    base: HwConfig
    vary: dict[str, tuple]
    extra: tuple[HwConfig, ...] = ()
    schedules: str = "default"
    trials: int = 16
    tuner: str = "xgb"

    def configs(self) -> tuple[list[HwConfig], list[str]]:
        """The listed configs and every valid combination of the varied fields (none
        varied: the base alone), and why the invalid combinations are invalid."""
        names = list(self.vary)
        configs, skipped = list(self.extra), []
        if not names and self.extra:
            return configs, skipped
        for values in itertools.product(*(self.vary[name] for name in names)):
            changes = dict(zip(names, values))
            label = ",".join(f"{name}={value}" for name, value in changes.items())
            try:
                configs.append(self.base.replace(**changes, name=label or self.base.name))
            except ConfigError as error:
                skipped.append(f"{label}: {error}")
        return configs, skipped


def load_space(path: str | Path) -> DesignSpace:
    """Read a design space (see the module docstring).

    Raises
    ------
    DseError
        Naming what is wrong with the file.
    """
    path = Path(path)
    data = parse_json(read_record_text(path, DseError, "space"), DseError, f"space {path}")
    if not isinstance(data, dict):
        raise DseError(f"space {path}: expected a JSON object")
    known = ("base", "vary", "configs", "schedules", "trials", "tuner")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise DseError(f"space {path}: unknown field(s) {', '.join(unknown)} "
                       f"(known: {', '.join(known)})")
    base = _config(path, "base", data.get("base", "default"))
    if not isinstance(data.get("configs", []), list):
        raise DseError(f"space {path}: configs must be a list of presets or config objects")
    extra = tuple(_config(path, f"configs[{i}]", c) for i, c in enumerate(data.get("configs", [])))
    vary = data.get("vary", {})
    fields = {f.name for f in dataclasses.fields(HwConfig)} - {"name"}
    if not isinstance(vary, dict) or not all(isinstance(v, list) and v for v in vary.values()):
        raise DseError(f"space {path}: vary must map config fields to non-empty lists")
    bad = sorted(set(vary) - fields)
    if bad:
        raise DseError(f"space {path}: vary: unknown config field(s) {', '.join(bad)}")
    schedules = data.get("schedules", "default")
    if schedules not in ("default", "tuned"):
        raise DseError(f"space {path}: schedules must be 'default' or 'tuned', "
                       f"got {schedules!r}")
    trials = data.get("trials", 16)
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise DseError(f"space {path}: trials must be a positive integer, got {trials!r}")
    from vdla.tune.tuners import TUNERS
    tuner = data.get("tuner", "xgb")
    if not isinstance(tuner, str) or tuner not in TUNERS:
        raise DseError(f"space {path}: tuner {tuner!r}: unknown (available: "
                       f"{', '.join(TUNERS)})")
    combinations = math.prod(len(values) for values in vary.values()) if vary else 0
    if len(extra) + combinations > MAX_CONFIGS:
        raise DseError(f"space {path}: {len(extra) + combinations:,} configurations "
                       f"({combinations:,} combinations of vary, {len(extra):,} listed), more "
                       f"than the {MAX_CONFIGS:,} a sweep may hold (each one is an RTL run and "
                       "a synthesis): vary or list fewer")
    return DesignSpace(base, {k: tuple(v) for k, v in vary.items()}, extra, schedules, trials,
                       tuner)


def _config(path, where: str, spec) -> HwConfig:
    """A preset name or a config object of the space file."""
    try:
        if isinstance(spec, str):
            if spec not in PRESETS:
                raise ConfigError(f"no preset {spec!r} ({', '.join(PRESETS)})")
            return PRESETS[spec]
        return HwConfig.from_dict(spec)
    except ConfigError as error:
        raise DseError(f"space {path}: {where}: {error}") from None


def synth_area(config: HwConfig) -> dict[str, Any]:
    """The synthesis estimate of `vdla.hw.synth` as a dict (luts, ffs, brams, dsps, fmax_mhz...)."""
    from vdla.hw.synth import estimate
    return estimate(config).to_dict()


def evaluate_config(config: HwConfig, workloads: Sequence[Workload], space: DesignSpace,
                    area: Callable[[HwConfig], dict] = synth_area) -> dict[str, Any]:
    """Cycles of every layer on the RTL (default or tuned schedules) and the area of ``config``.

    Runs in a worker; never raises for a configuration that fails (``error`` says why).
    """
    from vdla.bench.layer_run import run_layer
    from vdla.bench.suite import prepare_backend
    record: dict[str, Any] = {"config": config.to_dict(), "config_hash": config.hash,
                              "design": verilog_digest(config), "schedules": space.schedules,
                              "layers": {}, "error": None}
    try:
        options = prepare_backend(config, "rtl")
        for workload in workloads:
            schedule = None
            if space.schedules == "tuned":
                from vdla.tune import TuneSettings, tune
                result = tune(workload.op, config,
                              TuneSettings(tuner=space.tuner, trials=space.trials, seed=0),
                              pool=Pool(executor=_InProcess()))
                if result.best is None:
                    raise DseError(f"{workload.name}: no tuning trial succeeded")
                from vdla.compiler.accel.schedule import Schedule
                schedule = Schedule.from_dict(result.best["schedule"])
            layer = run_layer(workload, config, "rtl", backend_options=options,
                              schedule=schedule)
            if not layer.correct or layer.cycles is None:
                raise DseError(f"{workload.name}: {layer.error or 'output differs from numpy'}")
            record["layers"][workload.name] = {"cycles": layer.cycles, "uses": workload.uses,
                                               "schedule": layer.schedule}
        record["cycles"] = sum(layer["cycles"] * layer["uses"]
                               for layer in record["layers"].values())
        record["area"] = area(config)
    except Exception as error:   # one failing configuration must not lose the sweep
        record["error"] = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
        return record
    fmax = record["area"].get("fmax_mhz")
    record["fmax_mhz"] = fmax
    record["clock_mhz"] = fmax if fmax else NOMINAL_MHZ
    record["time_s"] = record["cycles"] / (record["clock_mhz"] * 1e6)
    return record


class _InProcess:
    """A `concurrent.futures`-shaped executor that runs each task at once (inside a worker)."""

    def submit(self, fn, *args, **kwargs):
        import concurrent.futures
        future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future

    def shutdown(self, wait=True, **_):
        pass


def _evaluate(task):
    config, workloads, space, area = task
    return evaluate_config(config, workloads, space, area)


def run_dse(space: DesignSpace, workloads: Sequence[Workload], *, log: str | Path,
            resume: bool = False, pool: Pool | None = None, jobs: int = 1,
            scheduler: str | None = None, area: Callable[[HwConfig], dict] = synth_area,
            progress: Callable[[dict], None] | None = None) -> list[dict[str, Any]]:
    """Evaluate every configuration of ``space``; return the records, one per configuration.

    Successful records already in ``log`` for the same workload, schedules and
    design count as done with ``resume`` (a log holding some is refused
    without it); failed ones are evaluated again.

    Raises
    ------
    DseError
        For an empty space or a log that cannot be continued.
    """
    from vdla.tune.log import TuneLog, read_jsonl
    configs, _ = space.configs()
    if not configs:
        raise DseError("the design space holds no valid configuration")
    names = [workload.name for workload in workloads]
    previous = read_jsonl(log, what="DSE record", required="config_hash", check=check_record)
    # a record of another design (the config's Verilog) measured other cycles and area
    designs = {config.hash: verilog_digest(config) for config in configs}
    ours = [r for r in previous if r.get("workloads") == names
            and r["schedules"] == space.schedules and r["design"] == designs.get(r["config_hash"])]
    if ours and not resume:
        raise DseError(f"log {log} already holds {len(ours)} configuration(s) of this sweep: "
                       "pass --resume to continue or use another --log")
    # a configuration that failed is evaluated again (the failure may have been the machine's)
    done = {r["config_hash"]: r for r in ours if r["error"] is None}
    writer = TuneLog(log)
    todo = [config for config in configs if config.hash not in done]
    own = pool is None
    pool = Pool(jobs, scheduler) if own else pool
    # a config another sweep evaluated is named as this sweep names it
    records = {config.hash: {**done[config.hash], "name": config.name}
               for config in configs if config.hash in done}
    try:
        tasks = [(config, list(workloads), space, area) for config in todo]
        for task, record in pool.map_unordered(_evaluate, tasks):
            record["workloads"] = names
            record["name"] = task[0].name
            writer.append(record)
            records[record["config_hash"]] = record
            if progress is not None:
                progress(record)
    finally:
        if own:
            pool.close()
    return [records[config.hash] for config in configs if config.hash in records]


def check_record(record: dict, where: str) -> None:
    """Refuse a DSE log record `evaluate_config` could not have written.

    Raises
    ------
    DseError
        Naming ``where`` (file and line) and the field at fault.
    """
    check_fields(record, RECORD_FIELDS, where, DseError)
    if record["error"] is None:
        check_fields(record, RESULT_FIELDS, where, DseError)


def pareto_front(records: Sequence[dict], metric: str = "luts") -> list[dict]:
    """The successful records no other is at least as good as on time and ``metric``
    and better on one, by increasing area."""
    if metric not in AREA_METRICS:
        raise DseError(f"unknown area metric {metric!r} (known: {', '.join(AREA_METRICS)})")
    good = [r for r in records if r.get("error") is None]
    front = []
    for record in sorted(good, key=lambda r: (r["area"][metric], r["time_s"])):
        if not front or record["time_s"] < front[-1]["time_s"]:
            front.append(record)
    return front
