"""Helpers of the fuzz tests: run ``vdla`` in-process through its one error path,
and re-sign program files after editing them (so only the verifier stands
between a crafted file and a simulator)."""

from __future__ import annotations

import hashlib
import json
import struct
import sys


from vdla.cli.main import main

PREAMBLE = struct.Struct("<8sII")


def vdla(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """Run ``vdla ARGS`` through `cli.main.main`; returns (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["vdla", *map(str, args)])
    code = 0
    try:
        main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *fragments: str, bug: bool = False) -> None:
    """Exit status 1 or 2 (a user error; 70 with ``bug``), and stderr one line (no
    traceback) holding every fragment."""
    assert code in ((70,) if bug else (1, 2)), f"exit status {code} (70: a bug): {err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def split(data: bytes) -> tuple[dict, bytes]:
    """A program file's header (parsed) and the bytes after it, without the digest."""
    _, _, length = PREAMBLE.unpack_from(data)
    header = json.loads(data[PREAMBLE.size:PREAMBLE.size + length])
    return header, data[PREAMBLE.size + length:-32]


def sign(header_text: bytes, rest: bytes, version: int = 1) -> bytes:
    """A program file with this header text and body, with a valid SHA-256."""
    body = PREAMBLE.pack(b"VDLAPROG", version, len(header_text)) + header_text + rest
    return body + hashlib.sha256(body).digest()


# Values a hostile header may hold in place of any field.
ODD_VALUES = [None, True, -1, 0, 1, 7, 2**31, 2**64, 10**12, 1.5, float("inf"), float("nan"),
              "", "x", "../../etc", [], [1, 2], {}, {"a": 1}, [[[[[]]]]]]


def json_paths(value, prefix=()):
    """Every path (a tuple of keys and indices) into a JSON value, ``()`` included."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from json_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from json_paths(item, (*prefix, index))


def get_at(value, path):
    """The item of a JSON value at ``path``."""
    for key in path:
        value = value[key]
    return value


def set_at(value, path, new) -> None:
    """Replace the item of a JSON value at ``path`` (not empty) by ``new``."""
    get_at(value, path[:-1])[path[-1]] = new


__all__ = ["vdla", "assert_one_line_error", "split", "sign", "ODD_VALUES", "json_paths",
           "get_at", "set_at"]
