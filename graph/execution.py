"""How `graph.network.Network.run` runs a network: a plan of steps, and an executor per placement.

`plan_steps` says, before anything runs, which node runs where and on which
buffers: an accelerator layer in the network's one DRAM arena (its input and
output in their slots, in the blocked layout of `graph.layout`) or in a DRAM
image of its own (logical tensors in and out), a cpu layer as the cpu
target's generated C (logical), a host node on blocked arrays where it can
take its producer's blocked output as it is (`graph.layout.runs_blocked`),
else on logical ones. Each kind of step has its executor, made once per run
with what it needs already built (the simulator, the arena's image, the
loaded C): `ArenaLayers`, `ImageLayers`, `CpuLayers`, `HostNodes`.
`Tensors` holds the run's values, each in the layout its producer left it
in, and makes (and counts) the other layout the first time a reader needs it.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node
from vdla.graph.kernels import run_node
from vdla.graph.layout import Blocked, block, run_blocked, runs_blocked, unblock
from vdla.hw.config import HwConfig

__all__ = ["Step", "plan_steps", "Tensors", "Ran", "ArenaLayers", "ImageLayers", "CpuLayers",
           "HostNodes", "ARENA", "IMAGE", "CPU", "HOST", "HOST_BLOCKED"]

# The kinds of step: which executor runs it, on which buffers.
ARENA = "accel in the arena"
IMAGE = "accel in its own image"
CPU = "cpu"
HOST = "host"
HOST_BLOCKED = "host on blocked arrays"


@dataclasses.dataclass(frozen=True)
class Step:
    """One node of a run: ``place`` as reported (accel, cpu, host), ``kind`` how it runs."""

    node: Node
    place: str
    kind: str


def plan_steps(graph: Graph, placement: dict[str, str], target: str,
               in_arena: bool) -> list[Step]:
    """The steps of a run, in the graph's order.

    Parameters
    ----------
    graph : Graph
    placement : dict of str to str
        Where each node was placed (``accel``, ``cpu`` or ``host``).
    target : str
        ``"accel"`` (the placement as it is) or ``"cpu"`` (accelerator layers as C).
    in_arena : bool
        Whether accelerator layers run in one arena (`Network.runs_in_arena`).
    """
    blocked: set[str] = set()   # the tensors steps leave in the blocked layout
    steps = []
    for node in graph.nodes:
        place = "cpu" if target == "cpu" and placement[node.name] == "accel" \
            else placement[node.name]
        if place == "accel":
            kind = ARENA if in_arena else IMAGE
        elif place == "cpu":
            kind = CPU
        else:
            kind = HOST_BLOCKED if runs_blocked(graph, node) and blocked.intersection(
                node.inputs) else HOST
        if kind in (ARENA, HOST_BLOCKED):
            blocked.update(node.outputs)
        steps.append(Step(node, place, kind))
    return steps


class Tensors:
    """A run's tensors, each in the layout its producer left it in; the other layout is
    made the first time a reader needs it, and counted in ``repacks``."""

    def __init__(self, config: HwConfig, values: dict[str, Any]):
        self.config, self.values, self.repacks = config, dict(values), 0
        self._other: dict[str, Any] = {}

    def logical(self, name: str) -> np.ndarray:
        value = self.values[name]
        return self._convert(name, unblock) if isinstance(value, Blocked) else value

    def blocked(self, name: str) -> Blocked:
        value = self.values[name]
        return value if isinstance(value, Blocked) else self._convert(name, block)

    def _convert(self, name: str, convert) -> Any:
        if name not in self._other:
            self._other[name] = convert(self.values[name], self.config)
            self.repacks += 1
        return self._other[name]

    def place_blocked(self, name: str, placed: Blocked) -> None:
        """Make ``placed`` (the same values, in an arena slot) the blocked form of ``name``."""
        (self.values if isinstance(self.values[name], Blocked) else self._other)[name] = placed

    def store(self, names: list[str], arrays: list[Any]) -> None:
        self.values.update(zip(names, arrays))


@dataclasses.dataclass
class Ran:
    """What an executor reports of one step: its outputs, cycles (timed tiers), the C's
    own call time (cpu layers), and the bytes the host wrote into DRAM for it."""

    outputs: list[Any]
    cycles: int | None = None
    kernel_seconds: float | None = None
    copied: int = 0


class ArenaLayers:
    """Accelerator layers in the network's one DRAM arena (`graph.arena`): a layer's input
    is in its slot (the host writes only what it computed itself), its output stays in
    its own, a blocked view its readers take as it is.

    ``image`` is the arena's DRAM with code and constants placed; ``device`` a
    `runtime.runner.AccelRunner`; ``weights`` the activations layers read as their
    weight (`graph.ops.matmul.lower_to_layers`), which the host packs into the layer's
    weight region before it runs.
    """

    def __init__(self, config: HwConfig, arena, image: np.ndarray, device,
                 weights: frozenset[str] = frozenset()):
        self.config, self.arena, self.image, self.device = config, arena, image, device
        self.weights = weights

    def run(self, step: Step, tensors: Tensors) -> Ran:
        from vdla.runtime.layout import packed_shape
        node, copied = step.node, 0
        for data in [node.inputs[0], *node.inputs[3:]]:   # the data, a fused residual
            placed, written = self._to_slot(data, tensors.blocked(data))
            tensors.place_blocked(data, placed)   # later readers take the slot's bytes
            copied += written
        program = self.arena.programs[node.name]
        copied += self._write_weights(node, program, tensors)
        result = self.device.run_image(self.image, program.insn_offset,
                                       len(program.instructions))
        (out,) = program.outputs
        packed = self._slot(node.outputs[0]).view(np.int8).reshape(
            packed_shape(out.layout, out.shape, self.config))
        return Ran([Blocked(packed, tuple(out.shape))], result.cycles, copied=copied)

    def _write_weights(self, node, program, tensors: Tensors) -> int:
        """Pack a weight that is an activation (`graph.ops.matmul.lower_to_layers`) into its
        region, as the host writes a layer's input: the bytes written."""
        from vdla.runtime.layout import pack
        written = 0
        for region, tensor in self.arena.constants[node.name].items():
            if tensor not in self.weights:
                continue
            place = program.tensor(region)
            data = pack(place.layout, tensors.logical(tensor), self.config).reshape(-1).view(
                np.uint8)
            self.image[place.dram_offset:place.dram_offset + data.size] = data
            written += data.size
        return written

    def _slot(self, tensor: str) -> np.ndarray:
        slot = self.arena.slots[tensor]
        return self.image[slot.offset:slot.offset + slot.nbytes]

    def _to_slot(self, tensor: str, value: Blocked) -> tuple[Blocked, int]:
        """Make ``tensor``'s slot hold ``value``: nothing to do where it is already there
        (a layer's output, in place); else the host writes it. The value as it lies in
        the slot, and the bytes written."""
        view = self._slot(tensor)
        if value.packed.size != view.size:
            raise GraphError(f"tensor {tensor!r}: {value.packed.size} bytes do not fit its "
                             f"{view.size}-byte arena slot")
        in_slot = Blocked(view.view(np.int8).reshape(value.packed.shape), value.shape)
        if value.packed.ctypes.data == view.ctypes.data:
            return in_slot, 0
        in_slot.packed[...] = value.packed
        return in_slot, view.size


class ImageLayers:
    """Accelerator layers each in a DRAM image of its own (configurations whose input and
    output blocks differ): the device builds the whole image, places the logical input
    and copies the output out."""

    def __init__(self, config: HwConfig, programs: dict[str, Any], device):
        self.config, self.programs, self.device = config, programs, device

    def run(self, step: Step, tensors: Tensors) -> Ran:
        node, program = step.node, self.programs[step.node.name]
        args = [tensors.logical(name) for name in node.inputs]
        result = self.device.run(program, dict(zip(("data", "weight", "bias", "residual"),
                                                   args)))
        copied = program.dram_bytes + sum(region.nbytes(self.config) for region
                                          in program.tensors if region.name in ("data", "out"))
        return Ran([result.outputs["out"]], result.cycles, copied=copied)


class CpuLayers:
    """Layers as the cpu target's generated C (``kernels``: loaded, constant weights packed,
    by node name), on logical tensors; a weight in ``weights`` (an activation) is packed
    by each run."""

    def __init__(self, kernels: dict[str, Any], threads: int,
                 weights: frozenset[str] = frozenset()):
        self.kernels, self.threads, self.weights = kernels, threads, weights

    def run(self, step: Step, tensors: Tensors) -> Ran:
        node = step.node
        data = tensors.logical(node.inputs[0])
        residual = tensors.logical(node.inputs[3]) if len(node.inputs) > 3 else None
        kernel = self.kernels[node.name]
        if node.inputs[1] in self.weights:
            kernel.set_weights(tensors.logical(node.inputs[1]), tensors.logical(node.inputs[2]))
        called = time.perf_counter()
        out = kernel.run(data, threads=self.threads, residual=residual)
        return Ran([out], kernel_seconds=time.perf_counter() - called)


class HostNodes:
    """Host nodes with their numpy kernels (`graph.kernels`), on blocked arrays
    (`graph.layout.run_blocked`) or on logical ones."""

    def __init__(self, graph: Graph, blocked: bool):
        self.graph, self.blocked = graph, blocked

    def run(self, step: Step, tensors: Tensors) -> Ran:
        node = step.node
        if self.blocked:
            return Ran(run_blocked(self.graph, node, [tensors.blocked(n) for n in node.inputs]))
        return Ran(run_node(node, [tensors.logical(n) for n in node.inputs]))
