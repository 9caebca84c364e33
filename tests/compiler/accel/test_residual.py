"""A residual added in a convolution's accumulator (`ops.Epilogue.residual_shift`).

``out = clip((acc + bias + (r << d)) >> shift)``: the int8 residual enters the
accumulator through the GEMM unit (its tile GEMMed with a constant ``2^j * I``
weight block, ALU SHL by the rest of ``d``), before the convolution's chunks.
Random and odd layers run on fsim (and a sample on the RTL) and as the cpu
target's C, bit-exact with numpy; each case is checked to depend on the residual and on ``d``, so a
dropped or misaligned residual fails.
"""

import dataclasses

import numpy as np
import pytest

from vdla.compiler import Conv2d, compile_op
from vdla.compiler.accel.cost import estimate_cost
from vdla.compiler.cpu.codegen import generate_op_c
from vdla.compiler.cpu.program import compile_cpu
from vdla.compiler.cpu.runner import CpuRunner
from vdla.compiler.cpu.schedule import CpuProblem, default_cpu_schedule
from vdla.compiler.gpu.program import compile_gpu
from vdla.compiler.errors import ScheduleError, ShapeError
from vdla.compiler.ops import MAX_RESIDUAL_SHIFT, op_from_dict
from vdla.compiler.accel.schedule import Schedule
from vdla.hw.config import PRESETS
from vdla.hw.isa import AluOp
from vdla.runtime import program_file
from vdla.runtime.errors import ProgramError
from vdla.runtime.runner import AccelRunner
from vdla.runtime.verify import verify_plan

TINY, DEFAULT = PRESETS["tiny"], PRESETS["default"]


def _layer(rng, residual_shift, square=True, **fields):
    """A random conv with a residual, and inputs whose convolution and residual both count.

    Data and weights are small, so that ``r << d`` and the sums are of like size for any
    ``d``; the shift is the one that keeps most outputs inside int8 (informative)."""
    base = dict(batch=int(rng.integers(1, 4)), in_channels=int(rng.integers(1, 20)),
                out_channels=int(rng.integers(1, 20)), height=int(rng.integers(3, 11)),
                width=int(rng.integers(3, 11)), kernel=int(rng.choice([1, 3])),
                stride=int(rng.choice([1, 2])), bias=bool(rng.random() < 0.7),
                relu=bool(rng.random() < 0.5))
    base["padding"] = int(rng.integers(0, base["kernel"]))
    base |= fields
    op = Conv2d(**base, residual_shift=residual_shift)
    inputs = op.random_inputs(rng)
    limit = min(128, 1 << max(1, residual_shift // 2 + 2))
    inputs["data"] = rng.integers(-limit, limit, size=inputs["data"].shape, dtype=np.int8)
    inputs["weight"] = rng.integers(-limit, limit, size=inputs["weight"].shape, dtype=np.int8)
    if op.bias:
        inputs["bias"] = rng.integers(-(4 << residual_shift), 4 << residual_shift,
                                      size=inputs["bias"].shape, dtype=np.int32)
    total = (op.accumulate(inputs["data"], inputs["weight"])
             + (inputs["residual"].astype(np.int64) << residual_shift))
    shift = max(0, int(np.ceil(np.log2(max(1.0, np.percentile(np.abs(total), 90) / 100)))))
    return dataclasses.replace(op, shift=shift), inputs


def _check(op, inputs, config, sim="fsim", schedule=None, runner=None):
    program = compile_op(op, config, schedule)
    result = (runner or AccelRunner(config, sim=sim)).run(program, inputs)
    expected = op.reference(**inputs)
    got = result.outputs["out"]
    mismatches = np.argwhere(got != expected)
    assert mismatches.size == 0, (f"{op.describe()} on {sim}: {len(mismatches)} mismatches, "
                                  f"first at {mismatches[:3].tolist()}")
    # The check can fail: the residual, and its alignment, change the result.
    plain = dataclasses.replace(op, residual_shift=None)
    without = {name: value for name, value in inputs.items() if name != "residual"}
    assert np.mean(plain.reference(**without) != expected) > 0.1
    if op.residual_shift < MAX_RESIDUAL_SHIFT:
        misaligned = dataclasses.replace(op, residual_shift=op.residual_shift + 1)
        assert np.mean(misaligned.reference(**inputs) != expected) > 0.1
    return program, result


@pytest.mark.parametrize("name", ["tiny", "default"])
@pytest.mark.parametrize("residual_shift", [0, 1, 4, 6, 7, 11, MAX_RESIDUAL_SHIFT])
def test_random_layers_on_fsim(name, residual_shift):
    rng = np.random.default_rng(residual_shift * 7 + len(name))
    for _ in range(3):
        _check(*_layer(rng, residual_shift), PRESETS[name])


@pytest.mark.parametrize("schedule", [
    Schedule(tile_h=2, tile_w=3, tile_k=1, tile_c=1, virtual_threads=3, loop_order="kbhw"),
    Schedule(tile_h=5, tile_w=5, tile_k=2, tile_c=1, virtual_threads=2, resident_weights=True),
    Schedule(tile_b=2, tile_h=4, tile_w=4, tile_k=1, tile_c=1, virtual_threads=2,
             resident_input=True),
    Schedule(tile_h=1, tile_w=5, tile_k=1, tile_c=2, latency_hiding=False),
], ids=["three-threads", "resident-weights", "resident-input", "serial"])
def test_every_schedule_kind(schedule):
    """Ragged tiles, threads, resident operands and the serial ablation: the residual's
    tile buffer, its identity block and the tokens around them."""
    rng = np.random.default_rng(5)
    op, inputs = _layer(rng, 9, batch=2, in_channels=8, out_channels=9, height=4, width=4,
                        kernel=3, stride=1, padding=1)
    program, _ = _check(op, inputs, TINY, schedule=schedule)
    # One SHL pass per tile (d = 9 > 6), and the identity loaded once.
    plan = schedule.check(op.geometry(), TINY)
    alus = [i for i in program.instructions if getattr(i, "alu_op", None) == AluOp.SHL]
    tiles = np.prod([plan.counts[a] for a in "bkhw"])
    assert len(alus) == tiles
    identity = program.tensor("identity")
    wgt_loads = [i for i in program.instructions
                 if type(i).__name__ == "Load" and i.memory_type.kind == "wgt"
                 and i.dram_base * TINY.element_bytes("wgt") == identity.dram_offset]
    assert len(wgt_loads) == 1


def test_no_shift_pass_up_to_the_identitys_power():
    rng = np.random.default_rng(3)
    for d in (6, 7):
        op, inputs = _layer(rng, d, in_channels=8, out_channels=8)
        program, _ = _check(op, inputs, TINY)
        shifts = sum(getattr(i, "alu_op", None) == AluOp.SHL for i in program.instructions)
        assert (shifts > 0) is (d > 6)
        assert program.tensor("identity").shape == (1 << min(d, 6),)


def test_the_program_states_the_residual_and_a_constant_identity():
    op = Conv2d(2, 6, 7, 5, 4, kernel=3, padding=1, bias=True, shift=8, residual_shift=8)
    program = compile_op(op, TINY)
    names = {t.name: (t.role, t.layout, t.shape) for t in program.tensors}
    assert names["residual"] == ("input", "activation", (2, 7, 5, 4))
    assert names["identity"] == ("constant", "identity", (64,))
    assert [t.name for t in program.inputs] == ["data", "weight", "bias", "residual"]
    assert op.input_names() == ["data", "weight", "bias", "residual"]
    # The file keeps it, and a hostile edit of the constant is refused on load.
    loaded = program_file.loads(program_file.dumps(program))
    assert [(t.name, t.role, t.shape) for t in loaded.tensors] == \
        [(t.name, t.role, t.shape) for t in program.tensors]
    for change, message in (
            (dict(shape=(3,)), "identity: the shape states its scale, a power of two from 1 "
                               "to 64, got (3,)"),
            (dict(shape=(128,)), "identity: the shape states its scale, a power of two from 1 "
                                 "to 64, got (128,)"),
            (dict(role="input"), "has role input and layout identity: constants are exactly "
                                 "the regions of a constant layout (identity)")):
        edited = dataclasses.replace(program, tensors=[
            dataclasses.replace(t, **change) if t.name == "identity" else t
            for t in program.tensors])
        with pytest.raises(ProgramError) as error:
            verify_plan(edited)
        assert message in str(error.value)
    residual = dataclasses.replace(program, tensors=[
        dataclasses.replace(t, role="constant") if t.name == "residual" else t
        for t in program.tensors])
    with pytest.raises(ProgramError, match="has role constant and layout activation"):
        verify_plan(residual)


def test_the_op_describes_and_rebuilds_itself():
    op = Conv2d(1, 8, 8, 5, 5, kernel=3, padding=1, bias=True, shift=9, relu=True,
                residual_shift=3)
    assert op.describe() == "conv2d 1x8x5x5 -> 8 k3x3 s1x1 p1x1 +bias +res<<3 >>9 relu"
    assert dataclasses.replace(op, residual_shift=0).describe().endswith("+bias +res >>9 relu")
    assert op_from_dict(op.to_dict()) == op
    assert "residual_shift" not in Conv2d(1, 8, 8, 5, 5).to_dict()   # older files: unchanged


@pytest.mark.parametrize("fields, message", [
    (dict(residual_shift=MAX_RESIDUAL_SHIFT + 1), "residual_shift: expected an integer from 0 "
                                                  "to 24, got 25"),
    (dict(residual_shift=-1), "residual_shift: expected an integer from 0 to 24, got -1"),
    (dict(residual_shift=True), "residual_shift: expected an integer from 0 to 24, got True"),
    (dict(residual_shift=2, multiplier=3, bias=True), "residual_shift: a residual adds into "
                                                      "plain shift epilogues only, not with a "
                                                      "multiplier"),
])
def test_bad_fields_are_refused(fields, message):
    with pytest.raises(ShapeError) as error:
        Conv2d(1, 4, 4, 3, 3, **fields)
    assert str(error.value) == message


def test_reference_checks_the_residual():
    op = Conv2d(1, 4, 4, 3, 3, residual_shift=1)
    inputs = op.random_inputs(np.random.default_rng(0))
    with pytest.raises(ShapeError, match=r"residual: expected shape \(1, 4, 1, 1\), got \(1, 4\)"):
        op.reference(inputs["data"], inputs["weight"], residual=np.zeros((1, 4), np.int8))


def test_a_rectangular_gemm_block_is_refused():
    op = Conv2d(1, 8, 8, 5, 5, kernel=3, padding=1, residual_shift=2)
    with pytest.raises(ShapeError) as error:
        compile_op(op, PRESETS["odd"])
    assert str(error.value) == ("residual: config 'odd''s GEMM block is 4x8; the int8 residual "
                                "enters the accumulator through the GEMM only on a square "
                                "block (block_in == block_out)")


@pytest.mark.parametrize("residual_shift", [0, 5, 13])
@pytest.mark.slow
def test_the_cpu_target_adds_it_bit_exact(residual_shift):
    """The cpu target's generated C: dense and depthwise kernels, odd channel counts,
    strides, batch 2, as the accelerator computes (numpy)."""
    rng = np.random.default_rng(residual_shift)
    runner = CpuRunner()
    for fields in (dict(batch=2, in_channels=12, out_channels=37, stride=2, kernel=3, padding=1),
                   dict(in_channels=8, out_channels=8, kernel=3, padding=1, groups=8),
                   dict(in_channels=5, out_channels=19, kernel=1)):
        groups = fields.pop("groups", 1)
        op, inputs = _layer(rng, residual_shift, **fields)
        if groups > 1:
            op = dataclasses.replace(op, groups=groups)
            inputs["weight"] = inputs["weight"][:, :1].copy()
        result = runner.run(compile_cpu(op), inputs)
        expected = op.reference(**inputs)
        assert np.array_equal(result.outputs["out"], expected), op.describe()
        plain = dataclasses.replace(op, residual_shift=None)
        assert np.mean(plain.reference(**{k: v for k, v in inputs.items() if k != "residual"})
                       != expected) > 0.1


def test_the_cpu_kernels_without_a_residual_are_unchanged():
    op = Conv2d(1, 8, 8, 5, 5, kernel=3, padding=1, bias=True, shift=9)
    schedule = default_cpu_schedule(CpuProblem.from_op(op), "int8")
    plain = generate_op_c(op, "int8", schedule)
    assert "RES_SHIFT" not in plain and "vdla_run_residual" not in plain
    fused = generate_op_c(dataclasses.replace(op, residual_shift=3), "int8", schedule)
    assert "#define RES_SHIFT 3" in fused and "vdla_run_residual" in fused


def test_fp32_and_the_gpu_refuse_it_in_one_line():
    op = Conv2d(1, 8, 8, 5, 5, kernel=3, residual_shift=2)
    with pytest.raises(ShapeError) as error:
        compile_cpu(op, mode="fp32")
    assert str(error.value) == "a residual is int8 only (mode fp32 adds none)"
    with pytest.raises(ShapeError) as error:
        compile_gpu(op, check_with_nvcc=False)
    assert str(error.value) == ("conv2d 1x8x5x5 -> 8 k3x3 s1x1 p0x0 +res<<2: the gpu target adds "
                                "no residual (use the accelerator or the cpu target)")


def test_the_schedule_counts_the_residuals_buffers():
    op = Conv2d(1, 16, 16, 8, 8, kernel=3, padding=1, residual_shift=2)
    plain = dataclasses.replace(op, residual_shift=None)
    schedule = Schedule(tile_h=8, tile_w=8, tile_k=2, tile_c=2, virtual_threads=2)
    with_residual = schedule.check(op.geometry(), TINY.replace(inp_buffer_bytes=8192,
                                                               name="roomy"))
    without = schedule.check(plain.geometry(), TINY.replace(inp_buffer_bytes=8192,
                                                            name="roomy"))
    # Each thread holds its residual tile (8x8 positions x 2 channel blocks); one identity.
    assert with_residual.usage()["inp"] - without.usage()["inp"] == 2 * 128
    assert with_residual.usage()["wgt"] - without.usage()["wgt"] == 1
    assert estimate_cost(with_residual) > estimate_cost(without)
    tight = TINY.replace(inp_buffer_bytes=2048, name="tight")     # 512 entries
    schedule.check(plain.geometry(), tight)
    with pytest.raises(ScheduleError) as error:
        schedule.check(op.geometry(), tight)
    assert str(error.value) == (
        "schedule does not fit the inp buffer: 656 entries needed (2 virtual thread(s) x "
        "tile_b*tile_c*input rows*input columns + 2 x tile_b*tile_k*tile_h*tile_w residual), "
        "512 available; reduce tile_h=8 or tile_w=8 or tile_c=2 or tile_b=1 or "
        "virtual_threads=2")


@pytest.mark.rtl
def test_on_the_rtl_tiny():
    """The RTL (tiny) runs the same programs bit-exact: d = 0, d <= 6 and d > 6, relu on and
    off, strides, padding, batch 2, channels off the block."""
    rng = np.random.default_rng(11)
    device = AccelRunner(TINY, sim="rtl")
    for d, fields in ((0, dict(relu=False)), (4, dict(batch=2, stride=2, relu=True)),
                      (9, dict(in_channels=7, out_channels=6, kernel=3, padding=1))):
        _check(*_layer(rng, d, **fields), TINY, sim="rtl", runner=device)


@pytest.mark.rtl
@pytest.mark.slow
def test_on_the_rtl_default():
    rng = np.random.default_rng(12)
    op, inputs = _layer(rng, 8, batch=1, in_channels=20, out_channels=18, height=7, width=6,
                        kernel=3, stride=1, padding=1, relu=True)
    _check(op, inputs, DEFAULT, sim="rtl")


def _compute_stream(op, config):
    """The program's compute instructions (GEMM and ALU), in order."""
    program = compile_op(op, config)
    return program, [i for i in program.instructions if type(i).__name__ in ("Gemm", "Alu")]


@pytest.mark.parametrize("name, fields", [
    ("default", dict(in_channels=64, out_channels=64, height=14, width=14)),
    ("default", dict(in_channels=32, out_channels=48, height=20, width=9)),
    ("tiny", dict(in_channels=8, out_channels=12, height=9, width=7)),
])
def test_the_shift_runs_beside_the_other_threads_gemm(name, fields):
    """With two threads the residual's GEMM and SHL move into the other thread's GEMM
    stage (`passes.overlap.hoist_resets`): the SHL is marked to overlap and follows the tail
    of that thread's GEMM, cut off for it; nothing waits for it but the tile's own GEMMs.
    The residual's GEMM overwrites the accumulators (`passes.gemm_reset`): no ALU reset."""
    config = PRESETS[name]
    op = Conv2d(batch=1, kernel=3, padding=1, bias=True, shift=9, residual_shift=8, **fields)
    program, stream = _compute_stream(op, config)
    assert program.metadata["schedule"]["virtual_threads"] == 2
    shls = [n for n, i in enumerate(stream) if getattr(i, "alu_op", None) == AluOp.SHL]
    assert shls
    hoisted = shls[1:]     # the first tile's: no GEMM of the other thread before it
    assert not stream[shls[0]].overlap
    assert hoisted and all(stream[n].overlap for n in hoisted)
    for n in hoisted:
        # residual GEMM (overwriting), the other thread's GEMM tail, then the SHL beside it
        assert [type(i).__name__ for i in stream[n - 2:n + 1]] == ["Gemm", "Gemm", "Alu"]
        assert stream[n - 2].overwrite and stream[n - 1].overlap
    plain = dataclasses.replace(op, residual_shift=None)
    plain_stream = _compute_stream(plain, config)[1]

    def resets(instructions):
        return sum(getattr(i, "reset", False) for i in instructions)
    assert resets(stream) == 0
    # Per tile the residual adds its GEMM and SHL, one GEMM is cut in two, and the ALU
    # reset goes.
    assert len(plain_stream) - resets(plain_stream) == \
        len(stream) - 2 * len(shls) - len(hoisted)


@pytest.mark.rtl
def test_on_the_rtl_the_shift_costs_no_gemm_time():
    """RTL cycles at default: a residual with d = 8 (its SHL hidden) costs no more than one
    with d = 6 (no SHL); before the SHL was hoisted it cost 1,108 cycles more (30,697 and
    31,805 cycles). The residual's GEMM (one micro-op per output entry) remains; it
    overwrites the accumulators (`passes.gemm_reset`), so no ALU reset precedes it
    (30,738 and 30,662 cycles with the reset)."""
    rng = np.random.default_rng(21)
    device = AccelRunner(DEFAULT, sim="rtl")
    plain = Conv2d(batch=1, in_channels=64, out_channels=64, height=14, width=14, kernel=3,
                   padding=1, bias=True, relu=True, shift=9)
    cycles = []
    for d in (None, 6, 8):
        op = dataclasses.replace(plain, residual_shift=d)
        inputs = op.random_inputs(rng)
        result = device.run(compile_op(op, DEFAULT), inputs)
        np.testing.assert_array_equal(result.outputs["out"], op.reference(**inputs))
        cycles.append(result.cycles)
    assert cycles == [29556, 30711, 30684]
