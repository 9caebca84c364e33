"""Golden instruction-stream snapshots of a few small layers.

A refactor that should not change code generation must leave these files
unchanged. After an intended change, regenerate them with::

    VDLA_UPDATE_GOLDEN=1 python -m pytest tests/compiler/accel/test_golden.py

and review the diff like any other code change.
"""

import difflib
import os
from pathlib import Path

import pytest

from vdla.compiler import Conv2d, Dense, Schedule, compile_op
from vdla.compiler.accel.dump import dump_program
from vdla.hw.config import PRESETS

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("VDLA_UPDATE_GOLDEN") == "1"

CASES = {
    "conv3x3_pad_default": (Conv2d(1, 16, 32, 8, 8, kernel=3, padding=1, bias=True, shift=4,
                                   relu=True), "default", None),
    "conv3x3_s2_tiny": (Conv2d(1, 6, 5, 7, 7, kernel=3, stride=2, padding=1, bias=True, shift=3),
                        "tiny", None),
    "conv_two_threads_chunks_tiny": (Conv2d(2, 9, 4, 5, 5, kernel=(2, 3), padding=(1, 1),
                                            shift=5, relu=True), "tiny",
                                     Schedule(tile_h=3, tile_w=5, tile_k=1, tile_c=1,
                                              virtual_threads=2)),
    "dense_bias_tiny": (Dense(3, 10, 6, bias=True, shift=2), "tiny", None),
    "conv_serialised_tiny": (Conv2d(1, 4, 4, 6, 6, kernel=3, padding=1), "tiny", "serial"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_instruction_stream_matches_golden(name):
    op, config, schedule = CASES[name]
    options = {}
    if schedule == "serial":
        schedule, options = None, {"latency_hiding": False}
    text = dump_program(compile_op(op, PRESETS[config], schedule, **options))
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; create it with VDLA_UPDATE_GOLDEN=1"
    expected = path.read_text()
    if text != expected:
        pytest.fail(f"{name}: instruction stream differs from {path}\n" + golden_diff(expected, text))


def golden_diff(expected: str, got: str, limit: int = 40) -> str:
    """A unified diff of a golden file against a new stream: removed lines ``-``, added ``+``.

    A line-by-line pairing would report every line after one inserted
    instruction as changed; the unified diff shows the insertion alone.
    """
    lines = list(difflib.unified_diff(expected.splitlines(), got.splitlines(),
                                      "golden", "generated", lineterm=""))
    more = f"\n... {len(lines) - limit} more diff lines" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more


def test_golden_diff_shows_an_insertion_as_one_added_line():
    expected = "a\nb\nc\nd\n"
    diff = golden_diff(expected, "a\nb\nX\nc\nd\n").splitlines()
    assert [line for line in diff if line[:1] in "+-" and line[:3] not in ("---", "+++")] == ["+X"]
    diff = golden_diff(expected, "a\nc\nd\n").splitlines()
    assert [line for line in diff if line[:1] in "+-" and line[:3] not in ("---", "+++")] == ["-b"]
