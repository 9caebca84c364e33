"""cpu programs (`compiler.cpu.program`): the file records the target,
`CpuRunner` runs them, and each target's runner refuses the others'
programs with a clear error."""

from __future__ import annotations

import numpy as np
import pytest
from vdla.compiler import compile_op
from vdla.compiler.cpu import reference_fp32
from vdla.compiler.cpu.program import compile_cpu
from vdla.compiler.ops import Conv2d
from vdla.hw.config import PRESETS
from vdla.compiler.cpu.runner import CpuRunner
from vdla.compiler.runners import make_runner
from vdla.runtime.runner import AccelRunner, InputError, ProgramError
from vdla.runtime.program_file import ProgramFileError, dumps, load, loads, save

OP = Conv2d(2, 13, 11, 10, 9, kernel=(3, 2), stride=(1, 2), padding=(1, 1), bias=True,
            shift=6, relu=True)
TINY = PRESETS["tiny"]


@pytest.fixture(scope="module")
def cpu_program():
    return compile_cpu(OP, "int8")


def test_file_keeps_the_target_and_device_runs_it_bit_exact(cpu_program):
    program = loads(dumps(cpu_program))
    assert program.target == "cpu" and program.instructions == []
    inputs = OP.random_inputs(np.random.default_rng(0))
    result = CpuRunner().run(program, inputs)
    np.testing.assert_array_equal(result.outputs["out"], OP.reference(**inputs))
    assert result.sim == "cpu" and result.cycles is None and result.details["threads"] == 2


def test_fp32_program_takes_and_returns_float32():
    program = loads(dumps(compile_cpu(OP, "fp32")))
    inputs = {name: (array / 8).astype(np.float32)
              for name, array in OP.random_inputs(np.random.default_rng(1)).items()}
    out = CpuRunner(threads=1).run(program, inputs).outputs["out"]
    np.testing.assert_allclose(out, reference_fp32(OP, **inputs), rtol=1e-5, atol=1e-3)
    with pytest.raises(InputError, match=r"input 'data': expected float32 \(2, 13, 10, 9\), "
                                         r"got int8"):
        CpuRunner().run(program, {**inputs, "data": inputs["data"].astype(np.int8)})


def test_accelerator_programs_have_the_accel_target_and_old_files_default_to_it():
    program = loads(dumps(compile_op(OP, TINY)))
    assert program.target == "accel"


def test_each_runner_refuses_the_other_targets_programs(cpu_program):
    inputs = OP.random_inputs(np.random.default_rng(2))
    with pytest.raises(ProgramError, match="compiled for target 'cpu' cannot run on the "
                                           "accelerator's fsim simulator; run it with "
                                           "--target cpu"):
        AccelRunner(TINY).run(cpu_program, inputs)
    with pytest.raises(ProgramError, match="compiled for the accelerator .* cannot run on the "
                                           "cpu target"):
        CpuRunner().run(compile_op(OP, TINY), inputs)
    with pytest.raises(ValueError, match=r"unknown target 'tpu' \(known: accel, cpu, gpu\)"):
        make_runner("tpu", TINY)


def test_make_runner_picks_the_targets_runner():
    assert isinstance(make_runner("accel", TINY), AccelRunner)
    assert make_runner("accel", TINY, "fsim").sim == "fsim"
    assert make_runner("cpu", threads=3).threads == 3
    with pytest.raises(ValueError, match="AccelRunner: the accelerator target needs a config "
                                         r"\(an HwConfig\), got NoneType"):
        make_runner("accel")


def test_unknown_target_in_a_file_is_refused(cpu_program):
    program = loads(dumps(cpu_program))
    program.target = "tpu"
    with pytest.raises(ProgramFileError, match="unknown target 'tpu' \\(known: accel, cpu, gpu\\)"):
        loads(dumps(program))


def test_stored_c_or_a_bad_schedule_is_a_clear_error(cpu_program):
    inputs = OP.random_inputs(np.random.default_rng(5))
    program = loads(dumps(cpu_program))
    program.metadata["cpu"]["source"] = "this is not C;\n"
    with pytest.raises(ProgramError, match="cpu program: its stored C is not the C vdla generates "
                                           "for its op, mode and schedule"):
        CpuRunner().run(program, inputs)
    program = loads(dumps(cpu_program))
    program.metadata["cpu"]["schedule"]["lanes"] = 5
    with pytest.raises(ProgramError, match="cpu program: schedule: lanes: expected 8 or 16"):
        CpuRunner().run(program, inputs)


def test_the_file_holds_no_c_and_one_holding_the_generated_c_still_runs(cpu_program):
    assert "source" not in cpu_program.metadata["cpu"]
    program = loads(dumps(cpu_program))
    from vdla.compiler.host import host_spec
    program.metadata["cpu"]["source"] = host_spec(program).source   # as files used to
    inputs = OP.random_inputs(np.random.default_rng(3))
    out = CpuRunner().run(loads(dumps(program)), inputs).outputs["out"]
    np.testing.assert_array_equal(out, OP.reference(**inputs))


def test_saved_file_round_trip(tmp_path, cpu_program):
    path = save(cpu_program, tmp_path / "p.vdla")
    assert load(path).metadata == cpu_program.metadata
