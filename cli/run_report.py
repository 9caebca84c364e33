"""What ``vdla run`` reports about one run, as JSON-ready data and as text.

Two cycle counts exist on the RTL and both are named: ``cycles`` is what the
host measures, from the cycle it raises ``start`` to the cycle it sees
``done`` (the figure every benchmark and baseline quotes); the chip's own
``cycles`` counter (`hw.counters.RTL_COUNTERS`) only counts the cycles its
``running`` flag is high, which starts :data:`CHIP_COUNTER_LAG` cycles later
(``start`` is registered once before the modules see it, and ``running`` once
more after that).

Utilization is that of `vdla bench`: useful MACs (the layer's own, from the
op the program file carries) over ``cycles x macs_per_cycle``. GEMM micro-ops
also compute the zero-padded lanes of a layer whose channels are not
multiples of the GEMM block; the rate the rtl tier counts them at is reported
under its own name, ``gemm_uops_per_cycle``.
"""

from __future__ import annotations

import numpy as np

from vdla.cli.clock import time_text
from vdla.compiler.accel.dump import summarize
from vdla.compiler.errors import CompileError
from vdla.compiler.ops import op_from_dict
from vdla.files import printable

__all__ = ["program_op", "useful_macs", "run_report", "text_lines", "CHIP_COUNTER_LAG"]

# Cycles between the host's start and the first cycle the chip's counter counts.
CHIP_COUNTER_LAG = 2


def program_op(program):
    """The layer (`compiler.ops.Conv2d` or `Dense`) a program was compiled from, or None.

    The compiler records it in the program's metadata (``"op"``); hand-built
    programs have none.
    """
    description = program.metadata.get("op")
    if not isinstance(description, dict):
        return None
    try:
        return op_from_dict(description)
    except (CompileError, TypeError, ValueError):
        return None


def useful_macs(program) -> int | None:
    """The layer's multiply-accumulates, padding excluded (None without an op)."""
    op = program_op(program)
    return None if op is None else op.macs


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return f"<array {value.dtype} {value.shape}>"
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def run_report(program_file: str, program, result, written: dict[str, str]) -> dict:
    """The JSON report of a `runtime.runner.ProgramResult` of ``program``.

    A program of a host target (cpu, gpu) is reported by what applies to it:
    no config, cycles, instructions or counters, which only the accelerator has.

    Parameters
    ----------
    program_file : str
        The file the program came from.
    program : runtime.program.Program
    result : runtime.runner.ProgramResult
    written : dict of str to str
        Output name to the ``.npy`` file it was saved to.
    """
    details = dict(result.details)
    if "activity" in details:
        details["activity_segments"] = {module: len(rows)
                                        for module, rows in details.pop("activity").items()}
    outputs = {name: {"shape": list(array.shape), "dtype": array.dtype.name,
                      "file": written.get(name)}
               for name, array in result.outputs.items()}
    head = {"program": str(program_file), "op": program.metadata.get("op_description"),
            "target": program.target}
    if program.target != "accel":
        return {**head, "outputs": outputs, "details": _jsonable(details)}
    counters = {name: int(value) for name, value in result.counters.items()}
    macs, cycles = useful_macs(program), result.cycles
    peak = program.config.macs_per_cycle
    timed = bool(cycles)
    chip_counter = counters.get("cycles") if result.sim == "rtl" else None
    return {
        **head, "config": program.config.name, "sim": result.sim,
        "cycles": cycles, "chip_cycle_counter": chip_counter,
        "instructions": result.instructions,
        "instructions_per_module": summarize(program)["per_module"],
        "useful_macs": macs, "peak_macs_per_cycle": peak,
        "gemm_utilization": macs / (cycles * peak) if timed and macs is not None else None,
        # The backend's: accumulating GEMM micro-ops per cycle, padded lanes included.
        "gemm_uops_per_cycle": details.get("gemm_uops_per_cycle") if timed else None,
        "counters": counters, "outputs": outputs, "details": _jsonable(details),
    }


def _cycles_line(report: dict) -> str:
    cycles = report["cycles"]
    if cycles is None:
        return "cycles: n/a (untimed)"
    line = f"cycles: {cycles:,} (from start to done, as the host counts them)"
    counter = report["chip_cycle_counter"]
    if counter is not None:
        line += (f"; the chip's cycle counter reads {counter:,}: it counts only while running, "
                 f"from {CHIP_COUNTER_LAG} cycles after start")
    return line


def _utilization_line(report: dict) -> str | None:
    if report["cycles"] is None:
        return None
    if report["gemm_utilization"] is None:
        line = ("GEMM utilization: n/a (the program names no layer, so its useful MACs are "
                "unknown)")
    else:
        line = (f"GEMM utilization: {100 * report['gemm_utilization']:.1f}% "
                f"({report['useful_macs']:,} useful MACs / ({report['cycles']:,} cycles x "
                f"{report['peak_macs_per_cycle']} MACs))")
    if report["gemm_uops_per_cycle"] is not None:
        line += (f"; GEMM micro-ops per cycle {100 * report['gemm_uops_per_cycle']:.1f}% "
                 "(zero-padded lanes included)")
    return line


def text_lines(report: dict, program) -> list[str]:
    """The human report: what ran; on the accelerator cycles, utilization and the tier's
    counters; the outputs; the time (``report["time"]`` at a clock, or a host target's)."""
    # The layer's description and the outputs' names come from the file: shown, never obeyed.
    layer = printable(report["op"] or program.metadata.get("layer") or "a hand-built program")
    if report["target"] != "accel":
        lines = [f"program: {report['program']} ({layer}; for the {report['target']} "
                 "target)"]
    else:
        lines = [f"program: {report['program']} ({layer}; compiled for {report['config']})",
                 f"sim: {report['sim']}", _cycles_line(report)]
        modules = ", ".join(f"{module} {count}"
                            for module, count in report["instructions_per_module"].items())
        lines.append(f"instructions: {report['instructions']} ({modules})")
        utilization = _utilization_line(report)
        if utilization:
            lines.append(utilization)
        lines += _counter_lines(report)
    for name, output in report["outputs"].items():
        where = (f" -> {output['file']}" if output["file"] is not None
                 else " (not saved; use --output)")
        lines.append(f"output {printable(name)}: {output['dtype']} {tuple(output['shape'])}"
                     f"{where}")
    if report["details"].get("trace"):
        lines.append(f"trace: {report['details']['trace']}")
    time = _time_line(report)
    return lines + ([time] if time else [])


def _counter_lines(report: dict) -> list[str]:
    counters = report["counters"]
    if not counters:
        return []
    width = max(len(name) for name in counters)
    return ["counters (the chip's, hw/counters.py):" if report["sim"] == "rtl"
            else f"counters ({report['sim']}'s):",
            *(f"  {name:<{width}}  {value}" for name, value in counters.items())]


def _time_line(report: dict) -> str | None:
    details = report["details"]
    if report["target"] == "cpu":
        return (f"time: {details['seconds'] * 1e3:.3f} ms ({details['threads']} threads, "
                f"{details['mode']}, {details['isa']})")
    if report["target"] == "gpu":
        return (f"time: {details['seconds'] * 1e3:.3f} ms with copies ({details['device']}, "
                f"{details['mode']})")
    return f"time: {time_text(report['time'])}" if report.get("time") else None
