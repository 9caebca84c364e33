"""The tuning log: append-only JSON lines, one record per measured trial.

Each record is written, flushed and fsynced as its trial finishes, so a crash
or ``kill -9`` loses at most the trial being measured. A record names its
target, workload (the op's fields), config (with its hardware hash) and
schedule, and holds the measurement; `read_log` gives them back, skipping with
a warning a last line cut off mid-write (and refusing other damage, which a
crash cannot cause); `TuneLog` drops such an unfinished record before it
appends, so a resumed log is whole again. `best_record` picks the record `vdla compile --tuned`
applies; the same records warm-start the learned model on other workloads
and serve as a cache of measurements (`measurement_key`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Iterable

from vdla.compiler.schedule import Schedule
from vdla.hw.config import HwConfig
from vdla.tune.target import Measurement, TuneError, get_target

__all__ = ["LOG_VERSION", "workload_key", "design_digest", "measurement_key", "make_record",
           "read_log", "read_jsonl", "TuneLog", "best_record", "record_measurement"]

LOG_VERSION = 1


def workload_key(op) -> str:
    """A stable name for a layer: its description and a digest of all its fields."""
    digest = hashlib.sha256(json.dumps(op.to_dict(), sort_keys=True).encode()).hexdigest()[:12]
    return f"{op.describe()} #{digest}"


def design_digest(target: str, config: HwConfig) -> str:
    """What a measurement on ``target`` depends on beyond the config's fields and the
    schedule (`tune.target.Target.design`): for the accelerator the Verilog the config
    generates, for the cpu the CPU, compiler, flags and threads."""
    return get_target(target).design(config)


def measurement_key(target: str, op, config: HwConfig, schedule: Schedule) -> str:
    """What makes two measurements the same: target, workload, hardware (config and
    design) and schedule."""
    return json.dumps([target, workload_key(op), config.hash, design_digest(target, config),
                       schedule.to_dict()], sort_keys=True)


def make_record(target: str, op, config: HwConfig, schedule: Schedule,
                measurement: Measurement, **extra: Any) -> dict[str, Any]:
    """One log line's object (``extra``: tuner, trial number, seed, ...)."""
    return {"version": LOG_VERSION, "target": target, "workload": workload_key(op),
            "op": op.to_dict(), "config": config.to_dict(), "config_hash": config.hash,
            "design": design_digest(target, config), "schedule": schedule.to_dict(),
            "cost": measurement.cost,
            "correct": measurement.correct, "error": measurement.error,
            "details": measurement.details, "time": round(time.time(), 3), **extra}


def record_measurement(record: dict) -> Measurement:
    """The measurement a record holds."""
    return Measurement(record["cost"], record["correct"], record.get("error"),
                       record.get("details") or {})


def read_jsonl(path: str | Path, what: str = "tuning record",
               required: str = "schedule") -> list[dict[str, Any]]:
    """The objects of an append-only JSON-lines file (none when it does not exist).

    A last line that is not a whole object with a ``required`` field (a
    writer killed mid-line) is skipped with a warning.

    Raises
    ------
    TuneError
        For damage elsewhere than the last line, which a crash cannot cause.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise TuneError(f"cannot read log {path}: {error.strerror}") from None
    lines = text.split("\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or required not in record:
                raise ValueError(f"not a {what}")
        except ValueError:
            if all(not rest.strip() for rest in lines[number:]):
                warnings.warn(f"{path}:{number}: skipping a truncated last {what} "
                              "(killed while it was written)", stacklevel=2)
                continue
            raise TuneError(f"{path}:{number}: not a {what} (a corrupt line before "
                            "the last one)") from None
        records.append(record)
    return records


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The records of a tuning log (`read_jsonl`), all of this `LOG_VERSION`.

    Raises
    ------
    TuneError
        For a damaged log or a record of another version.
    """
    records = read_jsonl(path)
    for number, record in enumerate(records, start=1):
        if record.get("version") != LOG_VERSION:
            raise TuneError(f"{path}: record {number} has log version "
                            f"{record.get('version')!r}, expected {LOG_VERSION}")
    return records


class TuneLog:
    """Appends records to a JSON-lines file, each on disk (fsynced) before the next counts."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A record cut off by a kill (no newline yet) never finished: drop it, so
        # the next record starts a line of its own and the log stays whole.
        if self.path.exists() and self.path.stat().st_size:
            data = self.path.read_bytes()
            if not data.endswith(b"\n"):
                with open(self.path, "r+b") as file:
                    file.truncate(data.rfind(b"\n") + 1)

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with open(self.path, "a") as file:
            file.write(line)
            file.flush()
            os.fsync(file.fileno())


def best_record(records: Iterable[dict[str, Any]], op, config: HwConfig | None,
                target: str = "accel", design: str | None = None) -> dict[str, Any] | None:
    """The lowest-cost correct record for this workload on this hardware, if any.

    ``config`` None takes records of any config (the cpu target's times do not
    depend on one); ``design`` (`design_digest`) given, only records of that design.
    """
    key = workload_key(op)
    matching = [record for record in records
                if record["workload"] == key and record["target"] == target
                and (config is None or record["config_hash"] == config.hash)
                and (design is None or record.get("design") == design)
                and record["correct"] and record["cost"] is not None]
    return min(matching, key=lambda record: record["cost"], default=None)
