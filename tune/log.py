"""The tuning log: append-only JSON lines, one record per measured trial.

Each record is written, flushed and fsynced as its trial finishes, so a crash
or ``kill -9`` loses at most the trial being measured. A record names its
target, workload (the op's fields), config (with its hardware hash) and
schedule, and holds the measurement; `read_log` gives them back, skipping with
a warning a last line cut off mid-write (and refusing other damage, which a
crash cannot cause, and any record `check_record` refuses: a missing field, a
NaN, negative or non-numeric cost), reading no more than `MAX_LOG_BYTES`, and
counting a trial logged twice once; `TuneLog` drops an unfinished record
before it appends, so a resumed log is whole again. `best_record` picks the
record `vdla compile --tuned` applies (of the same design); the same records
warm-start the learned model on other workloads and serve as a cache of
measurements (`measurement_key`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable

from vdla.compiler.accel.schedule import Schedule
from vdla.files import bounded_lines
from vdla.hw.config import HwConfig
from vdla.records import AMOUNT, FLAG, OBJECT, TEXT, check_fields, optional
from vdla.tune.target import Measurement, TuneError, get_target

__all__ = ["LOG_VERSION", "workload_key", "design_digest", "measurement_key", "make_record",
           "read_log", "read_jsonl", "check_record", "TuneLog", "best_record",
           "record_measurement", "MAX_LOG_BYTES"]

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
    """One log line's object (``extra``: tuner, trial number, seed, ...), checked as a
    log's records are when read back (`check_record`): a target's bug that measured a
    NaN must not write a log no one can read."""
    record = {"version": LOG_VERSION, "target": target, "workload": workload_key(op),
              "op": op.to_dict(), "config": config.to_dict(), "config_hash": config.hash,
              "design": design_digest(target, config), "schedule": schedule.to_dict(),
              "cost": measurement.cost,
              "correct": measurement.correct, "error": measurement.error,
              "details": measurement.details, "time": round(time.time(), 3), **extra}
    check_record(record, f"a new {target} trial of {op.describe()}")
    return record


def record_measurement(record: dict) -> Measurement:
    """The measurement a record holds."""
    return Measurement(record["cost"], record["correct"], record.get("error"),
                       record.get("details") or {})


# The most a log may hold, and one record: a record is a few KB, so this is
# tens of thousands of trials; anything larger (or /dev/zero) is no log.
MAX_LOG_BYTES = 64 << 20
MAX_LINE_BYTES = 1 << 20

# What every tuning record holds (`make_record`), checked when a log is read:
# a cost read back feeds `best_record`, the tuners and `vdla compile --tuned`.
RECORD_FIELDS = {"target": TEXT, "workload": TEXT, "op": OBJECT, "config": OBJECT,
                 "config_hash": TEXT, "design": TEXT, "schedule": OBJECT,
                 "cost": optional(AMOUNT), "correct": FLAG}


def check_record(record: dict, where: str) -> None:
    """Refuse a tuning record (`make_record`'s fields) that no measurement could give.

    Raises
    ------
    TuneError
        Naming ``where`` (file and line) and the field at fault.
    """
    check_fields(record, RECORD_FIELDS, where, TuneError)
    if record["correct"] and record["cost"] is None:
        raise TuneError(f"{where}: a correct trial without a cost")


def read_jsonl(path: str | Path, what: str = "tuning record", required: str = "schedule",
               check: Callable[[dict, str], None] | None = None,
               limit: int = MAX_LOG_BYTES) -> list[dict[str, Any]]:
    """The objects of an append-only JSON-lines file (none when it does not exist).

    A last line that is not a whole object with a ``required`` field (a
    writer killed mid-line) is skipped with a warning. ``check(record,
    where)`` validates each whole record. At most ``limit`` bytes are read
    (`MAX_LINE_BYTES` a line).

    Raises
    ------
    TuneError
        For damage elsewhere than the last line, which a crash cannot cause, a
        record ``check`` refuses, or a file too large.
    """
    records, torn = [], None
    for number, line in bounded_lines(path, limit, MAX_LINE_BYTES, f"{what} log", TuneError):
        if not line.strip():
            continue
        if torn is not None:
            raise TuneError(f"{path}:{torn}: not a {what} (a corrupt line before "
                            "the last one)")
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or required not in record:
                raise ValueError(f"not a {what}")
        except (ValueError, RecursionError):
            torn = number
            continue
        if check is not None:
            check(record, f"{path}:{number}: {what}")
        records.append(record)
    if torn is not None:
        warnings.warn(f"{path}:{torn}: skipping a truncated last {what} "
                      "(killed while it was written)", stacklevel=2)
    return records


def _identity(record: dict) -> str:
    """What makes two records the same trial (`measurement_key`'s fields)."""
    return json.dumps([record["target"], record["workload"], record["config_hash"],
                       record["design"], record["schedule"]], sort_keys=True)


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The records of a tuning log (`read_jsonl`), each checked (`check_record`) and of
    this `LOG_VERSION`; a trial logged twice (the same schedule on the same hardware)
    counts once, as first logged, with a warning.

    Raises
    ------
    TuneError
        For a damaged log, a malformed record or one of another version.
    """
    def check(record: dict, where: str) -> None:
        if record.get("version") != LOG_VERSION:
            raise TuneError(f"{where} has log version {record.get('version')!r}, "
                            f"expected {LOG_VERSION}")
        check_record(record, where)

    records, seen = [], set()
    logged = read_jsonl(path, check=check)
    for record in logged:
        identity = _identity(record)
        if identity not in seen:
            seen.add(identity)
            records.append(record)
    if len(records) < len(logged):
        warnings.warn(f"{path}: {len(logged) - len(records)} trial(s) logged more than once "
                      "count once (the first)", stacklevel=2)
    return records


def _last_line_end(file, end: int) -> int:
    """The offset just past the last newline of ``file`` (``end`` bytes long), 0 if none,
    read backwards a block at a time."""
    while end > 0:
        start = max(0, end - (1 << 16))
        file.seek(start)
        newline = file.read(end - start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


class TuneLog:
    """Appends records to a JSON-lines file, each on disk (fsynced) before the next counts."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A record cut off by a kill (no newline yet) never finished: drop it, so
        # the next record starts a line of its own and the log stays whole.
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "r+b") as file:
                end = file.seek(0, os.SEEK_END)
                file.seek(end - 1)
                if file.read(1) != b"\n":
                    file.truncate(_last_line_end(file, end))

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with open(self.path, "a") as file:
            file.write(line)
            file.flush()
            os.fsync(file.fileno())


def best_record(records: Iterable[dict[str, Any]], op, config: HwConfig | None,
                target: str, design: str) -> dict[str, Any] | None:
    """The lowest-cost correct record for this workload on this hardware, if any.

    ``design`` (`design_digest`) is what the measurement depends on beyond the
    config: a record of another design measured other hardware. ``config`` None
    takes records of any config (the cpu target's times do not depend on one).
    """
    key = workload_key(op)
    matching = [record for record in records
                if record["workload"] == key and record["target"] == target
                and (config is None or record["config_hash"] == config.hash)
                and record["design"] == design
                and record["correct"] and record["cost"] is not None]
    return min(matching, key=lambda record: record["cost"], default=None)
