"""Grouped convolutions whose groups neither fill whole GEMM blocks nor tile a block's
diagonal: runs of ``S`` groups compile as one dense group with zero weights between
its members (`compiler.ops._merged_groups`, the ``grouped:G:S`` weight layout).

Each layer runs on fsim bit-exact with `Conv2d.reference` (numpy, checked against
ONNX in `tests/compiler/test_ops.py`) and with the cpu target; one runs on the RTL.
"""

import numpy as np
import pytest

from vdla.compiler import Conv2d, compile_op
from vdla.compiler.accel.cost import estimate_cost
from vdla.compiler.accel.search import default_schedule
from vdla.compiler.cpu.program import compile_cpu
from vdla.compiler.cpu.runner import CpuRunner
from vdla.compiler.ops import accelerator_limits
from vdla.hw.config import PRESETS
from vdla.runtime.layout import LAYOUTS, LayoutError, grouped_layout, pack, unpack
from vdla.runtime.runner import AccelRunner


def _check(op, config, seed=0, cpu=True, sim="fsim"):
    inputs = op.random_inputs(np.random.default_rng(seed))
    expected = op.reference(**inputs)
    result = AccelRunner(config, sim=sim).run(compile_op(op, config), inputs)
    np.testing.assert_array_equal(result.outputs["out"], expected, err_msg=op.describe())
    if cpu:
        host = CpuRunner().run(compile_cpu(op), inputs).outputs["out"]
        np.testing.assert_array_equal(host, expected, err_msg=op.describe())
    return result


def _dense_weight(weight, groups, merged):
    """The ``grouped:G:S`` dense form, built group by group with loops."""
    out_channels, per_in = weight.shape[:2]
    per_out = out_channels // groups
    full = np.zeros((out_channels, merged * per_in, *weight.shape[2:]), weight.dtype)
    for group in range(groups):
        member = group % merged
        for k in range(group * per_out, (group + 1) * per_out):
            full[k, member * per_in:(member + 1) * per_in] = weight[k]
    return full


@pytest.mark.parametrize("shape, groups, merged", [((112, 6, 1, 1), 4, 4), ((12, 5, 3, 2), 6, 3),
                                                   ((8, 3, 2, 2), 2, 1)])
def test_grouped_layout_packs_the_dense_form(shape, groups, merged):
    config = PRESETS["odd"]
    weight = np.random.default_rng(1).integers(-128, 128, size=shape, dtype=np.int8)
    layout = grouped_layout(groups, merged)
    assert layout in LAYOUTS and LAYOUTS[layout] == LAYOUTS["weight"]
    packed = pack(layout, weight, config)
    dense = _dense_weight(weight, groups, merged)
    np.testing.assert_array_equal(packed, pack("weight", dense, config))
    np.testing.assert_array_equal(unpack(layout, packed, shape, config), weight)


def test_grouped_layout_refuses_groups_that_do_not_divide():
    weight = np.zeros((10, 2, 1, 1), np.int8)
    with pytest.raises(LayoutError, match=r"^w: layout grouped:4:2 takes 4 groups run 2 at a "
                                          r"time \(dividing them\) of whole output channels, got "
                                          r"weights \(10, 2, 1, 1\)$"):
        pack("grouped:4:2", weight, PRESETS["tiny"], "w")
    assert "grouped:0:1" not in LAYOUTS and "grouped:4" not in LAYOUTS


@pytest.mark.parametrize("kwargs, merged", [
    (dict(in_channels=16, out_channels=32, groups=4), 4),   # 4 in, 8 out per group
    (dict(in_channels=48, out_channels=16, groups=16), 16),  # 3 in, 1 out
    (dict(in_channels=24, out_channels=112, groups=4), 4),   # light ShuffleNet's n4
])
def test_former_refusals_lower_to_merged_groups(kwargs, merged):
    op = Conv2d(1, height=5, width=5, kernel=1, **kwargs)
    geometry = accelerator_limits(op.geometry(), PRESETS["default"])
    assert geometry.layouts["weight"] == f"grouped:{op.groups}:{merged}"
    assert geometry.groups == op.groups // merged
    assert geometry.shapes["weight"] == op.weight_shape


def test_light_shufflenet_grouped_layer():
    op = Conv2d(1, 24, 112, 7, 7, kernel=1, groups=4, bias=True, shift=7, relu=True)
    _check(op, PRESETS["default"])


def test_the_smallest_run_of_groups_is_taken_and_is_the_cheaper():
    # 24 input and output channels a group on 16x16 blocks: runs of 2 groups fill 3 blocks,
    # runs of all 4 make one dense layer of 6x6 blocks, twice the GEMMs.
    config = PRESETS["default"]
    op = Conv2d(1, 96, 96, 5, 5, kernel=3, padding=1, groups=4, bias=True, shift=9)
    chosen = accelerator_limits(op.geometry(), config)
    costs = {}
    for merged in (2, 4):
        candidate = chosen.__class__(**{**chosen.__dict__, "groups": 4 // merged, "layouts": {
            **chosen.layouts, "weight": grouped_layout(4, merged)}})
        costs[merged] = estimate_cost(default_schedule(candidate, config).check(candidate, config))
    assert chosen.layouts["weight"] == grouped_layout(4, min(costs, key=costs.get))
    assert chosen.layouts["weight"] == "grouped:4:2"
    result = _check(op, config)
    # Runs of two groups: 2 runs x 3x3 blocks per pixel and tap, against 6x6 dense.
    assert result.counters["gemm_uops"] == 2 * 3 * 3 * 25 * 9


@pytest.mark.parametrize("name", ["tiny", "default"])
def test_random_odd_groups(name):
    config, rng = PRESETS[name], np.random.default_rng(36 + len(name))
    for seed in range(4):
        groups = int(rng.integers(2, 9))
        per_in, per_out = (int(n) for n in rng.integers(1, 41, size=2))
        if name == "tiny":
            per_in, per_out = min(per_in, 12), min(per_out, 12)
        kernel = tuple(int(k) for k in rng.integers(1, 4, size=2))
        op = Conv2d(int(rng.integers(1, 3)), groups * per_in, groups * per_out,
                    int(rng.integers(2, 6)), int(rng.integers(2, 6)), kernel=kernel,
                    stride=tuple(int(s) for s in rng.integers(1, 3, size=2)),
                    padding=tuple(int(p) for p in rng.integers(0, 4, size=4)), groups=groups,
                    bias=True, shift=int(rng.integers(6, 11)), relu=bool(seed % 2))
        _check(op, config, seed=seed, cpu=seed < 2)


@pytest.mark.slow
@pytest.mark.rtl
def test_merged_groups_on_rtl():
    # 3 input and 5 output channels a group on tiny's 4x4 block, a window of only padding.
    op = Conv2d(1, 9, 15, 4, 5, kernel=(1, 2), stride=(2, 1), padding=(1, 0, 2, 1), groups=3,
                bias=True, shift=6)
    assert accelerator_limits(op.geometry(), PRESETS["tiny"]).layouts["weight"] == "grouped:3:3"
    _check(op, PRESETS["tiny"], cpu=False, sim="rtl")


def test_an_operators_geometry_plans_as_its_merged_one():
    # The network's estimate checks a program's schedule against the operator's own
    # geometry: it plans as the merged layer it compiled (here one dense group, whose
    # default schedule keeps the input resident, which 4 groups could not).
    config = PRESETS["default"]
    op = Conv2d(1, 24, 112, 7, 7, kernel=1, groups=4, bias=True, shift=7)
    schedule = default_schedule(op, config)
    plan = schedule.check(op.geometry(), config)
    assert plan.geometry == accelerator_limits(op.geometry(), config)
    assert plan.geometry.groups == 1 and schedule.resident_input
