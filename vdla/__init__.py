"""vdla: a hardware/software co-design framework for a VDLA-style int8 GEMM accelerator.

The repository keeps each part in a folder at its top; installed, they are the
sub-packages of this one namespace:

- `vdla.hw`: the configuration, the instruction set and the Amaranth RTL;
- `vdla.sim`: the functional simulator, the Verilator tier and the cocotb tier;
- `vdla.compiler`: layer definitions, schedules, loop IR, passes and code generation;
- `vdla.runtime`: tensor layouts, program files and `AccelRunner`;
- `vdla.bench`: layer benches, cycle baselines and their plots;
- `vdla.cli`: the ``vdla`` command.

>>> from vdla.compiler import Conv2d, compile_op
>>> from vdla.hw.config import PRESETS
>>> program = compile_op(Conv2d(1, 16, 16, 8, 8, kernel=3, padding=1), PRESETS["tiny"])
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("vdla")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
