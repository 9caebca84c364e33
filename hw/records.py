"""JSON in and out for the frozen dataclasses users write by hand.

`HwConfig` and the compiler's `Schedule` are both read from JSON files that
people edit; both want the same checks (an object, no unknown fields, valid
JSON) with errors of their own class that name the file's kind.
"""

from __future__ import annotations

import dataclasses
import json
from typing import ClassVar

__all__ = ["JsonRecord"]


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
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise cls.record_error(f"{cls.record_kind} is not valid JSON: {error}") from None
        return cls.from_dict(data)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)
