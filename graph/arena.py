"""One DRAM arena for a network's accelerator layers, with in-place hand-over.

A compiled layer is a position-independent `Program`: its own image, regions
from byte 0. `plan_arena` links a network's layers into one image::

    per accelerator layer, in node order:  instructions, micro-ops, weight, [bias],
                                           [identity]
    then the activations:                  slots shared by liveness

Each activation that an accelerator layer reads or writes (and each host
result one of them reads) gets a slot: the bytes of its blocked layout
(`graph.layout`). A layer's output slot *is* its readers' input slot, so
consecutive layers hand tensors over in place and the host copies nothing
between them; a conv with a fused residual (`compiler.ops.Epilogue.residual_shift`)
reads the residual from its slot in place too (its layout is its producer's
output's, on the square GEMM block it needs), and its constant identity block
(`runtime.layout.constant`) lies with its weights. A tensor lives from the
node that writes it to the last node that reads it (graph outputs to the
end); tensors whose lives overlap get disjoint slots, the others may share
bytes (first fit, in node order). A
flatten of a 1x1 image is the same bytes (`graph.layout.run_blocked`): its
output is an alias of its input's slot, which then lives as long as either.

Each layer's program is relocated to its regions' arena offsets
(`compiler.accel.codegen.relocate`) and `verify_arena` checks the result: every
layer's accesses inside the arena and inside its own tensors
(`runtime.verify.verify_plan`), its input and output at their tensors'
slots, code and constants apart from everything, and no two slots in use at
the same time sharing a byte.
"""

from __future__ import annotations

import dataclasses

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph
from vdla.graph.layout import runs_blocked
from vdla.hw import isa
from vdla.runtime.program import Program

__all__ = ["Slot", "Arena", "plan_arena", "verify_arena", "allocate"]


@dataclasses.dataclass(frozen=True)
class Slot:
    """An activation's place in the arena and its life in node indices.

    ``first`` is the node that writes it (-1 for a value the host writes
    before the first node), ``last`` the last node that reads it, inclusive.
    """

    offset: int
    nbytes: int
    first: int
    last: int

    def overlaps(self, other: "Slot") -> bool:
        """Whether the two share a byte and are alive at the same node."""
        return (self.offset < other.offset + other.nbytes
                and other.offset < self.offset + self.nbytes
                and self.first <= other.last and other.first <= self.last)


@dataclasses.dataclass
class Arena:
    """A network's accelerator layers linked into one DRAM image.

    Parameters
    ----------
    size : int
        Bytes of the image.
    programs : dict of str to Program
        Each accelerator layer's program, relocated into the arena.
    slots : dict of str to Slot
        Each activation's slot by tensor name (an alias has its source's).
    constants : dict of str to dict of str to str or None
        Per layer, its constant regions (``weight``, ``bias``) and the graph
        tensors they hold (None for a region whose bytes follow from its
        layout: a residual's ``identity``).
    code_bytes : int
        Bytes before the first activation slot (code and constants).
    images_bytes : int
        What the layers' own images (as compiled) add up to.
    """

    size: int
    programs: dict[str, Program]
    slots: dict[str, Slot]
    constants: dict[str, dict[str, str]]
    code_bytes: int
    images_bytes: int


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def allocate(lives: dict[str, tuple[int, int, int]], alignment: int,
             base: int = 0) -> dict[str, Slot]:
    """First-fit slots for ``{name: (nbytes, first, last)}``, in order of ``first``.

    Each slot takes the lowest aligned offset from ``base`` where it meets no
    slot placed before it that is alive at the same time.
    """
    slots: dict[str, Slot] = {}
    for name, (nbytes, first, last) in sorted(lives.items(), key=lambda i: (i[1][1], i[0])):
        live = sorted((s for s in slots.values() if s.first <= last and first <= s.last),
                      key=lambda s: s.offset)
        offset = base
        for other in live:
            if offset + nbytes <= other.offset:
                break
            offset = max(offset, _align(other.offset + other.nbytes, alignment))
        slots[name] = Slot(offset, nbytes, first, last)
    return slots


def _activations(node, program: Program) -> list[tuple[str, str]]:
    """``(region, graph tensor)`` of a layer's activations: data, [residual], out."""
    names = {region.name for region in program.tensors}
    return ([("data", node.inputs[0])] + ([("residual", node.inputs[3])] if "residual" in names
                                          else []) + [("out", node.outputs[0])])


def _aliases(graph: Graph) -> dict[str, str]:
    """Each tensor's root: itself, or the input of the 1x1 flatten chain it comes from."""
    root: dict[str, str] = {}
    for node in graph.nodes:
        if node.op == "flatten" and runs_blocked(graph, node):
            root[node.outputs[0]] = root.get(node.inputs[0], node.inputs[0])
    return root


def plan_arena(graph: Graph, placement: dict[str, str], programs: dict[str, Program]) -> Arena:
    """Link the accelerator layers of ``graph`` into one arena (module docstring).

    Raises
    ------
    GraphError
        If two layers disagree on a tensor's bytes, or the arena does not verify.
    """
    from vdla.compiler.accel.codegen import relocate
    from vdla.compiler.errors import CompileError
    layers = [node for node in graph.nodes if placement.get(node.name) == "accel"]
    if not layers:
        raise GraphError("arena: the network has no accelerator layer")
    config = programs[layers[0].name].config
    alignment = config.dram_alignment
    root = _aliases(graph)
    index = {node.name: i for i, node in enumerate(graph.nodes)}
    # Code and constants: each layer's instructions, micro-ops, weight and bias.
    offset, places, constants = 0, {}, {}
    for node in layers:
        program = programs[node.name]
        insn_offset = offset
        uop_offset = _align(insn_offset + len(program.instructions) * isa.INSN_BYTES, alignment)
        offset = _align(uop_offset + len(program.uops) * isa.UOP_BYTES, alignment)
        tensors, constants[node.name] = {}, {}
        for region in program.inputs + program.constants:
            if region.name in ("data", "residual"):
                continue
            constants[node.name][region.name] = (
                None if region.role == "constant" else
                node.inputs[1 if region.name == "weight" else 2])
            tensors[region.name] = offset
            offset = _align(offset + region.nbytes(config), alignment)
        places[node.name] = (insn_offset, uop_offset, tensors)
    code_bytes = offset
    # Activations: the layers' data, residual and out tensors, by root, with their lives.
    sizes: dict[str, tuple[int, str]] = {}
    for node in layers:
        program = programs[node.name]
        for region, tensor in _activations(node, program):
            name, nbytes = root.get(tensor, tensor), program.tensor(region).nbytes(config)
            if sizes.setdefault(name, (nbytes, node.name))[0] != nbytes:
                raise GraphError(f"arena: layer {node.name!r} holds {tensor!r} in {nbytes} "
                                 f"bytes, layer {sizes[name][1]!r} in {sizes[name][0]}")
    lives = {}
    for name, (nbytes, _) in sizes.items():
        writer = graph.producer(name)
        readers = [index[n.name] for t in [name, *(a for a, r in root.items() if r == name)]
                   for n in graph.consumers(t)]
        outputs = any(root.get(t, t) == name for t in graph.outputs)
        first = -1 if writer is None else index[writer.name]
        last = len(graph.nodes) if outputs else max(readers, default=first)
        lives[name] = (nbytes, first, last)
    slots = allocate(lives, alignment, code_bytes)
    size = max([code_bytes] + [s.offset + s.nbytes for s in slots.values()])
    size = _align(size, alignment)
    slots.update({alias: slots[name] for alias, name in root.items() if name in slots})
    relocated = {}
    for node in layers:
        insn_offset, uop_offset, tensors = places[node.name]
        for region, tensor in _activations(node, programs[node.name]):
            tensors[region] = slots[root.get(tensor, tensor)].offset
        try:
            relocated[node.name] = relocate(programs[node.name], insn_offset, uop_offset,
                                            tensors, size)
        except CompileError as error:
            raise GraphError(f"arena: {node.describe()}: {error}") from None
    arena = Arena(size, relocated, slots, constants, code_bytes,
                  sum(programs[name].dram_bytes for name in relocated))
    verify_arena(graph, arena)
    return arena


def verify_arena(graph: Graph, arena: Arena) -> None:
    """Check an arena's layout (module docstring); raise `GraphError` naming the problem."""
    from vdla.runtime.errors import ProgramError
    from vdla.runtime.verify import verify_plan
    code: list[tuple[int, int, str]] = []
    for name, program in arena.programs.items():
        node = graph.node(name)
        if program.dram_bytes != arena.size:
            raise GraphError(f"arena: layer {name!r} runs in a {program.dram_bytes}-byte image, "
                             f"not the {arena.size}-byte arena")
        for region, tensor in _activations(node, program):
            slot, place = arena.slots.get(tensor), program.tensor(region)
            if slot is None or slot.offset != place.dram_offset \
                    or slot.nbytes != place.nbytes(program.config):
                raise GraphError(f"arena: layer {name!r} has its {region} tensor at byte "
                                 f"{place.dram_offset}, not at the slot of {tensor!r}")
        try:
            verify_plan(program, shared=True)
        except ProgramError as error:
            raise GraphError(f"arena: layer {name!r}: {error}") from None
        code.append((program.insn_offset, len(program.instructions) * isa.INSN_BYTES,
                     f"the instructions of layer {name!r}"))
        code.append((program.uop_offset, len(program.uops) * isa.UOP_BYTES,
                     f"the micro-ops of layer {name!r}"))
        code += [(program.tensor(region).dram_offset, program.tensor(region).nbytes(
            program.config), f"the {region} of layer {name!r}") for region in arena.constants[name]]
    # Code and constants live for the whole run: they may share a byte with nothing.
    whole = [Slot(offset, nbytes, -1, len(graph.nodes)) for offset, nbytes, _ in code]
    labels = [what for *_, what in code]
    distinct = {}
    for tensor, slot in arena.slots.items():
        distinct.setdefault(slot, tensor)
    everything = list(zip(whole, labels)) + [(s, f"tensor {t!r}") for s, t in distinct.items()]
    everything.sort(key=lambda item: item[0].offset)
    for i, (slot, what) in enumerate(everything):  # each inside the arena: verify_plan
        for other, other_what in everything[i + 1:]:
            if other.offset >= slot.offset + slot.nbytes:
                break
            if slot.overlaps(other) and slot.nbytes and other.nbytes:
                raise GraphError(f"arena: {what} and {other_what} share bytes while both "
                                 "are in use")
