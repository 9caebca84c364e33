"""A compiled network: the integer graph, its placement and its layers' programs; runs whole.

Three calls take a model to results::

    graph = vdla.frontend.onnx.load("model.onnx", batch=4)
    net = vdla.graph.network.compile_network(graph, config, calibration={"input": x})
    out = net.run({"input": images}, sim="fsim").outputs

`compile_network` runs the float pass pipeline, quantises, runs the integer
pipeline, places every node (`graph.placement`) and compiles each
accelerator layer with the layer compiler (`compiler.accel.driver.compile_op`).
`Network.run` plans which node runs where, on which buffers, and runs each
on its placement's executor (`graph.execution`): accelerator layers on a
`runtime.runner.AccelRunner` of the chosen simulation tier, cpu layers as the cpu
target's generated C (`compiler.cpu`, built from the layer's description,
never from stored code), host nodes with their numpy kernels
(`graph.kernels`). The integer reference (`graph.kernels.execute` on the
integer graph) is what every run must equal, tensor for tensor.

Activations stay in the accelerator's blocked layout between layers
(`graph.layout`), in one DRAM arena (`graph.arena`) that holds every
accelerator layer's code, constants and activations: a layer's output is
its readers' input in place, and the host writes only the tensors it
computes itself (the packed network input, host nodes' results that a
layer reads). Configurations whose input and output blocks differ
(``block_in != block_out``) run each layer in a DRAM image of its own.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import numpy as np

from vdla.compiler.ops import Conv2d, Dense
from vdla.graph.errors import GraphError
from vdla.graph.execution import (ARENA, CPU, HOST, HOST_BLOCKED, IMAGE, ArenaLayers, CpuLayers,
                                  HostNodes, ImageLayers, Step, Tensors, plan_steps)
from vdla.graph.ir import Graph
from vdla.graph.layout import Blocked, unblock
from vdla.graph.ops.matmul import lower_to_layers
from vdla.graph.passes import INTEGER_PIPELINE, PIPELINE, TARGET_PIPELINE, run_passes
from vdla.graph.placement import (ACCEL_REASON, LAYER_OPS, by_cost_reason, host_reason,
                                  layer_op, place, placement_reasons, refused_reason,
                                  split_bounds, split_dense)
from vdla.graph.quantize import quantize
from vdla.hw import isa
from vdla.hw.config import HwConfig
from vdla.runtime.program import Program

__all__ = ["Network", "NetworkResult", "compile_network", "quantize_graph", "residual_fusion"]


@dataclasses.dataclass
class NetworkResult:
    """The outcome of `Network.run`.

    Parameters
    ----------
    outputs : dict of str to numpy.ndarray
        The graph's outputs.
    tensors : dict of str to numpy.ndarray
        With ``keep=True``, every tensor the run computed (inputs and
        constants left out), in its logical layout.
    layers : list of dict
        Per node: ``name``, ``op``, ``place``, ``seconds`` (host wall time,
        packing and the simulator included, building left out: ``build_seconds``),
        from timed tiers ``cycles``, and
        for cpu layers ``kernel_seconds`` (the generated C's own call).
    repacks : int
        Conversions between the logical and the blocked layout (`graph.layout`):
        2 when the first layer packs the input and the output is unpacked once.
    copied_bytes : int
        Bytes the host wrote into DRAM for accelerator layers: in the arena,
        the tensors it computed itself (code and constants are placed once,
        before the first run); with an image per layer, each whole image and
        the layer's input, and the output copied back out.
    build_seconds : float
        Host wall time spent before the first node, building what the run needs
        and earlier runs had not built (the simulator, the cpu layers' C, the
        arena's code and constants); no node's ``seconds`` include it.
    """

    outputs: dict[str, np.ndarray]
    tensors: dict[str, np.ndarray]
    layers: list[dict[str, Any]]
    repacks: int = 0
    copied_bytes: int = 0
    build_seconds: float = 0.0

    @property
    def accel_cycles(self) -> int | None:
        """Cycles of all accelerator layers together (None on untimed tiers)."""
        cycles = [row["cycles"] for row in self.layers if row["place"] == "accel"]
        return None if not cycles or any(c is None for c in cycles) else sum(cycles)


@dataclasses.dataclass
class Network:
    """An integer graph, where each node runs, and the accelerator layers' programs."""

    graph: Graph
    placement: dict[str, str]
    programs: dict[str, Program]
    config: HwConfig
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Why each layer runs where it does (`graph.placement`); `reason` says it for any node.
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    # How long `compile_network` took (not saved: files are the same bytes every time).
    compile_seconds: float | None = dataclasses.field(default=None, compare=False)
    # What the compile decided beyond the placement rule, one line per layer it moved to
    # the cpu or split (`compile_network`; not saved: the reasons say it in the file).
    changes: dict[str, str] = dataclasses.field(default_factory=dict, compare=False)
    # cpu layers' programs, generated when a run first needs them.
    _cpu_kernels: dict[str, Any] = dataclasses.field(default_factory=dict, init=False,
                                                     repr=False, compare=False)
    _devices: dict[tuple, Any] = dataclasses.field(default_factory=dict, init=False,
                                                   repr=False, compare=False)
    # The arena's plan and its image with code and constants placed, made by the first run.
    _arena: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)
    _arena_dram: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def input_specs(self) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {name: (self.graph.tensors[name].dtype, self.graph.tensors[name].shape)
                for name in self.graph.inputs}

    def input_specs_json(self) -> dict[str, str]:
        """``{"input": "float32 (4, 1, 8, 8)"}``."""
        return {name: f"{dtype.name} {shape}" for name, (dtype, shape)
                in self.input_specs().items()}

    def check_inputs(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The inputs as float32 arrays of the graph's shapes, or one `GraphError`."""
        from vdla.runtime.runner import describe_array
        specs = self.input_specs()
        unknown = [name for name in inputs if name not in specs]
        if unknown:
            raise GraphError(f"unknown input{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))}: the network's inputs are "
                             f"{', '.join(specs)}")
        missing = [name for name in specs if name not in inputs]
        if missing:
            raise GraphError(f"missing input{'s' if len(missing) > 1 else ''} "
                             f"{' and '.join(map(repr, missing))}: expected "
                             f"{' and '.join(describe_array(*specs[n]) for n in missing)}")
        checked = {}
        for name, (dtype, shape) in specs.items():
            array = inputs[name]
            if not isinstance(array, np.ndarray) or array.dtype.kind != "f" \
                    or tuple(array.shape) != shape:
                got = (describe_array(array.dtype, array.shape) if isinstance(array, np.ndarray)
                       else type(array).__name__)
                raise GraphError(f"input {name!r}: expected {describe_array(dtype, shape)}, "
                                 f"got {got}")
            if not np.all(np.isfinite(array)):
                raise GraphError(f"input {name!r}: holds NaN or infinite values")
            checked[name] = array.astype(np.float32)
        return checked

    def run(self, inputs: dict[str, np.ndarray], sim: str = "fsim", *, target: str = "accel",
            threads: int = 2, keep: bool = False, **backend_options) -> NetworkResult:
        """Run the network on ``inputs``: its steps as `graph.execution.plan_steps` plans
        them, each on its kind's executor.

        Parameters
        ----------
        inputs : dict of str to numpy.ndarray
            Float arrays of the graph inputs' shapes.
        sim : str
            The simulation tier of accelerator layers (``fsim``, ``rtl``, ...).
        target : str
            ``"accel"`` (the placement as compiled) or ``"cpu"`` (every layer
            as the cpu target's generated C).
        threads : int
            Threads of cpu layers.
        keep : bool
            Also return every computed tensor, logical (for checks).
        **backend_options
            Passed to the simulation backend (e.g. ``cycle_limit``).
        """
        values = {name: t.value for name, t in self.graph.tensors.items() if t.constant}
        values.update(self.check_inputs(inputs))
        if target not in ("accel", "cpu"):
            raise GraphError(f"target: expected accel or cpu, got {target!r}")
        steps = plan_steps(self.graph, self.placement, target, self.runs_in_arena)
        building = time.perf_counter()   # everything a run builds, before any node is timed
        executors = self._executors(steps, sim, threads, backend_options)
        build_seconds = time.perf_counter() - building
        tensors = Tensors(self.config, values)
        rows, kept, copied = [], {}, 0
        for step in steps:
            began = time.perf_counter()
            ran = executors[step.kind].run(step, tensors)
            seconds = time.perf_counter() - began
            tensors.store(step.node.outputs, ran.outputs)
            if keep:   # logical, now: an arena slot is reused once its tensor is dead
                kept.update((name, unblock(array, self.config) if isinstance(array, Blocked)
                             else array) for name, array in zip(step.node.outputs, ran.outputs))
            rows.append({"name": step.node.name, "op": step.node.op, "place": step.place,
                         "cycles": ran.cycles, "seconds": seconds,
                         "kernel_seconds": ran.kernel_seconds})
            copied += ran.copied
        outputs = {name: tensors.logical(name) for name in self.graph.outputs}
        return NetworkResult(outputs, kept, rows, tensors.repacks, copied, build_seconds)

    def _executors(self, steps: list[Step], sim: str, threads: int,
                   backend_options: dict) -> dict[str, Any]:
        """The executor of each kind of step, with what it runs on built: the simulator,
        the arena's image, the cpu layers' C (each kept for later runs)."""
        from vdla.runtime.runner import AccelRunner
        kinds = {step.kind for step in steps}
        executors = {HOST: HostNodes(self.graph, blocked=False),
                     HOST_BLOCKED: HostNodes(self.graph, blocked=True)}
        if kinds & {ARENA, IMAGE}:
            key = (sim, tuple(sorted(backend_options.items())))
            if key not in self._devices:   # a simulator is built once
                self._devices[key] = AccelRunner(self.config, sim, **backend_options)
            device = self._devices[key]
            executors[IMAGE] = ImageLayers(self.config, self.programs, device)
            if ARENA in kinds:
                executors[ARENA] = ArenaLayers(self.config, self.arena(), self._arena_image(),
                                               device, self._activation_weights())
        executors[CPU] = CpuLayers({step.node.name: self._cpu_kernel(step.node)
                                    for step in steps if step.kind == CPU}, threads,
                                   self._activation_weights())
        return executors

    def _activation_weights(self) -> frozenset[str]:
        """The computed tensors layers read as their weight (`graph.ops.matmul.lower_to_layers`)."""
        return frozenset(node.inputs[1] for node in self.graph.nodes if node.op in LAYER_OPS
                         and not self.graph.tensors[node.inputs[1]].constant)

    @property
    def runs_in_arena(self) -> bool:
        """Whether the accelerator layers run in one arena: activations stay blocked between
        layers only where the input and output layouts are the same bytes."""
        return "accel" in self.placement.values() and \
            self.config.block_in == self.config.block_out

    def arena(self):
        """The `graph.arena.Arena` the accelerator layers run in (planned once)."""
        from vdla.graph.arena import plan_arena
        if self._arena is None:
            self._arena = plan_arena(self.graph, self.placement, self.programs)
        return self._arena

    def _arena_image(self) -> np.ndarray:
        """The arena's DRAM, its code and constant weights and biases placed once."""
        from vdla.runtime.layout import pack
        from vdla.runtime.verify import dram_image, place_constant
        if self._arena_dram is None:
            arena = self.arena()
            dram = np.zeros(arena.size, np.uint8)
            for name, program in arena.programs.items():
                code = dram_image(program)   # this layer's code at its arena offsets
                for first, nbytes in ((program.insn_offset, len(program.instructions)
                                       * isa.INSN_BYTES),
                                      (program.uop_offset, len(program.uops) * isa.UOP_BYTES)):
                    dram[first:first + nbytes] = code[first:first + nbytes]
                for region, tensor in arena.constants[name].items():
                    if tensor is not None and not self.graph.tensors[tensor].constant:
                        continue   # an activation weight: written by each run (ArenaLayers)
                    if tensor is None:   # bytes that follow from the region (the identity)
                        place_constant(dram, program.tensor(region), self.config)
                        continue
                    _place(dram, program.tensor(region),
                           pack(program.tensor(region).layout, self.graph.value(tensor),
                                self.config))
            self._arena_dram = dram
        return self._arena_dram

    def _cpu_kernel(self, node):
        """The layer's generated C, loaded, its constant weights packed once."""
        from vdla.compiler.cpu.build import CpuBuildError
        from vdla.compiler.cpu.kernel import CpuKernel
        if node.name not in self._cpu_kernels:
            try:
                kernel = CpuKernel(layer_op(self.graph, node))
            except CpuBuildError as error:
                raise GraphError(f"{node.describe()}: its C does not build here: "
                                 f"{error}") from None
            if self.graph.tensors[node.inputs[1]].constant:   # else set by each run
                kernel.set_weights(self.graph.value(node.inputs[1]),
                                   self.graph.value(node.inputs[2]))
            self._cpu_kernels[node.name] = kernel
        return self._cpu_kernels[node.name]

    def reason(self, name: str) -> str:
        """Why node ``name`` runs where it does: the reason the compile recorded, a host
        node's operator's (`graph.placement.host_reason`), else what its place implies
        (a file written before reasons were recorded)."""
        if name in self.reasons:
            return self.reasons[name]
        where = self.placement[name]
        return (host_reason(self.graph.node(name)) if where == "host" else ACCEL_REASON
                if where == "accel" else "placed on the cpu (the file records no reason)")

    def rows(self) -> list[dict[str, Any]]:
        """One row per node: name, op, input and output shapes, place, its reason,
        estimated cycles."""
        estimates = self.metadata.get("estimated_cycles", {})
        return [{**row, "place": self.placement[row["name"]], "reason": self.reason(row["name"]),
                 "estimated_cycles": estimates.get(row["name"])}
                for row in self.graph.summary()]


def _place(dram: np.ndarray, region, packed: np.ndarray) -> None:
    """Write a packed tensor at its region of a DRAM image (the plan was verified on load)."""
    data = np.ascontiguousarray(packed).reshape(-1).view(np.uint8)
    if region.dram_offset + data.size > dram.size:
        raise GraphError(f"tensor {region.name!r} of {data.size} bytes does not fit the "
                         f"program's DRAM image at {region.dram_offset}")
    dram[region.dram_offset:region.dram_offset + data.size] = data


def _estimated_cycles(program: Program, op, config: HwConfig) -> int:
    from vdla.compiler.accel.cost import estimate_cost
    from vdla.compiler.accel.schedule import Schedule
    plan = Schedule.from_dict(program.metadata["schedule"]).check(op.geometry(), config)
    return int(round(estimate_cost(plan)))


def quantize_graph(graph: Graph, calibration: dict[str, np.ndarray] | None = None,
                   per_channel: bool = False,
                   fuse_residuals: bool | Callable[[str], bool] = False,
                   calibration_method: str = "mse") -> Graph:
    """The integer graph of a float (or QDQ) graph: both pass pipelines around `quantize`.

    ``calibration`` and ``per_channel`` are as for `compile_network`, checked
    against the graph's inputs; ``fuse_residuals`` as for `graph.quantize.quantize`
    (`residual_fusion` says which layers of a network may).
    """
    floating = run_passes(graph, PIPELINE)
    if calibration is not None:
        for name in floating.inputs:
            if name not in calibration:
                raise GraphError(f"calibration: no samples for input {name!r}")
            sample = np.asarray(calibration[name])
            expected = floating.tensors[name].shape[1:]
            if sample.ndim != len(expected) + 1 or sample.shape[1:] != expected \
                    or sample.dtype.kind != "f" or len(sample) == 0:
                raise GraphError(f"calibration {name!r}: expected float samples of shape "
                                 f"(count, {', '.join(map(str, expected))}), got "
                                 f"{sample.dtype.name} {sample.shape}")
            if not np.all(np.isfinite(sample)):
                raise GraphError(f"calibration {name!r}: holds NaN or infinite values")
    return run_passes(quantize(floating, calibration, per_channel, fuse_residuals,
                               calibration_method),
                      INTEGER_PIPELINE)


def residual_fusion(config: HwConfig, target: str = "accel", on_cpu=(),
                    fuse: bool = True) -> Callable[[str], bool]:
    """Which convs of a network may take a residual add in (`graph.passes.residual`): those
    the cpu target runs, and on the accelerator only where its GEMM block is square (the
    residual enters through the GEMM unit). A predicate on node names, for
    `quantize_graph`."""
    cpu, square = set(on_cpu), config.block_in == config.block_out
    return lambda name: fuse and (target == "cpu" or square or name in cpu)


def compile_network(graph: Graph, config: HwConfig, calibration: dict[str, np.ndarray] | None
                    = None, *, on_cpu=(), target: str = "accel", by_cost: bool = False,
                    clock_mhz: float | None = None, threads: int = 2,
                    per_channel: bool = False, fuse_residuals: bool = True,
                    fallback: bool = True,
                    schedules: Callable[[Any], Any] | None = None,
                    calibration_method: str = "mse") -> Network:
    """Quantise, fuse, place and compile a float (or QDQ) graph into a `Network`.

    Parameters
    ----------
    graph : Graph
        As `vdla.frontend.onnx.load` returns it.
    config : HwConfig
        The accelerator.
    calibration : dict of str to numpy.ndarray, optional
        Sample inputs per graph input (stacked on the first axis); needed
        unless the model is QDQ.
    on_cpu : iterable of str
        Layers to run as generated C (`graph.placement.place`).
    target : str
        ``"accel"`` or ``"cpu"``: where layers go by default.
    by_cost : bool
        Also move to the cpu every layer whose generated C, timed here with
        ``threads`` threads, is faster than the accelerator's estimated cycles
        at ``clock_mhz`` (or the config's known Fmax); the costs are kept in
        ``metadata["placement_costs"]``. Depends on this machine and its load.
    per_channel : bool
        Quantise weights with one power-of-two scale per output channel
        (`graph.quantize.quantize`); a QDQ model's own scales are kept.
    calibration_method : str
        How activations' ranges are calibrated from ``calibration``
        (`graph.calibration.METHODS`; default ``mse``, vdla's own).
    fuse_residuals : bool
        Fuse each residual add into the conv producing one operand where it can
        (`graph.passes.residual`, `residual_fusion`); False keeps them on the host.
    fallback : bool
        A layer the accelerator refuses (any `compiler.errors.CompileError` of its
        compile) runs as the cpu target's C instead, its reason the compiler's
        message (and a line in ``Network.changes``); False raises that message.
    schedules : callable, optional
        Gives an accelerator layer's op its schedule (e.g. the best of a tuning
        log, `tune.network.tuned_schedules`), or None for the default one.

    Notes
    -----
    A ``qdense`` layer whose tensors exceed the accelerator's per-program DRAM limit
    (`compiler.accel.driver.MAX_LAYER_BYTES`) is split along its output features
    into the fewest layers that fit, joined by a host ``concat``
    (`graph.placement.split_dense`): bit for bit the same layer. The parts follow
    the placement rule of every layer: the accelerator, where the compile targets
    it; with ``by_cost`` each part is timed against its C like any other layer.
    (The cpu target has no time estimate to weigh a split against, only cycles
    of its own machine, so the measured comparison is the one ``by_cost`` makes.)

    A ``qmatmul`` at power-of-two scales (attention's ``Q K^T`` and ``A V``) becomes
    ``qdense`` layers, one per (batch, head) product, whose weight is an activation
    (`graph.ops.matmul.lower_to_layers`): they are placed as the other layers are, and
    each run writes their weight into the layer's weight region (the cpu target's C
    takes it each call).

    Raises
    ------
    GraphError
        For a graph that cannot be quantised, placed or compiled (one line,
        naming the node).
    """
    from vdla.compiler.accel.driver import compile_op
    from vdla.compiler.errors import CompileError
    began = time.perf_counter()
    integer = quantize_graph(graph, calibration, per_channel,
                             residual_fusion(config, target, on_cpu, fuse_residuals),
                             calibration_method)
    integer = run_passes(integer, TARGET_PIPELINE, config=config, target=target, on_cpu=on_cpu)
    integer = lower_to_layers(integer)   # qmatmuls at power-of-two scales: dense layers
    placement = place(integer, target, on_cpu)
    reasons = placement_reasons(integer, placement, target, on_cpu)
    programs, estimates, changes = {}, {}, {}
    pending = [node for node in integer.nodes if node.op in LAYER_OPS]
    while pending:
        node = pending.pop(0)
        op = layer_op(integer, node)   # refuses a shape no target computes
        if placement[node.name] != "accel":
            continue
        try:
            programs[node.name] = compile_op(op, config,
                                             schedules(op) if schedules is not None else None)
        except CompileError as error:
            parts = _split(integer, node, op, config)
            if parts is not None:
                *layers, concat = parts
                placement.pop(node.name)
                reasons.pop(node.name)
                for index, part in enumerate(layers):
                    placement[part.name] = "accel"
                    reasons[part.name] = (f"part {index + 1} of {len(layers)} of dense layer "
                                          f"{node.name!r}, split along its output features: "
                                          f"{error}")
                placement[concat.name], reasons[concat.name] = "host", host_reason(concat)
                changes[node.name] = (f"split into {len(layers)} accelerator layers "
                                      f"({', '.join(p.name for p in layers)}) joined by "
                                      f"{concat.name!r} on the host: {error}")
                pending[:0] = layers
                continue
            if not fallback:
                raise GraphError(f"{node.describe()}: {error} (place it on the cpu with "
                                 f"--on-cpu {node.name})") from None
            placement[node.name], reasons[node.name] = "cpu", refused_reason(error)
            changes[node.name] = f"on the cpu: {refused_reason(error)}"
            continue
        estimates[node.name] = _estimated_cycles(programs[node.name], op, config)
    metadata = {"estimated_cycles": estimates}
    if by_cost:
        metadata["placement_costs"] = _place_by_cost(integer, placement, programs, estimates,
                                                     config, clock_mhz, threads)
        for name, cost in metadata["placement_costs"].items():
            if placement[name] == "cpu":
                reasons[name] = by_cost_reason(cost["accel_ms"], cost["cpu_ms"])
    return Network(integer, placement, programs, config, metadata,
                   {node.name: reasons[node.name] for node in integer.nodes
                    if node.op in LAYER_OPS},
                   compile_seconds=time.perf_counter() - began, changes=changes)


def _packed_bytes(op: Conv2d | Dense, config: HwConfig) -> int:
    """The bytes of a layer's packed tensors, as the accelerator's compile counts them
    against `compiler.accel.driver.MAX_LAYER_BYTES`."""
    from vdla.runtime.layout import packed_nbytes
    geometry = op.geometry()
    return sum(packed_nbytes(geometry.layouts[name], tuple(geometry.shapes[name]), config)
               for name in geometry.layouts if name in geometry.shapes)


def _split(graph: Graph, node, op, config: HwConfig):
    """Split a ``qdense`` ``node`` over the per-program DRAM limit into layers under it
    (`graph.placement.split_dense`, in place): the parts and their concat, or None where
    the node is no such layer or no split fits (its input alone is over the limit)."""
    from vdla.compiler.accel import driver
    limit = driver.MAX_LAYER_BYTES   # read now: a test may lower it
    if node.op != "qdense" or _packed_bytes(op, config) <= limit:
        return None
    bounds = split_bounds(op, config.block_out, lambda part: _packed_bytes(part, config) <= limit)
    return None if bounds is None else split_dense(graph, node, bounds)


def _place_by_cost(graph: Graph, placement: dict[str, str], programs: dict[str, Program],
                   estimates: dict[str, int], config: HwConfig, clock_mhz: float | None,
                   threads: int) -> dict[str, dict[str, float]]:
    """Move accelerator layers the cpu runs faster to the cpu (in place); their costs in ms."""
    from vdla.compiler.cpu.kernel import CpuKernel
    from vdla.hw.synth import clock_for
    clock = clock_for(config, clock_mhz)
    if clock is None:
        raise GraphError(f"placement by cost needs the accelerator's clock: pass --clock-mhz "
                         f"(no Fmax is known for config {config.name!r}; vdla hw synth finds it)")
    rng = np.random.default_rng(0)
    costs = {}
    for name in list(programs):
        op = layer_op(graph, graph.node(name))
        kernel = CpuKernel(op)
        inputs = op.random_inputs(rng)
        kernel.set_weights(inputs["weight"], inputs["bias"])
        seconds = []
        for _ in range(3):
            began = time.perf_counter()
            kernel.run(inputs["data"], threads=threads, residual=inputs.get("residual"))
            seconds.append(time.perf_counter() - began)
        cpu_ms = min(seconds) * 1e3
        accel_ms = estimates[name] / (clock[0] * 1e3)
        costs[name] = {"accel_ms": round(accel_ms, 6), "cpu_ms": round(cpu_ms, 6)}
        if cpu_ms < accel_ms:
            placement[name] = "cpu"
            del programs[name]
    return costs
