"""JSON in and out for the frozen dataclasses users write by hand.

`HwConfig` and the compiler's `Schedule` are both read from JSON files that
people edit; both want the same checks (an object, no unknown fields, valid
JSON) with errors of their own class that name the file's kind. Records
that programs append to logs (tuning trials, DSE results) are read back with
`check_fields`, one validator for every field of every kind of record.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Callable, ClassVar, NamedTuple

from vdla.files import read_bounded

__all__ = ["JsonRecord", "parse_json", "read_record_text", "MAX_RECORD_BYTES", "Field",
           "TEXT", "OBJECT", "FLAG", "COUNT", "POSITIVE", "AMOUNT", "FRACTION", "optional",
           "check_fields"]


class JsonRecord:
    """Mixin for a frozen dataclass: ``to_dict``/``to_json``/``from_dict``/``from_json``.

    Subclasses set ``record_kind`` (a word for messages, e.g. ``"config"``) and
    ``record_error`` (the exception class raised for bad input).
    """

    record_kind: ClassVar[str]
    record_error: ClassVar[type[Exception]]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict):
        if not isinstance(data, dict):
            raise cls.record_error(f"a {cls.record_kind} must be a JSON object, "
                                   f"got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise cls.record_error(f"unknown {cls.record_kind} field(s): {', '.join(unknown)} "
                                   f"(known: {', '.join(sorted(known))})")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str):
        return cls.from_dict(parse_json(text, cls.record_error, cls.record_kind))

    @classmethod
    def load(cls, path):
        """Read one from a JSON file (bounded read: `read_record_text`)."""
        return cls.from_json(read_record_text(path, cls.record_error, cls.record_kind))

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


# A record file is a few hundred bytes; anything far larger is no record.
MAX_RECORD_BYTES = 1 << 20


def parse_json(text: str | bytes, error: type[Exception], what: str):
    """``json.loads`` whose every failure is one ``error`` naming ``what``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as problem:
        raise error(f"{what} is not valid JSON: {problem}") from None
    except RecursionError:
        raise error(f"{what}: JSON nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as problem:
        raise error(f"{what} is not valid JSON: {problem}") from None


def read_record_text(path, error: type[Exception], what: str,
                     limit: int = MAX_RECORD_BYTES) -> str:
    """The text of a small JSON file, read no further than ``limit`` bytes.

    Raises
    ------
    error
        If the file cannot be read, is larger than ``limit`` (special files
        such as ``/dev/zero`` included) or is not UTF-8.
    """
    data = read_bounded(path, limit, what, error)
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise error(f"{what} {path}: not UTF-8 text") from None


class Field(NamedTuple):
    """What a record field must hold: ``accepts(value)``, described for messages."""

    description: str
    accepts: Callable[[Any], bool]


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


TEXT = Field("a string", lambda value: isinstance(value, str))
OBJECT = Field("an object", lambda value: isinstance(value, dict))
FLAG = Field("true or false", lambda value: isinstance(value, bool))
COUNT = Field("an integer, 0 or more",
              lambda value: _is_number(value) and isinstance(value, int) and value >= 0)
POSITIVE = Field("an integer, 1 or more", lambda value: COUNT.accepts(value) and value > 0)
# JSON readers accept NaN and Infinity: a cost or a time must be a real amount.
AMOUNT = Field("a finite number, 0 or more",
               lambda value: _is_number(value) and math.isfinite(value) and value >= 0)
FRACTION = Field("a number in [0, 1]", lambda value: AMOUNT.accepts(value) and value <= 1)


def optional(field: Field) -> Field:
    """``field`` or null."""
    return Field(f"{field.description} or null",
                 lambda value: value is None or field.accepts(value))


def check_fields(record, fields: dict[str, Field], where: str,
                 error: type[Exception] = ValueError) -> None:
    """Check that ``record`` is a JSON object holding every field of ``fields``.

    Raises
    ------
    error
        ``"<where>: no 'cost' field"`` or ``"<where>: cost nan: expected a
        finite number, 0 or more"``, for the first field missing or wrong.
    """
    if not isinstance(record, dict):
        raise error(f"{where}: expected a JSON object, got {type(record).__name__}")
    for name, field in fields.items():
        if name not in record:
            raise error(f"{where}: no {name!r} field")
        if not field.accepts(record[name]):
            shown = repr(record[name])
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise error(f"{where}: {name} {shown}: expected {field.description}")
