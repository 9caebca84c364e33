"""The JSON report of a benchmark run (``vdla bench --json``) and its ablation.

`bench_report` is a `bench.records.BenchResult`'s ``to_dict`` with, when a
run without latency hiding is given, the side-by-side `ablation`.
"""

from __future__ import annotations

from typing import Any

from vdla.bench.records import BenchResult

__all__ = ["ablation", "bench_report"]


def ablation(with_hiding: BenchResult, without_hiding: BenchResult) -> dict[str, Any]:
    """Side by side: cycles with and without latency hiding, and the speed-up.

    The speed-up of a layer is ``cycles without / cycles with``.
    """
    layers = []
    for on, off in zip(with_hiding.layers, without_hiding.layers):
        layers.append({
            "name": on.name, "uses": on.uses,
            "cycles": on.cycles, "cycles_without_latency_hiding": off.cycles,
            "gemm_utilization": on.gemm_utilization,
            "gemm_utilization_without_latency_hiding": off.gemm_utilization,
            "speedup": off.cycles / on.cycles if on.cycles and off.cycles else None,
            "correct": on.correct and off.correct,
        })
    total_on, total_off = with_hiding.total_cycles, without_hiding.total_cycles
    key = with_hiding.benchmark
    return {
        "layers": layers,
        f"{key}_total_cycles": total_on,
        f"{key}_total_cycles_without_latency_hiding": total_off,
        "speedup": total_off / total_on if total_on and total_off else None,
        "gemm_utilization_without_latency_hiding": without_hiding.gemm_utilization,
        "without_latency_hiding": [layer.to_dict() for layer in without_hiding.layers],
    }


def bench_report(result: BenchResult, without_hiding: BenchResult | None = None,
                 **extra) -> dict[str, Any]:
    """The JSON report of a run (``vdla bench --json``), with the ablation when
    ``without_hiding`` is given and any ``extra`` top-level fields."""
    report = result.to_dict()
    if without_hiding is not None:
        report["ablation"] = ablation(result, without_hiding)
    report.update(extra)
    return report
