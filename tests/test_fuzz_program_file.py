"""Crafted program files, re-signed so the digest holds: ``vdla run`` either
refuses them with one line (exit != 0, no output file) or computes the right
answer. Never a traceback, a crash, a hang or a wrong output with exit 0."""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest

from vdla.hw.config import PRESETS
from vdla.runtime.program_file import dumps
from tests.fuzz_helpers import (ODD_VALUES, assert_one_line_error, json_paths, set_at, sign,
                                 split, vdla)
from tests.runtime.programs import dense_inputs, dense_program, dense_reference

TINY = PRESETS["tiny"]
M, K, N = 3, 8, 4


@pytest.fixture(scope="module")
def original():
    return dumps(dense_program(TINY, M, K, N))


@pytest.fixture
def inputs(tmp_path):
    arrays = dense_inputs(np.random.default_rng(2), M, K, N)
    args = []
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    return args, dense_reference(arrays)


def _check_run(monkeypatch, capsys, tmp_path, data: bytes, inputs, what: str, sim="fsim"):
    """Run a crafted file; refused with one line and no output, or exactly right."""
    program, out = tmp_path / "crafted.vdla", tmp_path / "out.npy"
    program.write_bytes(data)
    out.unlink(missing_ok=True)
    args, expected = inputs
    code, _, err = vdla(monkeypatch, capsys, "run", program, "--sim", sim, *args,
                        "--output", out)
    if code == 0:
        np.testing.assert_array_equal(np.load(out), expected, err_msg=what)
        return "ran"
    assert code == 1, f"{what}: exit {code}: {err}"
    assert_one_line_error(code, err)
    assert not out.exists(), what
    return "refused"


def test_header_fields_replaced_at_random(monkeypatch, capsys, tmp_path, original, inputs):
    header, rest = split(original)
    paths = [p for p in json_paths(header) if p]
    rng = random.Random(8)
    outcomes = {"ran": 0, "refused": 0}
    for _ in range(150):
        crafted = copy.deepcopy(header)
        path = rng.choice(paths)
        set_at(crafted, path, rng.choice(ODD_VALUES))
        text = json.dumps(crafted).encode()   # allows Infinity and NaN, as an attacker may
        outcomes[_check_run(monkeypatch, capsys, tmp_path, sign(text, rest), inputs,
                            f"{'/'.join(map(str, path))}")] += 1
    assert outcomes["refused"] > 100


@pytest.mark.parametrize("edit, message", [
    (lambda h: h["tensors"][0].update(dram_offset=h["tensors"][0]["dram_offset"] + 1),
     "is not aligned to the config's"),
    (lambda h: h["tensors"][-1].update(dram_offset=h["tensors"][0]["dram_offset"]),
     "overlaps"),
    (lambda h: h["tensors"][0].update(layout="nchw"), "has layout 'nchw' (known:"),
    (lambda h: h["tensors"][0].update(role="secret"), "has role 'secret'"),
    (lambda h: h.update(metadata=[1, 2]), "metadata must be a JSON object, got list"),
    (lambda h: h.update(dram_bytes=10**12), "dram_bytes 1000000000000 is outside"),
    (lambda h: h.update(dram_bytes=h["dram_bytes"] * 4), "larger than the"),
    (lambda h: h.update(config_hash="0" * 16), "does not match its config"),
    (lambda h: h.update(insn_count=float("inf")), "insn_count must be an integer, got inf"),
    (lambda h: h["config"].update(cmd_queue_depth=2**30), "cmd_queue_depth: at most 1024"),
    (lambda h: h.update(metadata="DEEP"), "nested too deeply"),
])
def test_crafted_headers_get_one_line_naming_the_problem(monkeypatch, capsys, tmp_path,
                                                          original, inputs, edit, message):
    header, rest = split(original)
    edit(header)
    if header.get("config_hash") != "0" * 16:
        from vdla.hw.config import ConfigError, HwConfig
        try:   # keep the hash consistent unless that is the defect under test
            header["config_hash"] = HwConfig.from_dict(header["config"]).hash
        except ConfigError:
            pass
    text = json.dumps(header).encode().replace(b'"DEEP"', b"[" * 50000 + b"]" * 50000)
    path = tmp_path / "crafted.vdla"
    path.write_bytes(sign(text, rest))
    args, _ = inputs
    code, _, err = vdla(monkeypatch, capsys, "run", path, *args, "--output", tmp_path / "o.npy")
    assert_one_line_error(code, err, message)
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.rtl
def test_instruction_words_flipped_at_random(monkeypatch, capsys, tmp_path, original, inputs):
    """A flipped bit either breaks a rule (refused, one line) or makes another legal
    program: that one must give the same output on fsim and the RTL (its meaning
    is the ISA's, not the layer's, so numpy is no reference for it)."""
    header, rest = split(original)
    text = json.dumps(header, sort_keys=True).encode()
    rng = random.Random(3)
    code_bytes = header["insn_count"] * 16 + header["uop_count"] * 4
    args, _ = inputs
    refused = ran = 0
    for _ in range(60):
        data = bytearray(rest)
        bit = rng.randrange(code_bytes * 8)
        data[bit // 8] ^= 1 << (bit % 8)
        program = tmp_path / "flipped.vdla"
        program.write_bytes(sign(text, bytes(data)))
        outputs = {}
        for sim in ("fsim", "rtl"):
            out = tmp_path / f"{sim}.npy"
            out.unlink(missing_ok=True)
            code, _, err = vdla(monkeypatch, capsys, "run", program, "--sim", sim, *args,
                                "--output", out)
            outputs[sim] = (code, np.load(out) if code == 0 else err.strip())
            if code != 0:
                assert_one_line_error(code, err)
                assert code == 1 and not out.exists(), f"bit {bit}: {err}"
        (fsim_code, fsim_out), (rtl_code, rtl_out) = outputs["fsim"], outputs["rtl"]
        assert fsim_code == rtl_code, f"bit {bit}: {outputs}"
        if fsim_code == 0:
            np.testing.assert_array_equal(rtl_out, fsim_out, err_msg=f"bit {bit}")
            ran += 1
        else:
            refused += 1
    assert refused > 20 and ran > 0


@pytest.mark.parametrize("content, message", [
    (b"", "not a vdla program file"),
    (b"VDLAPRO", "truncated (7 bytes; a program file starts with a 16-byte preamble)"),
    (b"VDLAPROG\x01\x00", "truncated (10 bytes; a program file starts with a 16-byte preamble)"),
    (b"VDLAPROG\x01\x00\x00\x00\xff\xff\xff\xff", "more than any program file has"),
    (b"\x00" * 64, "bad magic"),
])
def test_short_and_odd_files(monkeypatch, capsys, tmp_path, content, message):
    path = tmp_path / "odd.vdla"
    path.write_bytes(content)
    code, _, err = vdla(monkeypatch, capsys, "inspect", path)
    assert_one_line_error(code, err, message)


def test_special_file_as_program_is_refused_at_once(monkeypatch, capsys):
    code, _, err = vdla(monkeypatch, capsys, "inspect", "/dev/zero")
    assert_one_line_error(code, err, "/dev/zero: not a vdla program file (bad magic")
