"""Ties rounded to even (`ops.Epilogue.rounding` ``"half_even"``, ALU REQUANT_EVEN).

The bias holds the half step ``2**(s-1)``, as the quantiser folds it in; a layer
with ``rounding="half_even"`` rounds ``(acc + bias - 2**(s-1)) / 2**s`` half to
even. Random layers with many ties (small shifts, small operands) run on fsim,
the RTL (a sample) and as the cpu target's C, each bit-exact with a numpy
reference written here with ``np.rint`` (round half to even), and each case is
checked to hold ties that half up rounds otherwise, so a mode that is dropped
on the way fails.
"""

import dataclasses

import numpy as np
import pytest

from vdla.compiler import Conv2d, Dense, compile_op
from vdla.compiler.accel.driver import compile_function
from vdla.compiler.cpu.codegen import generate_op_c
from vdla.compiler.cpu.program import compile_cpu
from vdla.compiler.cpu.runner import CpuRunner
from vdla.compiler.cpu.schedule import CpuProblem, default_cpu_schedule
from vdla.compiler.errors import ShapeError
from vdla.compiler.gpu.program import compile_gpu
from vdla.compiler.ops import op_from_dict
from vdla.hw.config import PRESETS
from vdla.hw.isa import Alu, AluOp
from vdla.runtime import program_file
from vdla.runtime.runner import AccelRunner

TINY, DEFAULT = PRESETS["tiny"], PRESETS["default"]


def _layer(rng, dense=False, **fields):
    """A random layer rounding half to even, with small operands and a small shift (many
    ties), its inputs (the bias holding the half step) and the sums before the epilogue."""
    shift = int(rng.integers(1, 5))
    base = dict(bias=True, shift=shift, relu=bool(rng.random() < 0.5), rounding="half_even")
    if dense:
        op = Dense(int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.integers(1, 40)),
                   **base | fields)
    else:
        base |= dict(batch=int(rng.integers(1, 3)), in_channels=int(rng.integers(1, 20)),
                     out_channels=int(rng.integers(1, 20)), height=int(rng.integers(3, 9)),
                     width=int(rng.integers(3, 9)), kernel=int(rng.choice([1, 3])),
                     stride=int(rng.choice([1, 2])))
        base["padding"] = int(rng.integers(0, base["kernel"]))
        op = Conv2d(**base | fields)
    inputs = op.random_inputs(rng)
    inputs["data"] = rng.integers(-6, 7, size=inputs["data"].shape, dtype=np.int8)
    inputs["weight"] = rng.integers(-6, 7, size=inputs["weight"].shape, dtype=np.int8)
    inputs["bias"] = (rng.integers(-40, 40, size=inputs["bias"].shape)
                      + (1 << op.shift >> 1)).astype(np.int32)
    return op, inputs


def _round_half_even(op, inputs) -> np.ndarray:
    """The layer's output from its definition: the sum less the folded half, divided by
    2**shift, rounded half to even (``np.rint``), clipped."""
    acc = (op.accumulate(inputs["data"], inputs["weight"]) if isinstance(op, Conv2d)
           else inputs["data"].astype(np.int64) @ inputs["weight"].astype(np.int64).T)
    bias = inputs["bias"].astype(np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
    value = (acc + bias - (1 << op.shift >> 1)) / 2.0 ** op.shift
    return np.clip(np.rint(value), 0 if op.relu else -128, 127).astype(np.int8)


def _check(op, got, inputs) -> int:
    """Assert ``got`` is the layer's output; return how many outputs are ties that half
    up rounds the other way (the callers' cases hold some: the check can fail)."""
    expected = _round_half_even(op, inputs)
    mismatches = np.argwhere(got != expected)
    assert mismatches.size == 0, f"{op.describe()}: {len(mismatches)} mismatches"
    assert np.array_equal(op.reference(**inputs), expected)
    half_up = dataclasses.replace(op, rounding="half_up").reference(**inputs)
    return int(np.sum(half_up != expected))


@pytest.mark.parametrize("name", ["tiny", "default"])
@pytest.mark.parametrize("dense", [False, True], ids=["conv", "dense"])
def test_random_layers_on_fsim(name, dense):
    rng = np.random.default_rng(len(name) + 10 * dense)
    runner = AccelRunner(PRESETS[name], sim="fsim")
    ties = 0
    for _ in range(3):
        op, inputs = _layer(rng, dense)
        program = compile_op(op, PRESETS[name])
        requants = {i.alu_op for i in program.instructions
                    if isinstance(i, Alu) and i.alu_op in (AluOp.REQUANT, AluOp.REQUANT_EVEN)}
        assert requants == {AluOp.REQUANT_EVEN}
        ties += _check(op, runner.run(program, inputs).outputs["out"], inputs)
    assert ties > 0


@pytest.mark.slow
def test_the_cpu_target_rounds_them_bit_exact():
    """Dense, depthwise and strided kernels, odd channel counts."""
    rng = np.random.default_rng(4)
    runner = CpuRunner()
    cases = [(False, dict(batch=2, in_channels=12, out_channels=37, stride=2, kernel=3,
                          padding=1)),
             (False, dict(in_channels=8, out_channels=8, kernel=3, padding=1, groups=8)),
             (True, {})]
    ties = 0
    for dense, fields in cases:
        op, inputs = _layer(rng, dense, **fields)
        ties += _check(op, runner.run(compile_cpu(op), inputs).outputs["out"], inputs)
    assert ties > 0


def test_the_default_kernels_and_programs_are_unchanged():
    """Half up (the default) leaves the C and the instruction stream as they were;
    half even changes only the REQUANT's op and the C's shift."""
    op = Conv2d(1, 8, 8, 5, 5, kernel=3, padding=1, bias=True, shift=9)
    even = dataclasses.replace(op, rounding="half_even")
    schedule = default_cpu_schedule(CpuProblem.from_op(op), "int8")
    plain = generate_op_c(op, "int8", schedule)
    assert "ROUND_EVEN" not in plain
    assert "#define ROUND_EVEN 1" in generate_op_c(even, "int8", schedule)
    words = [compile_op(layer, TINY).instructions for layer in (op, even)]
    assert [i.replace(alu_op=AluOp.REQUANT)
            if isinstance(i, Alu) and i.alu_op == AluOp.REQUANT_EVEN else i
            for i in words[1]] == words[0] != words[1]
    assert op.to_dict() == Conv2d(1, 8, 8, 5, 5, kernel=3, padding=1, bias=True,
                                  shift=9).to_dict() and "rounding" not in op.to_dict()


def test_the_op_describes_and_rebuilds_itself():
    op = Conv2d(1, 8, 8, 5, 5, kernel=3, bias=True, shift=4, relu=True, rounding="half_even")
    assert op.describe() == "conv2d 1x8x5x5 -> 8 k3x3 s1x1 p0x0 +bias >>4 even relu"
    assert op_from_dict(op.to_dict()) == op
    program = compile_op(op, TINY)
    assert op_from_dict(program_file.loads(program_file.dumps(program)).metadata["op"]) == op


@pytest.mark.parametrize("fields, message", [
    (dict(rounding="nearest"), r"^rounding: expected one of half_up, half_even, got 'nearest'$"),
    (dict(rounding=["half_even"]),
     r"^rounding: expected one of half_up, half_even, got \['half_even'\]$"),
    (dict(rounding="half_even", bias=True, multiplier=300, shift=12),
     r"^rounding half_even: a fixed-point multiplier rounds half up only \(its rounding shift "
     r"drops the bits a tie needs\)$"),
])
def test_bad_roundings_are_refused(fields, message):
    with pytest.raises(ShapeError, match=message):
        Conv2d(1, 8, 8, 5, 5, **fields)


def test_the_unfused_epilogue_fp32_and_the_gpu_refuse_it_in_one_line():
    op = Conv2d(1, 8, 8, 5, 5, kernel=3, bias=True, shift=3, rounding="half_even")
    with pytest.raises(ShapeError, match=r"^rounding half_even needs the fused REQUANT epilogue "
                                         r"\(REQUANT_EVEN\); the four ALU passes round half up$"):
        compile_function(op, TINY, fused_epilogue=False)
    with pytest.raises(ShapeError, match=r"^rounding half_even: int8 only \(mode fp32 does not "
                                         r"round\)$"):
        compile_cpu(op, mode="fp32")
    with pytest.raises(ShapeError, match=r"^conv2d 1x8x5x5 -> 8 k3x3 s1x1 p0x0 \+bias >>3 even: "
                                         r"the gpu target rounds ties half up only"):
        compile_gpu(op, check_with_nvcc=False)


@pytest.mark.rtl
@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny", "default"])
def test_on_the_rtl(name):
    """fsim's result (checked above) is the RTL's: a conv and a dense layer."""
    config = PRESETS[name]
    rng = np.random.default_rng(7)
    device = AccelRunner(config, sim="rtl")
    ties = 0
    for dense in (False, True):
        op, inputs = _layer(rng, dense, **({} if dense else dict(in_channels=9, out_channels=7)))
        ties += _check(op, device.run(compile_op(op, config), inputs).outputs["out"], inputs)
    assert ties > 0
