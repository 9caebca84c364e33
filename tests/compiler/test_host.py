"""`compiler.host.host_spec`: every header field of a cpu or gpu program is checked
against its op before anything is built; an edit gets one line naming it.

Edits are made on the parsed header and the file re-signed (`tests.fuzz_helpers.sign`),
so only the checker stands between an edited file and a kernel.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from vdla.compiler.cpu.program import compile_cpu
from vdla.compiler.gpu.program import compile_gpu
from vdla.compiler.host import host_spec
from vdla.compiler.ops import Conv2d, Dense
from vdla.compiler.cpu.runner import CpuRunner
from vdla.runtime.errors import ProgramError
from vdla.runtime.program_file import ProgramFileError, dumps, loads
from tests.fuzz_helpers import get_at, set_at, sign, split

OP = Conv2d(2, 13, 11, 10, 9, kernel=(3, 2), stride=(1, 2), padding=(1, 1), bias=True,
            shift=6, relu=True)
LAYER = "conv2d 2x13x10x9 -> 11 k3x2 s1x2 p1x1 +bias >>6 relu"


@pytest.fixture(scope="module")
def cpu_file():
    return dumps(compile_cpu(OP, "int8"))


@pytest.fixture(scope="module")
def gpu_file():
    return dumps(compile_gpu(Dense(3, 10, 7, bias=True, shift=4), "int8", check_with_nvcc=False))


def _edited(data: bytes, edit) -> bytes:
    header, rest = split(data)
    edit(header)
    return sign(json.dumps(header).encode(), rest)


def _set(path, value):
    """An edit that sets the header field at ``path`` (a tuple of keys) to ``value``."""
    return lambda header: set_at(header, path, value)


def _drop(path):
    return lambda header: get_at(header, path[:-1]).pop(path[-1])


CPU_EDITS = [
    # The op's shape, the weight's shape, the mode and the schedule: what issue 20 found
    # giving uninitialised memory, garbage or a heap overflow.
    (_set(("metadata", "op", "width"), 8),
     f"cpu program: tensor 'data' has shape (2, 13, 10, 9), but {LAYER.replace('x9', 'x8')} "
     "(int8) gives it shape (2, 13, 10, 8)"),
    (_set(("metadata", "op", "out_channels"), 64),
     "cpu program: tensor 'weight' has shape (11, 13, 3, 2), but conv2d 2x13x10x9 -> 64 k3x2 "
     "s1x2 p1x1 +bias >>6 relu (int8) gives it shape (64, 13, 3, 2)"),
    (_set(("tensors", 1, "shape"), [11, 13, 3, 3]),
     f"cpu program: tensor 'weight' has shape (11, 13, 3, 3), but {LAYER} (int8) gives it shape "
     "(11, 13, 3, 2)"),
    (_set(("tensors", 3, "shape"), [2, 11, 10, 500]),
     f"cpu program: tensor 'out' has shape (2, 11, 10, 500), but {LAYER} (int8) gives it shape "
     "(2, 11, 10, 5)"),
    (_set(("metadata", "cpu", "mode"), "fp32"),
     f"cpu program: tensor 'data' has layout 'host_int8', but {LAYER} (fp32) gives it layout "
     "'host_float32'"),
    (_set(("metadata", "cpu", "mode"), "int4"),
     "cpu program: mode 'int4' is not one of int8, fp32"),
    (_set(("metadata", "cpu", "schedule", "ow_tile"), 1000),
     "cpu program: schedule: ow_tile: at most 28 (the knob space's largest), got 1000"),
    (_set(("metadata", "cpu", "schedule", "ic_block"), 1 << 40),
     f"cpu program: schedule: ic_block: at most 256 (the knob space's largest), got {1 << 40}"),
    (_set(("metadata", "cpu", "schedule", "lanes"), 16.0),
     "cpu program: schedule: lanes: expected 8 or 16, got 16.0"),
    (_set(("metadata", "cpu", "schedule", "parallel"), "all"),
     "cpu program: schedule: parallel: expected one of rows, channels, both, got 'all'"),
    (_set(("metadata", "cpu", "schedule", "tile"), 3),
     "cpu program: schedule: unknown CPU schedule field(s): tile"),
    # The rest of the header.
    (_set(("metadata", "op"), [1, 2]), "cpu program: op: an operator is a JSON object, got list"),
    (_set(("metadata", "op", "op"), ["conv2d"]),
     "cpu program: op: unknown operator ['conv2d'] (known: conv2d, dense)"),
    (_set(("metadata", "op", "relu"), "no"), "cpu program: op: relu: expected true or false, "
                                             "got 'no'"),
    (_set(("metadata", "op", "shift"), 7),
     f"cpu program: layer '{LAYER}' does not describe its op ({LAYER.replace('>>6', '>>7')})"),
    (_set(("metadata", "op", "kernel"), [3, 2, 1]),
     "cpu program: op: kernel: expected an int or a pair, got [3, 2, 1]"),
    (_set(("metadata", "op", "batch"), 1 << 40),
     f"cpu program: tensor 'data' has shape (2, 13, 10, 9), but conv2d {1 << 40}x13x10x9"),
    (_drop(("metadata", "cpu", "schedule")), "cpu program: metadata['cpu'] has no 'schedule'"),
    (_set(("metadata", "cpu", "code"), "int main;"),
     "cpu program: unknown metadata['cpu'] field(s) 'code'"),
    (_set(("metadata", "extra"), 1), "cpu program: unknown metadata field(s) 'extra'"),
    (_set(("metadata", "cpu"), "C"), "cpu program: metadata['cpu'] must be a JSON object, "
                                     "got str"),
    (_set(("metadata", "cpu", "isa"), 3), "cpu program: isa must be a string, got 3"),
    (_set(("metadata", "cpu", "flags"), "-O3"), "cpu program: flags must be a list of strings"),
    (_set(("metadata", "cpu", "source"), "int x;"),
     "cpu program: its stored C is not the C vdla generates for its op, mode and schedule"),
    (_set(("tensors", 3, "role"), "input"),
     f"cpu program: tensor 'out' has role 'input', but {LAYER} (int8) gives it role 'output'"),
    (_set(("tensors", 0, "dram_offset"), 64),
     f"cpu program: tensor 'data' has dram_offset 64, but {LAYER} (int8) gives it dram_offset 0"),
    (lambda h: h["tensors"].pop(2),
     f"cpu program: its tensors are 'data', 'weight', 'out', but {LAYER} (int8) takes 'data', "
     "'weight', 'bias', 'out'"),
    (_set(("dram_bytes",), 64), "cpu program: a host program has no instructions and no DRAM "
                                "plan, but this one has dram_bytes 64"),
]


@pytest.mark.parametrize("edit, message", CPU_EDITS, ids=range(len(CPU_EDITS)))
def test_each_cpu_header_edit_is_refused_in_one_line(cpu_file, edit, message):
    data = _edited(cpu_file, edit)
    with pytest.raises(ProgramFileError, match=f"^program file: {re.escape(message)}"):
        loads(data)
    # The same check stands before a run of a program loaded unchecked (or built in memory).
    inputs = OP.random_inputs(np.random.default_rng(0))
    with pytest.raises(ProgramError, match=f"^{re.escape(message)}"):
        CpuRunner().run(loads(data, verify=False), inputs)


GPU_EDITS = [
    (_set(("metadata", "gpu", "mode"), "fp64"),
     "gpu program: mode 'fp64' is not one of int8, fp16, fp32"),
    (_set(("metadata", "gpu", "mode"), "fp16"),
     "gpu program: tensor 'data' has layout 'host_int8', but dense 3x10 -> 7 +bias >>4 (fp16) "
     "gives it layout 'host_float16'"),
    (_set(("metadata", "gpu", "schedule", "block_k"), 4096),
     "gpu program: schedule: staged tiles of 524288 bytes ((block_m + block_n) x block_k words) "
     "exceed the GPU's 49152 bytes of static shared memory"),
    (_set(("metadata", "gpu", "ptxas"), {"registers": 1}),
     "gpu program: ptxas must be null or ptxas's report, got {'registers': 1}"),
    (_set(("metadata", "gpu", "source"), "__global__ void vdla_layer() {}"),
     "gpu program: its stored CUDA C is not the CUDA C vdla generates for its op, mode and "
     "schedule"),
    (_set(("tensors", 1, "shape"), [7, 11]),
     "gpu program: tensor 'weight' has shape (7, 11), but dense 3x10 -> 7 +bias >>4 (int8) "
     "gives it shape (7, 10)"),
]


@pytest.mark.parametrize("edit, message", GPU_EDITS, ids=range(len(GPU_EDITS)))
def test_each_gpu_header_edit_is_refused_in_one_line(gpu_file, edit, message):
    with pytest.raises(ProgramFileError, match=f"^program file: {re.escape(message)}"):
        loads(_edited(gpu_file, edit))


def test_a_consistent_edit_is_another_valid_program_and_runs_as_one(cpu_file):
    """The kernel comes from the header alone: edit the op, its tensors and its
    descriptions together and the file is simply another layer, computed right."""
    other = Conv2d(1, 6, 5, 7, 8, kernel=3, padding=1, bias=True, shift=4)
    header, rest = split(cpu_file)
    header["metadata"].update(op=other.to_dict(), layer=other.describe(),
                              op_description=other.describe())
    for tensor, shape in zip(header["tensors"], ([1, 6, 7, 8], [5, 6, 3, 3], [5], [1, 5, 7, 8])):
        tensor["shape"] = shape
    program = loads(sign(json.dumps(header).encode(), rest))
    inputs = other.random_inputs(np.random.default_rng(1))
    out = CpuRunner().run(program, inputs).outputs["out"]
    np.testing.assert_array_equal(out, other.reference(**inputs))


def test_a_tensor_beyond_the_size_limit_is_refused_before_anything_is_allocated():
    program = compile_cpu(Dense(1, 4, 4), "int8")
    huge = Dense(1 << 21, 1 << 10, 4)   # data alone: 2 GiB of int8
    header, rest = split(dumps(program))
    header["metadata"].update(op=huge.to_dict(), layer=huge.describe(),
                              op_description=huge.describe())
    for tensor, shape in zip(header["tensors"], ([1 << 21, 1 << 10], [4, 1 << 10],
                                                 [1 << 21, 4])):
        tensor["shape"] = shape
    with pytest.raises(ProgramFileError, match=re.escape(
            f"cpu program: tensor 'data' of shape {(1 << 21, 1 << 10)} takes {1 << 31} bytes")):
        loads(sign(json.dumps(header).encode(), rest))


def test_spec_is_the_regenerated_code(cpu_file):
    spec = host_spec(loads(cpu_file))
    assert spec.op == OP and spec.mode == "int8" and spec.target.name == "cpu"
    assert spec.source.startswith("/* vdla cpu kernel (int8), generated")
    assert spec.key == host_spec(loads(cpu_file)).key
