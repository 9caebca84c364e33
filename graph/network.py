"""A compiled network: the integer graph, its placement and its layers' programs; runs whole.

Three calls take a model to results::

    graph = vdla.frontend.onnx.load("model.onnx", batch=4)
    net = vdla.graph.network.compile_network(graph, config, calibration={"input": x})
    out = net.run({"input": images}, sim="fsim").outputs

`compile_network` runs the float pass pipeline, quantises, runs the integer
pipeline, places every node (`graph.placement`) and compiles each
accelerator layer with the layer compiler (`compiler.driver.compile_op`).
`Network.run` walks the nodes in order: accelerator layers on the backend
of a `runtime.runner.AccelRunner` of the chosen simulation tier, cpu layers as the cpu
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

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph
from vdla.graph.kernels import run_node
from vdla.graph.layout import Blocked, block, run_blocked, runs_blocked, unblock
from vdla.graph.passes import INTEGER_PIPELINE, PIPELINE, run_passes
from vdla.graph.placement import LAYER_OPS, layer_op, place
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
    # How long `compile_network` took (not saved: files are the same bytes every time).
    compile_seconds: float | None = dataclasses.field(default=None, compare=False)
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
        """Run the network on ``inputs``.

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
        from vdla.runtime.runner import AccelRunner
        values = {name: t.value for name, t in self.graph.tensors.items() if t.constant}
        values.update(self.check_inputs(inputs))
        if target not in ("accel", "cpu"):
            raise GraphError(f"target: expected accel or cpu, got {target!r}")
        key = (sim, tuple(sorted(backend_options.items())))
        # Everything a run builds is built before any node is timed.
        building = time.perf_counter()
        if target == "accel" and key not in self._devices and "accel" in self.placement.values():
            # Kept between runs: a simulator is built once.
            self._devices[key] = AccelRunner(self.config, sim, **backend_options)
        for node in self.graph.nodes:
            if self.placement[node.name] == "cpu" or (target == "cpu" and
                                                      self.placement[node.name] == "accel"):
                self._cpu_kernel(node)
        config, repacks = self.config, 0
        blocking = self.runs_in_arena
        if target == "accel" and blocking:
            self._arena_image()
        build_seconds = time.perf_counter() - building

        converted: dict[str, Any] = {}  # a value's other form, once a reader needed it

        def logical(name: str) -> np.ndarray:
            nonlocal repacks
            if not isinstance(values[name], Blocked):
                return values[name]
            if name not in converted:
                converted[name], repacks = unblock(values[name], config), repacks + 1
            return converted[name]

        def blocked(name: str) -> Blocked:
            nonlocal repacks
            if isinstance(values[name], Blocked):
                return values[name]
            if name not in converted:
                converted[name], repacks = block(values[name], config), repacks + 1
            return converted[name]

        rows, tensors, copied = [], {}, 0
        for node in self.graph.nodes:
            place = self.placement[node.name]
            if target == "cpu" and place == "accel":
                place = "cpu"
            began = time.perf_counter()
            cycles = kernel_seconds = None
            if place == "accel" and blocking:
                # The data and a fused residual (`graph.passes.residual`) in their slots.
                for data in [node.inputs[0], *node.inputs[3:]]:
                    placed, written = self._to_arena(data, blocked(data))
                    # Later readers of the blocked form take the slot's bytes, written once.
                    (values if isinstance(values[data], Blocked) else converted)[data] = placed
                    copied += written
                outputs, cycles = self._run_in_arena(self._devices[key], node)
            elif place == "accel":
                args = [logical(name) for name in node.inputs]
                program = self.programs[node.name]
                result = self._devices[key].run(program, dict(zip(
                    ("data", "weight", "bias", "residual"), args)))
                outputs, cycles = [result.outputs["out"]], result.cycles
                # The device builds the whole image, places the input, copies the output out.
                copied += program.dram_bytes + sum(
                    region.nbytes(self.config) for region in program.tensors
                    if region.name in ("data", "out"))
            elif place == "cpu":
                kernel = self._cpu_kernel(node)
                data = logical(node.inputs[0])
                residual = logical(node.inputs[3]) if len(node.inputs) > 3 else None
                called = time.perf_counter()
                outputs = [kernel.run(data, threads=threads, residual=residual)]
                kernel_seconds = time.perf_counter() - called
            elif runs_blocked(self.graph, node) and any(
                    isinstance(values[name], Blocked) for name in node.inputs):
                outputs = run_blocked(self.graph, node, [blocked(name) for name in node.inputs])
            else:
                outputs = run_node(node, [logical(name) for name in node.inputs])
            seconds = time.perf_counter() - began
            for name, array in zip(node.outputs, outputs):
                values[name] = array
                if keep:  # logical, now: an arena slot is reused once its tensor is dead
                    tensors[name] = unblock(array, config) if isinstance(array, Blocked) \
                        else array
            rows.append({"name": node.name, "op": node.op, "place": place, "cycles": cycles,
                         "seconds": seconds, "kernel_seconds": kernel_seconds})
        outputs = {name: logical(name) for name in self.graph.outputs}
        return NetworkResult(outputs, tensors, rows, repacks, copied, build_seconds)

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
                    if tensor is None:   # bytes that follow from the region (the identity)
                        place_constant(dram, program.tensor(region), self.config)
                        continue
                    _place(dram, program.tensor(region),
                           pack(program.tensor(region).layout, self.graph.value(tensor),
                                self.config))
            self._arena_dram = dram
        return self._arena_dram

    def _slot_view(self, tensor: str) -> np.ndarray:
        slot = self.arena().slots[tensor]
        return self._arena_image()[slot.offset:slot.offset + slot.nbytes]

    def _to_arena(self, tensor: str, value: Blocked) -> tuple[Blocked, int]:
        """Make ``tensor``'s slot hold ``value``: nothing to do where it is already there
        (a layer's output, in place); else the host writes it. The value as it lies in
        the slot, and the bytes written."""
        view = self._slot_view(tensor)
        if value.packed.size != view.size:
            raise GraphError(f"tensor {tensor!r}: {value.packed.size} bytes do not fit its "
                             f"{view.size}-byte arena slot")
        in_slot = Blocked(view.view(np.int8).reshape(value.packed.shape), value.shape)
        if value.packed.ctypes.data == view.ctypes.data:
            return in_slot, 0
        in_slot.packed[...] = value.packed
        return in_slot, view.size

    def _run_in_arena(self, device, node) -> tuple[list[Blocked], int | None]:
        """An accelerator layer in the arena: its input is in its slot, its output stays in
        its own (a view, which its readers take as it is)."""
        from vdla.runtime.layout import packed_shape
        from vdla.sim.checker import check_program
        program, dram = self.arena().programs[node.name], self._arena_image()
        if not getattr(device.backend, "checks_programs", False):
            check_program(self.config, dram, program.insn_offset, len(program.instructions))
        result = device.backend.run(dram, program.insn_offset, len(program.instructions))
        (out,) = program.outputs
        packed = self._slot_view(node.outputs[0]).view(np.int8).reshape(
            packed_shape(out.layout, out.shape, self.config))
        return [Blocked(packed, tuple(out.shape))], result.cycles

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
            kernel.set_weights(self.graph.value(node.inputs[1]), self.graph.value(node.inputs[2]))
            self._cpu_kernels[node.name] = kernel
        return self._cpu_kernels[node.name]

    def rows(self) -> list[dict[str, Any]]:
        """One row per node: name, op, input and output shapes, place, estimated cycles."""
        estimates = self.metadata.get("estimated_cycles", {})
        return [{**row, "place": self.placement[row["name"]],
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
    from vdla.compiler.cost import estimate_cost
    from vdla.compiler.schedule import Schedule
    plan = Schedule.from_dict(program.metadata["schedule"]).check(op.geometry(), config)
    return int(round(estimate_cost(plan)))


def quantize_graph(graph: Graph, calibration: dict[str, np.ndarray] | None = None,
                   per_channel: bool = False,
                   fuse_residuals: bool | Callable[[str], bool] = False) -> Graph:
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
    return run_passes(quantize(floating, calibration, per_channel, fuse_residuals),
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
                    per_channel: bool = False, fuse_residuals: bool = True) -> Network:
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
    fuse_residuals : bool
        Fuse each residual add into the conv producing one operand where it can
        (`graph.passes.residual`, `residual_fusion`); False keeps them on the host.

    Raises
    ------
    GraphError
        For a graph that cannot be quantised, placed or compiled (one line,
        naming the node).
    """
    from vdla.compiler.driver import compile_op
    from vdla.compiler.errors import CompileError
    began = time.perf_counter()
    integer = quantize_graph(graph, calibration, per_channel,
                             residual_fusion(config, target, on_cpu, fuse_residuals))
    placement = place(integer, target, on_cpu)
    programs, estimates = {}, {}
    for node in integer.nodes:
        if node.op not in LAYER_OPS:
            continue
        op = layer_op(integer, node)
        if placement[node.name] != "accel":
            continue
        try:
            programs[node.name] = compile_op(op, config)
        except CompileError as error:
            raise GraphError(f"{node.describe()}: {error} (place it on the cpu with "
                             f"--on-cpu {node.name})") from None
        estimates[node.name] = _estimated_cycles(programs[node.name], op, config)
    metadata = {"estimated_cycles": estimates}
    if by_cost:
        metadata["placement_costs"] = _place_by_cost(integer, placement, programs, estimates,
                                                     config, clock_mhz, threads)
    return Network(integer, placement, programs, config, metadata,
                   compile_seconds=time.perf_counter() - began)


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
