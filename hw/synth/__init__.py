"""Synthesis and place-and-route reports for the accelerator, through YoWASP.

Everything here runs the pip-installed YoWASP builds of Yosys and nextpnr: no
vendor tool, nothing outside ``pip install``. One job per module:

`hw.synth.parts`
    The FPGA parts (`FpgaPart`, `PARTS`) and families (`FAMILIES`).
`hw.synth.tools`
    Finding and running the tools (`SynthError`), whether their first run
    (which compiles them) is still ahead, progress on stderr.
`hw.synth.reports`
    `SynthReport`, resources from Yosys's cells, nextpnr's critical paths.
`hw.synth.fit`
    Whether a design can fit a part, from its RTLIL, before any tool runs.
`hw.synth.flow`
    Yosys and nextpnr on a design, cached: `estimate`, `place_and_route`,
    netlists.
`hw.synth.clock`
    The last placed Fmax of each config, and the clock cycles become time at.

The names below are the package's public API (import them from here).
"""

from vdla.hw.synth.clock import clock_for, known_fmax, record_fmax
from vdla.hw.synth.fit import DoesNotFit, FitEstimate, check_fits, estimate_rtlil
from vdla.hw.synth.flow import (block_netlist, block_verilog, check_config_fits, core_netlist,
                                estimate, fit_estimate, netlist, place_and_route,
                                script_after_read, synthesize_rtlil)
from vdla.hw.synth.parts import (FAMILIES, PARTS, FpgaPart, lookup_part, nextpnr_options,
                                 synth_options)
from vdla.hw.synth.reports import SynthReport, critical_paths, overflows
from vdla.hw.synth.tools import (SynthError, first_run_note, progress_on_stderr, tool_path,
                                 uncompiled, yowasp_env)

__all__ = ["SynthError", "DoesNotFit", "SynthReport", "FitEstimate", "FpgaPart", "PARTS",
           "FAMILIES", "lookup_part", "synth_options", "nextpnr_options", "estimate", "place_and_route",
           "fit_estimate", "check_config_fits", "check_fits", "estimate_rtlil",
           "critical_paths", "overflows", "synthesize_rtlil", "yowasp_env", "tool_path",
           "record_fmax", "known_fmax", "clock_for", "netlist", "block_netlist",
           "block_verilog", "core_netlist", "script_after_read", "uncompiled", "first_run_note",
           "progress_on_stderr"]
