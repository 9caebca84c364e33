"""The records of a benchmark run: one layer's `LayerResult`, a network's `BenchResult`.

`bench.layer_run.run_layer` fills a `LayerResult`; `bench.suite.run_benches`
gathers them into a `BenchResult`, whose properties give the network figures
(total and ideal cycles, GEMM utilization, VTA's figure when comparable) and
whose `to_dict` is the JSON report (``vdla bench --json``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from vdla.hw.config import HwConfig

__all__ = ["LayerResult", "BenchResult", "VTA_RESNET18_CYCLES", "VTA_GEMM_SHAPE"]

# VTA's cycle count for ResNet-18's offloaded convolutions (C2–C11, each
# weighted by its uses), the figure this accelerator is compared with; it is
# for VTA's 1x16x16 GEMM shape, so only configs of that shape are compared.
VTA_RESNET18_CYCLES = 7_730_000
VTA_GEMM_SHAPE = (1, 16, 16)


@dataclasses.dataclass
class LayerResult:
    """What one layer did on one config and simulator.

    Timed fields (``cycles``, ``gemm_utilization``, DRAM bytes, ``modules``)
    are None on an untimed simulator such as fsim, and on a layer that failed
    to compile or run (``error`` says why).

    Attributes
    ----------
    name : str
        Layer name (``"C2"``).
    op : str
        The layer's description.
    uses : int
        How often the network runs this layer.
    macs : int
        Multiply-accumulates of the layer.
    ideal_cycles : int
        ``ceil(macs / config.macs_per_cycle)``: a GEMM core busy every cycle.
    cycles : int or None
    gemm_utilization : float or None
        ``macs / (cycles * macs_per_cycle)``.
    correct : bool
        The output equals the numpy reference (False when it did not run).
    mismatches : int or None
        Output elements that differ from the reference.
    dram_bytes_read, dram_bytes_written : int or None
    modules : dict or None
        ``{"load": {"busy": ..., "wait_token": ..., "wait_mem": ...}, ...}`` in cycles.
    instructions : int or None
    instructions_per_module : dict or None
    uops : int or None
    schedule : dict or None
        The schedule the compiler chose.
    latency_hiding : bool
    compile_seconds, simulation_seconds : float or None
    error : str or None
        Why the layer did not compile or run.
    """

    name: str
    op: str
    uses: int
    macs: int
    ideal_cycles: int
    cycles: int | None = None
    gemm_utilization: float | None = None
    correct: bool = False
    mismatches: int | None = None
    dram_bytes_read: int | None = None
    dram_bytes_written: int | None = None
    modules: dict[str, dict[str, int]] | None = None
    instructions: int | None = None
    instructions_per_module: dict[str, int] | None = None
    uops: int | None = None
    schedule: dict[str, Any] | None = None
    latency_hiding: bool = True
    compile_seconds: float | None = None
    simulation_seconds: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The layer's entry of the JSON report (every attribute, by name)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "LayerResult":
        """Inverse of `to_dict`; keys that are no attribute are ignored."""
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


@dataclasses.dataclass
class BenchResult:
    """One benchmark run: every layer's `LayerResult` and the network figures.

    Attributes
    ----------
    benchmark : str
        ``"resnet18"``.
    config : HwConfig
    sim : str
    latency_hiding : bool
    seed : int
    layers : list of LayerResult
        In the network's order.
    complete : bool
        Every layer of the network ran (the total is the network's).
    seconds : float
        Wall-clock time of the run.
    """

    benchmark: str
    config: HwConfig
    sim: str
    latency_hiding: bool
    seed: int
    layers: list[LayerResult]
    complete: bool
    seconds: float = 0.0

    @property
    def vta_cycles(self) -> int | None:
        """VTA's figure for this run, when it is comparable (the whole
        ResNet-18 on VTA's GEMM shape), else None."""
        shape = (self.config.batch, self.config.block_in, self.config.block_out)
        if self.benchmark == "resnet18" and self.complete and shape == VTA_GEMM_SHAPE:
            return VTA_RESNET18_CYCLES
        return None

    @property
    def all_correct(self) -> bool:
        """Every layer's output equals its numpy reference."""
        return all(layer.correct for layer in self.layers)

    @property
    def timed(self) -> bool:
        """Every layer has cycles (a timed simulator, no failed layer)."""
        return bool(self.layers) and all(layer.cycles is not None for layer in self.layers)

    @property
    def total_cycles(self) -> int | None:
        """``sum(cycles * uses)``; None unless every layer has cycles."""
        if not self.timed:
            return None
        return sum(layer.cycles * layer.uses for layer in self.layers)

    @property
    def ideal_cycles(self) -> int:
        """``sum(ideal_cycles * uses)`` (6,623,232 for ResNet-18 at 1x16x16)."""
        return sum(layer.ideal_cycles * layer.uses for layer in self.layers)

    @property
    def gemm_utilization(self) -> float | None:
        """Network utilization: ideal over actual total cycles (MAC-weighted)."""
        total = self.total_cycles
        return self.ideal_cycles / total if total else None

    @property
    def geomean_utilization(self) -> float | None:
        """Geometric mean of the layers' GEMM utilization (each layer counted once)."""
        if not self.timed:
            return None
        values = [layer.gemm_utilization for layer in self.layers]
        if any(value <= 0 for value in values):
            return 0.0
        return math.exp(sum(math.log(value) for value in values) / len(values))

    def layer(self, name: str) -> LayerResult:
        """The result of the layer called ``name``.

        Raises
        ------
        KeyError
            When the run has no such layer.
        """
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (``vdla bench --json``)."""
        total = self.total_cycles
        return {
            "benchmark": self.benchmark,
            "config": self.config.to_dict(),
            "config_hash": self.config.hash,
            "sim": self.sim,
            "latency_hiding": self.latency_hiding,
            "seed": self.seed,
            "layers": [layer.to_dict() for layer in self.layers],
            "complete": self.complete,
            "all_correct": self.all_correct,
            f"{self.benchmark}_total_cycles": total,
            f"{self.benchmark}_ideal_cycles": self.ideal_cycles,
            f"{self.benchmark}_gemm_utilization": self.gemm_utilization,
            "geomean_gemm_utilization": self.geomean_utilization,
            "vta_total_cycles": self.vta_cycles,
            "seconds": round(self.seconds, 3),
        }
