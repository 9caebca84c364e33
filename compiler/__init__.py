"""The vdla compiler: conv2d / dense layers to the accelerator's instruction stream.

Flow: op definition (`ops`) -> schedule (`schedule`; its space, cost model and
default search in `space`, `cost`, `search`) -> loop IR (`lower`, `ir`) ->
passes (the declared `pipeline` of `passes`) -> program (`codegen`).

>>> from vdla.compiler import Conv2d, compile_op
>>> from vdla.hw.config import PRESETS
>>> program = compile_op(Conv2d(1, 64, 64, 56, 56, kernel=3, padding=1), PRESETS["default"])
"""

from vdla.compiler.driver import compile_function, compile_op
from vdla.compiler.errors import CompileError, ScheduleError, ShapeError
from vdla.compiler import host  # noqa: F401  (registers the host programs' header check)
from vdla.compiler.ops import Conv2d, Dense, op_from_dict
from vdla.compiler.schedule import Schedule, load_schedule
from vdla.compiler.search import default_schedule

__all__ = ["compile_op", "compile_function", "Conv2d", "Dense", "op_from_dict", "Schedule",
           "default_schedule", "load_schedule", "CompileError", "ScheduleError", "ShapeError"]
