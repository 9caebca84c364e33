"""The vdla compiler: conv2d / dense layers for three targets.

What the targets share sits at this package's root: the layer definitions
(`ops`, with their requantisation `requant`), the errors (`errors`), the
declared tuning knobs (`knobs`), and what the host targets' programs hold
and how they are checked and run (`host_target`, `host`, `host_runner`).
Each target is a sub-package above it:

- `accel`: the accelerator's instruction stream (schedule, loop IR, passes,
  code generation; `compiler.accel`'s docstring draws the flow);
- `cpu`: generated C for the host CPU;
- `gpu`: generated CUDA C.

Above the targets: `runners` (a target's runner by name), `workloads` (named
layers, judged on the accelerator) and this package, whose names are the
accelerator compiler's public surface.

>>> from vdla.compiler import Conv2d, compile_op
>>> from vdla.hw.config import PRESETS
>>> program = compile_op(Conv2d(1, 64, 64, 56, 56, kernel=3, padding=1), PRESETS["default"])
"""

from vdla.compiler.accel.driver import compile_function, compile_op
from vdla.compiler.accel.schedule import Schedule, load_schedule
from vdla.compiler.accel.search import default_schedule
from vdla.compiler.errors import CompileError, ScheduleError, ShapeError
from vdla.compiler.ops import Conv2d, Dense, op_from_dict
# The host targets register themselves (`host_target.register_host_target`) and
# `host` their programs' header check (`runtime.program_file`) when imported.
from vdla.compiler.cpu import program as _cpu_program  # noqa: F401
from vdla.compiler.gpu import program as _gpu_program  # noqa: F401
from vdla.compiler import host  # noqa: F401

__all__ = ["compile_op", "compile_function", "Conv2d", "Dense", "op_from_dict", "Schedule",
           "default_schedule", "load_schedule", "CompileError", "ScheduleError", "ShapeError"]
