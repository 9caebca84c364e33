"""vdla: a hardware/software co-design framework for a VDLA-style int8 GEMM accelerator.

The repository keeps each part in a folder at its top; installed, they are the
sub-packages of this one namespace, in layers (`vdla.layers`; bottom first):

- `vdla.errors`, `vdla.files`, `vdla.ints`, `vdla.cache`, `vdla.records`: what
  every part uses (the error base, file reads and writes, integer helpers, the
  one build cache, checked JSON records);
- `vdla.hw`: the configuration, the instruction set and the Amaranth RTL of the
  core; the boards (`vdla.hw.boards`) and synthesis (`vdla.hw.synth`);
- `vdla.sim`: the program checker and the simulation backends (fsim, Verilator, board);
- `vdla.runtime`: tensor layouts, program files and `AccelRunner`;
- `vdla.compiler`: layer definitions, schedules, loop IR, passes and code
  generation, with the ``cpu`` and ``gpu`` targets;
- `vdla.graph`, `vdla.frontend`: whole networks, and ONNX import;
- `vdla.bench`: layer and network benches, cycle baselines, comparisons, plots;
- `vdla.tune`: autotuning and design-space exploration;
- `vdla.cli`: the ``vdla`` command;
- `vdla.testing`: program generators, oracles and the cocotb benches tests share.

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
