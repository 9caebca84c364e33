"""Benchmark whole networks: compile, run and check every layer, then add up the cycles.

`run_bench` takes a list of `compiler.workloads.Workload` (ResNet-18's C2–C11
by default), compiles each layer with the default schedule, runs it on a
`runtime.runner.AccelRunner` with seeded random inputs, checks the result against
the layer's numpy reference and collects, per layer, cycles, the ideal cycles
of a GEMM core that never stalls, GEMM utilization, DRAM traffic and how each
module spent its cycles. The network total weighs each layer by how often
ResNet-18 runs it.

Layers are independent simulations, so they run through one
`concurrent.futures`-shaped executor (DESIGN.md, "Scale"; `bench.executor`): a
`ProcessPoolExecutor` with ``jobs`` workers by default, or any executor a
caller passes, e.g. a Dask cluster's from ``make_executor(scheduler=...)``.

Cycle counts are deterministic, so committed baselines
(``bench/baselines/<config name>.json``) make a cycle-level regression
check: `check_baseline` fails when a layer grows by more than
`BASELINE_TOLERANCE`; `write_baseline` rewrites a baseline, only when asked.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from vdla.bench.executor import make_executor
from vdla.compiler.workloads import RESNET18, Workload
from vdla.hw.config import HwConfig
from vdla.hw.isa import MODULES

__all__ = [
    "LayerResult", "BenchResult", "BaselineEntry", "BaselineCheck", "BenchError",
    "BENCHMARKS", "VTA_RESNET18_CYCLES", "BASELINE_TOLERANCE", "select_workloads",
    "ideal_cycles", "run_layer", "run_bench", "run_benches", "make_executor", "ablation",
    "bench_report", "prepare_backend",
    "baseline_path", "make_baseline", "load_baseline", "write_baseline", "check_baseline",
]

# Networks `vdla bench` knows, by name.
BENCHMARKS: dict[str, tuple[Workload, ...]] = {"resnet18": RESNET18}
# VTA's cycle count for ResNet-18's offloaded convolutions (C2–C11, each
# weighted by its uses), the figure this accelerator is compared with; it is
# for VTA's 1x16x16 GEMM shape, so only configs of that shape are compared.
VTA_RESNET18_CYCLES = 7_730_000
VTA_GEMM_SHAPE = (1, 16, 16)
# A layer whose cycles grow by more than this fraction fails the baseline check.
BASELINE_TOLERANCE = 0.01
# Where committed baselines live: <repo>/bench/baselines/<config name>.json.
BASELINE_DIR = Path(__file__).resolve().parent / "baselines"


class BenchError(ValueError):
    """Bad benchmark input: unknown layers, a missing or mismatched baseline, ..."""


# --------------------------------------------------------------------------- results
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


# --------------------------------------------------------------------------- running
def select_workloads(names: str | Sequence[str] | None,
                     benchmark: str = "resnet18") -> list[Workload]:
    """The workloads of ``benchmark`` called ``names`` (all of them for None).

    ``names`` is a list or a comma-separated string (``"C2,C5"``), case-insensitive.

    Raises
    ------
    BenchError
        For an unknown benchmark or layer name, or an empty selection.
    """
    if benchmark not in BENCHMARKS:
        raise BenchError(f"unknown benchmark {benchmark!r} (known: {', '.join(BENCHMARKS)})")
    workloads = BENCHMARKS[benchmark]
    if names is None:
        return list(workloads)
    if isinstance(names, str):
        names = names.split(",")
    wanted = [name.strip().upper() for name in names]
    if not wanted or any(not name for name in wanted):
        raise BenchError(f"layers: expected a comma-separated list such as C2,C5, got "
                         f"{','.join(names)!r}")
    known = {workload.name: workload for workload in workloads}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise BenchError(f"unknown {benchmark} layer(s) {', '.join(unknown)} "
                         f"(known: {', '.join(known)})")
    # The network's order, each layer once.
    return [workload for workload in workloads if workload.name in wanted]


def ideal_cycles(op, config: HwConfig) -> int:
    """Cycles of a GEMM core that does ``macs_per_cycle`` useful MACs every cycle (ceil)."""
    return -(-op.macs // config.macs_per_cycle)


def layer_seed(seed: int, name: str) -> list[int]:
    """The RNG seed of a layer's inputs: the same whichever other layers run."""
    return [seed, zlib.crc32(name.encode())]


def run_layer(workload: Workload, config: HwConfig, sim: str = "rtl", *,
              latency_hiding: bool = True, seed: int = 0,
              backend_options: dict | None = None, schedule=None) -> LayerResult:
    """Compile, run and check one layer; never raises for a layer that fails.

    Parameters
    ----------
    workload : Workload
    config : HwConfig
    sim : str
        A `sim.backend` name.
    latency_hiding : bool
        False compiles the ablation baseline (one thread, serialising tokens).
    seed : int
        Inputs come from ``numpy.random.default_rng(layer_seed(seed, name))``.
    backend_options : dict, optional
        Passed to the `AccelRunner` (e.g. ``build=`` a prebuilt rtl model).
    schedule : Schedule, optional
        Compile with these knobs instead of the default schedule (tuning).

    Returns
    -------
    LayerResult
        With ``error`` set (and ``correct`` False) when compiling or
        simulating raised.
    """
    from vdla.compiler import compile_op
    from vdla.compiler.dump import summarize
    from vdla.runtime.runner import AccelRunner

    op = workload.op
    result = LayerResult(name=workload.name, op=op.describe(), uses=workload.uses, macs=op.macs,
                         ideal_cycles=ideal_cycles(op, config),
                         latency_hiding=latency_hiding)
    stage = "compiling"
    try:
        began = time.perf_counter()
        program = compile_op(op, config, schedule, latency_hiding=latency_hiding)
        result.compile_seconds = round(time.perf_counter() - began, 4)
        summary = summarize(program)
        result.instructions = summary["instructions"]
        result.instructions_per_module = summary["per_module"]
        result.uops = summary["uops"]
        result.schedule = program.metadata.get("schedule")

        stage = "preparing"
        inputs = op.random_inputs(np.random.default_rng(layer_seed(seed, workload.name)))
        device = AccelRunner(config, sim=sim, **(backend_options or {}))
        stage = "simulating"
        began = time.perf_counter()
        run = device.run(program, inputs)
        result.simulation_seconds = round(time.perf_counter() - began, 4)
        close = getattr(device.backend, "close", None)
        if close is not None:
            close()

        stage = "checking"
        expected = op.reference(**inputs)
        got = run.outputs["out"]
        result.mismatches = (int(np.count_nonzero(got != expected))
                             if got.shape == expected.shape else int(expected.size))
        result.correct = result.mismatches == 0
    except Exception as error:  # one broken layer must not lose the others' results
        first_line = (str(error).strip().splitlines() or [""])[0]
        result.correct = False
        result.error = f"{stage}: {type(error).__name__}: {first_line}"
        return result

    if run.cycles is not None:
        details = run.details
        result.cycles = int(run.cycles)
        result.gemm_utilization = op.macs / (run.cycles * config.macs_per_cycle)
        result.dram_bytes_read = _int_or_none(details.get("dram_bytes_read"))
        result.dram_bytes_written = _int_or_none(details.get("dram_bytes_written"))
        if isinstance(details.get("modules"), dict):
            result.modules = {module: {kind: int(details["modules"][module].get(kind, 0))
                                       for kind in ("busy", "wait_token", "wait_mem")}
                              for module in MODULES if module in details["modules"]}
    return result


def _int_or_none(value) -> int | None:
    return None if value is None else int(value)


def prepare_backend(config: HwConfig, sim: str, progress: Callable[[str], None] | None = None,
                    *, build: bool = True) -> dict:
    """Backend options every worker shares: the rtl model is built once, here.

    ``build=False`` only checks the simulator's name.

    Raises
    ------
    BenchError
        For an unknown simulator name.
    """
    from vdla.sim.backends import backend_names
    names = backend_names()
    if sim not in names:
        raise BenchError(f"unknown simulator {sim!r} (available: {', '.join(names)})")
    if sim != "rtl" or not build:
        return {}
    from vdla.sim.rtl.build import build_model
    return {"build": build_model(config, progress=progress)}


def run_benches(workloads: Sequence[Workload], config: HwConfig, sim: str = "rtl", *,
                variants: Sequence[bool] = (True,), seed: int = 0, jobs: int = 1,
                executor: concurrent.futures.Executor | None = None,
                share_model: bool | None = None, benchmark: str = "resnet18",
                progress: Callable[[LayerResult], None] | None = None,
                message: Callable[[str], None] | None = None) -> list[BenchResult]:
    """Run ``workloads`` once per latency-hiding variant, all layers on one executor.

    Parameters
    ----------
    workloads : sequence of Workload
    config : HwConfig
    sim : str
    variants : sequence of bool
        ``(True,)`` for a normal run, ``(True, False)`` for the ablation.
    seed : int
    jobs : int
        Worker processes when no ``executor`` is given.
    executor : concurrent.futures.Executor, optional
        Where to run layers (not shut down here); a fresh
        `ProcessPoolExecutor` of ``jobs`` workers otherwise.
    share_model : bool, optional
        Build the rtl model here and hand it to the workers (they must see
        this file system). Default: True for local workers (no ``executor``),
        False otherwise (each worker builds or finds its own).
    benchmark : str
        The network's name, for the report.
    progress : callable, optional
        Called with each `LayerResult` as it completes.
    message : callable, optional
        Told about slow preparation (a cold rtl model build).

    Returns
    -------
    list of BenchResult
        One per variant, in the order of ``variants``.
    """
    workloads = list(workloads)
    if not workloads:
        raise BenchError("no layers to run")
    began = time.perf_counter()
    own = executor is None
    share_model = own if share_model is None else share_model
    options = prepare_backend(config, sim, message if share_model else None,
                              build=share_model)
    if own:
        executor = make_executor(jobs)
    tasks = [(variant, index, workload) for variant in variants
             for index, workload in enumerate(workloads)]
    # Longest first: a better packing of uneven layers onto the workers.
    order = sorted(tasks, key=lambda task: -task[2].op.macs)
    results: dict[tuple[bool, int], LayerResult] = {}
    try:
        futures = {executor.submit(run_layer, workload, config, sim, latency_hiding=variant,
                                   seed=seed, backend_options=options): (variant, index)
                   for variant, index, workload in order}
        for future in concurrent.futures.as_completed(futures):
            variant, index = futures[future]
            try:
                layer = future.result()
            except concurrent.futures.process.BrokenProcessPool as error:
                raise BenchError(f"a worker process died while running layer "
                                 f"{workloads[index].name} ({error})") from None
            results[(variant, index)] = layer
            if progress is not None:
                progress(layer)
    except BaseException:
        if own:  # Ctrl-C or a dead worker: do not wait for the other layers
            executor.shutdown(wait=False, cancel_futures=True)
        raise
    if own:
        executor.shutdown(wait=True)
    seconds = time.perf_counter() - began
    complete = {workload.name for workload in workloads} == \
        {workload.name for workload in BENCHMARKS.get(benchmark, ())}
    return [BenchResult(benchmark, config, sim, variant, seed,
                        [results[(variant, index)] for index in range(len(workloads))],
                        complete, seconds) for variant in variants]


def run_bench(workloads: Sequence[Workload], config: HwConfig, sim: str = "rtl", *,
              latency_hiding: bool = True, **options) -> BenchResult:
    """Run ``workloads`` once; the options are those of `run_benches`."""
    return run_benches(workloads, config, sim, variants=(latency_hiding,), **options)[0]


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


# --------------------------------------------------------------------------- baselines
def baseline_path(config: HwConfig) -> Path:
    """The committed baseline of a config: ``bench/baselines/<name>.json`` (package data)."""
    return BASELINE_DIR / f"{config.name}.json"


def make_baseline(result: BenchResult, previous: dict | None = None) -> dict[str, Any]:
    """The baseline file's content for ``result`` (merged into ``previous`` when
    that was recorded on the same hardware, so a subset run updates only its layers).

    Raises
    ------
    BenchError
        For a result without cycles, with an incorrect layer, or without latency hiding.
    """
    wrong = [layer.name for layer in result.layers if not layer.correct]
    if wrong:
        raise BenchError(f"not recording a baseline with incorrect layer(s): {', '.join(wrong)}")
    if not result.timed:
        raise BenchError("a baseline needs cycles: run on a timed simulator (--sim rtl)")
    if not result.latency_hiding:
        raise BenchError("baselines record the default compile: drop --no-latency-hiding")
    layers = {}
    if previous and previous.get("config_hash") == result.config.hash:
        layers.update(previous.get("layers", {}))
    for layer in result.layers:
        layers[layer.name] = {"cycles": layer.cycles, "ideal_cycles": layer.ideal_cycles,
                              "instructions": layer.instructions, "schedule": layer.schedule}
    names = [workload.name for workload in BENCHMARKS[result.benchmark]]
    layers = {name: layers[name] for name in names if name in layers}
    complete = set(layers) == set(names)
    uses = {workload.name: workload.uses for workload in BENCHMARKS[result.benchmark]}
    return {
        "benchmark": result.benchmark,
        "sim": result.sim,
        "config": result.config.to_dict(),
        "config_hash": result.config.hash,
        "tolerance": BASELINE_TOLERANCE,
        "regenerate": f"vdla bench {result.benchmark} --config {result.config.name} "
                      "--update-baseline",
        "layers": layers,
        f"{result.benchmark}_total_cycles":
            sum(entry["cycles"] * uses[name] for name, entry in layers.items())
            if complete else None,
    }


def load_baseline(path: str | Path) -> dict[str, Any]:
    """Read and check a baseline file (read no further than a baseline can be long).

    A baseline has at least one layer, every layer positive integer
    ``cycles``, and an optional ``tolerance`` (a fraction in [0, 1]).

    Raises
    ------
    BenchError
        When the file is missing, unreadable or not a baseline.
    """
    from vdla.hw.records import parse_json, read_record_text
    path = Path(path)
    if not path.exists():
        raise BenchError(f"no baseline {path} (record one with --update-baseline)")
    data = parse_json(read_record_text(path, BenchError, "baseline"), BenchError,
                      f"baseline {path}")
    layers = data.get("layers") if isinstance(data, dict) else None
    shape = ('expected an object with "layers": {NAME: {"cycles": POSITIVE INT, ...}, ...} '
             "naming at least one layer")
    if not isinstance(layers, dict) or not layers:
        raise BenchError(f"baseline {path}: {shape}")
    for name, entry in layers.items():
        cycles = entry.get("cycles") if isinstance(entry, dict) else None
        if not isinstance(cycles, int) or isinstance(cycles, bool) or cycles <= 0:
            raise BenchError(f"baseline {path}: layer {name!r} has cycles {cycles!r:.40}; "
                             f"{shape}")
    tolerance = data.get("tolerance", BASELINE_TOLERANCE)
    if (not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool)
            or not 0 <= tolerance <= 1):
        raise BenchError(f"baseline {path}: tolerance {tolerance!r:.40} is not a fraction "
                         "in [0, 1]")
    return data


def check_baseline_target(baseline: dict, config: HwConfig, benchmark: str,
                          path: str | Path = "baseline") -> None:
    """Raise `BenchError` unless ``baseline`` is for this benchmark and hardware.

    Called before a bench runs, so a mismatch costs nothing.
    """
    if baseline.get("benchmark", benchmark) != benchmark:
        raise BenchError(f"baseline {path} is for benchmark {baseline.get('benchmark')!r}, "
                         f"not {benchmark!r}")
    recorded = baseline.get("config_hash")
    if recorded is not None and recorded != config.hash:
        raise BenchError(f"baseline {path} was recorded on other hardware (config hash "
                         f"{recorded}, this config {config.hash}); "
                         "regenerate it with --update-baseline")


def write_baseline(result: BenchResult, path: str | Path) -> Path:
    """Write (or update, for a subset of layers) the baseline at ``path``."""
    path = Path(path)
    previous = None
    if path.exists():
        try:
            previous = load_baseline(path)
        except BenchError:
            previous = None  # a broken baseline is replaced, not merged
    data = make_baseline(result, previous)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


@dataclasses.dataclass(frozen=True)
class BaselineEntry:
    """One layer compared with its baseline.

    ``status`` is ``"regression"`` (grew by more than the tolerance),
    ``"slower"`` (grew within it), ``"unchanged"``, ``"improvement"``,
    ``"new"`` (no baseline for it) or ``"missing"`` (no cycles this run).
    """

    name: str
    old: int | None
    new: int | None
    status: str

    @property
    def change(self) -> float | None:
        """Relative change of cycles, ``new / old - 1``."""
        if self.old is None or self.new is None or self.old == 0:
            return None
        return self.new / self.old - 1


@dataclasses.dataclass(frozen=True)
class BaselineCheck:
    """The outcome of `check_baseline`."""

    path: str
    entries: tuple[BaselineEntry, ...]
    tolerance: float

    def by_status(self, status: str) -> list[BaselineEntry]:
        """The entries of one `BaselineEntry` status, in the run's layer order."""
        return [entry for entry in self.entries if entry.status == status]

    @property
    def ok(self) -> bool:
        """No layer regressed and none lost its cycles."""
        return not self.by_status("regression") and not self.by_status("missing")

    def to_dict(self) -> dict[str, Any]:
        """The ``baseline`` part of the ``vdla bench --json`` report."""
        return {"path": self.path, "ok": self.ok, "tolerance": self.tolerance,
                "layers": [{"name": entry.name, "old": entry.old, "new": entry.new,
                            "status": entry.status} for entry in self.entries]}

    def lines(self) -> list[str]:
        """The human report: failures first, then improvements."""
        lines = []
        for entry in self.by_status("regression"):
            lines.append(f"REGRESSION {entry.name}: {entry.old:,} -> {entry.new:,} cycles "
                         f"({entry.change:+.2%}, more than {self.tolerance:.0%})")
        for entry in self.by_status("missing"):
            recorded = "not in the baseline" if entry.old is None else \
                f"baseline {entry.old:,} cycles"
            lines.append(f"MISSING {entry.name}: {recorded}, no cycles this run (the layer "
                         "failed)")
        for entry in self.by_status("slower"):
            lines.append(f"slower {entry.name}: {entry.old:,} -> {entry.new:,} cycles "
                         f"({entry.change:+.2%}, within {self.tolerance:.0%})")
        for entry in self.by_status("improvement"):
            lines.append(f"improvement {entry.name}: {entry.old:,} -> {entry.new:,} cycles "
                         f"({entry.change:+.2%})")
        for entry in self.by_status("new"):
            lines.append(f"new {entry.name}: {entry.new:,} cycles, not in the baseline")
        unchanged = self.by_status("unchanged")
        compared = len(self.entries) - len(self.by_status("new"))
        verdict = "PASS" if self.ok else "FAIL"
        lines.append(f"baseline {self.path}: {verdict} ({compared} layer(s) compared, "
                     f"{len(unchanged)} unchanged, "
                     f"{len(self.by_status('regression'))} regression(s), "
                     f"{len(self.by_status('improvement'))} improvement(s))")
        if self.by_status("improvement") or self.by_status("new"):
            lines.append("  faster or new layers: record them with --update-baseline")
        return lines


def check_baseline(result: BenchResult, baseline: dict, path: str | Path = "baseline",
                   tolerance: float | None = None) -> BaselineCheck:
    """Compare a run's cycles with a baseline, layer by layer.

    A layer fails when its cycles grow by more than ``tolerance`` (a fraction;
    by default the baseline's own ``tolerance``, else `BASELINE_TOLERANCE`)
    or when it has no cycles although the baseline has some. Layers of the
    baseline that this run did not select are not compared; a baseline that
    records none of the run's layers is an error (comparing nothing passes
    nothing).

    Raises
    ------
    BenchError
        When the result has no cycles, the baseline was recorded on other
        hardware or for another benchmark, or it shares no layer with the run.
    """
    if all(layer.cycles is None and layer.error is None for layer in result.layers):
        raise BenchError("the baseline check needs cycles: run on a timed simulator (--sim rtl)")
    check_baseline_target(baseline, result.config, result.benchmark, path)
    if tolerance is None:
        tolerance = baseline.get("tolerance", BASELINE_TOLERANCE)
    entries = []
    for layer in result.layers:
        old = baseline["layers"].get(layer.name, {}).get("cycles")
        new = layer.cycles
        if old is None:
            status = "new" if new is not None else "missing"
        elif new is None:
            status = "missing"
        elif new - old > old * tolerance:
            status = "regression"
        elif new > old:
            status = "slower"
        elif new < old:
            status = "improvement"
        else:
            status = "unchanged"
        entries.append(BaselineEntry(layer.name, old, new, status))
    if not any(entry.old is not None for entry in entries):
        raise BenchError(f"baseline {path} records none of this run's layers "
                         f"({', '.join(layer.name for layer in result.layers)}): nothing to "
                         "compare")
    return BaselineCheck(str(path), tuple(entries), tolerance)

