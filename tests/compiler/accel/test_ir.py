"""The loop IR's affine expressions and nest helpers."""

import numpy as np

from vdla.compiler.accel import ir
from vdla.compiler.accel.ir import Affine


def test_affine_arithmetic():
    x, y = Affine.var("x"), Affine.var("y")
    expr = (x * 3 + y + 2) * 2 + x
    assert expr.coef("x") == 7 and expr.coef("y") == 2 and expr.const == 4
    assert expr.evaluate({"x": 1, "y": 5}) == 21
    assert (expr + x * -7).coef("x") == 0 and "x" not in (expr + x * -7).terms
    assert hash(x + 1) == hash(Affine({"x": 1}, 1)) and x + 1 == Affine({"x": 1}, 1)


def test_enumerate_affine_matches_loops():
    expr = Affine.var("i") * 5 + Affine.var("j") + 3
    loops = [("i", 3), ("j", 4)]
    expected = [5 * i + j + 3 for i in range(3) for j in range(4)]
    assert np.array_equal(ir.enumerate_affine(expr, loops), expected)


def test_nest_round_trip():
    leaf = ir.Alu(op=None, dst=ir.Access(ir.Buffer("a", "acc", 4), Affine.var("i")), imm=0)
    loops, got = ir.loop_nest(ir.nest([("i", 2), ("j", 3)], leaf))
    assert [(loop.var, loop.extent) for loop in loops] == [("i", 2), ("j", 3)] and got is leaf
