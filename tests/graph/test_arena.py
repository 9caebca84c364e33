"""The network's DRAM arena: liveness allocation, relocation, in-place hand-over, verification."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from onnx import TensorProto, helper

from tests.graph.models import images, initializer, model_bytes, residual_cnn
from vdla.compiler.accel.codegen import relocate
from vdla.compiler.accel.driver import compile_op
from vdla.compiler.errors import CompileError
from vdla.compiler.ops import Conv2d
from vdla.frontend.onnx import from_bytes
from vdla.graph.arena import allocate, verify_arena
from vdla.graph.errors import GraphError
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network
from vdla.hw.config import PRESETS
from vdla.runtime.layout import pack, packed_shape, unpack
from vdla.runtime.verify import dram_image
from vdla.sim.fsim import FunctionalSimulator


@pytest.mark.parametrize("seed", range(20))
def test_allocation_never_shares_a_byte_between_tensors_alive_together(seed):
    rng = np.random.default_rng(seed)
    nodes, alignment = int(rng.integers(2, 30)), int(rng.choice([16, 64, 256]))
    lives = {}
    for i in range(int(rng.integers(1, 40))):
        first = int(rng.integers(-1, nodes))
        lives[f"t{i}"] = (int(rng.integers(1, 5000)), first, int(rng.integers(first, nodes + 1)))
    slots = allocate(lives, alignment, base=alignment * 3)
    assert {name: (s.nbytes, s.first, s.last) for name, s in slots.items()} == lives
    for name, slot in slots.items():
        assert slot.offset % alignment == 0 and slot.offset >= alignment * 3
        for other_name, other in slots.items():
            if other_name != name:
                assert not slot.overlaps(other), (name, other_name)
    # First fit never needs more than the most bytes alive at one node, each slot aligned
    # up, plus the largest tensor's worth of fragmentation per live tensor; and never more
    # than all of them apart.
    end = max(s.offset + s.nbytes for s in slots.values()) - alignment * 3
    aligned = {n: -(-b // alignment) * alignment for n, (b, _, _) in lives.items()}
    assert end <= sum(aligned.values())


def test_tensors_whose_lives_do_not_meet_share_their_bytes():
    slots = allocate({"a": (100, 0, 1), "b": (100, 1, 2), "c": (100, 2, 3)}, 64)
    # a and b meet at node 1, b and c at node 2; a and c never: c takes a's bytes.
    assert (slots["a"].offset, slots["b"].offset, slots["c"].offset) == (0, 128, 0)


def _conv(**changes):
    fields = dict(batch=1, in_channels=19, out_channels=21, height=7, width=9, kernel=3,
                  stride=1, padding=1, bias=True, shift=7, relu=True)
    return Conv2d(**{**fields, **changes})


@pytest.mark.parametrize("seed", range(3))
def test_a_relocated_program_computes_the_same_at_its_new_offsets(seed):
    """Regions moved to random places of a larger image, in another order: same result."""
    config, rng = PRESETS["tiny"], np.random.default_rng(seed)
    op = _conv(stride=1 + seed % 2)
    program = compile_op(op, config)
    inputs = op.random_inputs(rng)
    regions = ["insns", "uops"] + [t.name for t in program.tensors]
    sizes = {"insns": len(program.instructions) * 16, "uops": len(program.uops) * 4,
             **{t.name: t.nbytes(config) for t in program.tensors}}
    offsets, offset = {}, int(rng.integers(1, 50)) * config.dram_alignment
    for name in rng.permutation(regions):
        offsets[name] = offset
        offset += -(-sizes[name] // config.dram_alignment) * config.dram_alignment \
            + int(rng.integers(0, 4)) * config.dram_alignment
    moved = relocate(program, offsets.pop("insns"), offsets.pop("uops"), offsets, offset)
    assert moved.dram_bytes == offset and moved.tensor("out").dram_offset == offsets["out"]
    dram = dram_image(moved)
    for region in moved.inputs:
        data = pack(region.layout, inputs[region.name], config).reshape(-1).view(np.uint8)
        dram[region.dram_offset:region.dram_offset + data.size] = data
    FunctionalSimulator(config).run(dram, moved.insn_offset, len(moved.instructions))
    out = moved.tensor("out")
    shape = packed_shape(out.layout, out.shape, config)
    packed = dram[out.dram_offset:out.dram_offset + int(np.prod(shape))].view(np.int8)
    np.testing.assert_array_equal(unpack(out.layout, packed.reshape(shape), out.shape, config),
                                  op.reference(inputs["data"], inputs["weight"], inputs["bias"]))


def test_relocation_refuses_a_missing_tensor_and_an_address_beyond_the_isa():
    program = compile_op(_conv(), PRESETS["tiny"])
    offsets = {t.name: t.dram_offset for t in program.tensors}
    with pytest.raises(CompileError, match="^relocate: no offset for tensor 'bias'$"):
        relocate(program, 0, program.uop_offset, {k: v for k, v in offsets.items()
                                                   if k != "bias"}, program.dram_bytes)
    far = {**offsets, "out": 1 << 40}
    with pytest.raises(CompileError, match=r"^relocate: instruction \d+ does not fit the ISA "
                                           "at its new address: "):
        relocate(program, 0, program.uop_offset, far, 1 << 41)


@pytest.fixture(scope="module")
def network():
    """The residual add on the host (unfused): conv3 writes n3, the host adds p1."""
    graph = from_bytes(residual_cnn(seed=5).SerializeToString(), batch=3)
    return compile_network(graph, PRESETS["default"], {"input": images(48, seed=1)},
                           fuse_residuals=False)


@pytest.fixture(scope="module")
def fused():
    """The residual add fused into conv3 (`graph.passes.residual`)."""
    graph = from_bytes(residual_cnn(seed=5).SerializeToString(), batch=3)
    return compile_network(graph, PRESETS["default"], {"input": images(48, seed=1)})


def test_a_fused_residual_is_read_in_place(fused):
    arena = fused.arena()
    conv3 = arena.programs["conv3"]
    assert fused.graph.node("conv3").inputs[3] == "p1"
    assert conv3.tensor("residual").dram_offset == arena.slots["p1"].offset
    # The identity block lies with the constants, and the image holds it.
    identity = conv3.tensor("identity")
    assert identity.role == "constant" and identity.dram_offset < arena.code_bytes
    x = images(3, seed=11)
    result = fused.run({"input": x}, keep=True)
    reference = execute(fused.graph, {"input": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    block = fused._arena_image()[identity.dram_offset:identity.dram_offset + 256]
    assert np.array_equal(block.view(np.int8).reshape(16, 16),
                          identity.shape[0] * np.eye(16, dtype=np.int8))
    # The host writes what it computed (the input's patches, `graph.passes.stem`, maxpool's
    # p1, the pooled vector), once:
    # p1 is conv2's input and conv3's residual, the same slot.
    assert result.copied_bytes == sum(arena.slots[t].nbytes
                                      for t in ("conv1/im2col", "p1", "g"))
    # A residual read from another slot is refused.
    moved = relocate(conv3, conv3.insn_offset, conv3.uop_offset,
                     {**{t.name: t.dram_offset for t in conv3.tensors},
                      "residual": arena.slots["r2"].offset}, arena.size)
    with pytest.raises(GraphError, match="^arena: layer 'conv3' has its residual tensor at "
                                         rf"byte {arena.slots['r2'].offset}, not at the slot "
                                         "of 'p1'$"):
        verify_arena(fused.graph, dataclasses.replace(arena, programs={
            **arena.programs, "conv3": moved}))


def test_layers_hand_tensors_over_in_place_and_the_host_writes_only_its_own(network):
    arena = network.arena()
    # conv2's output is conv3's input: the same bytes; so are fc's input and the pooled
    # tensor it flattens (one slot, an alias).
    assert arena.programs["conv2"].tensor("out").dram_offset \
        == arena.programs["conv3"].tensor("data").dram_offset
    assert arena.slots["f"] == arena.slots["g"]
    assert arena.size < arena.images_bytes
    x = images(3, seed=11)
    result = network.run({"input": x}, keep=True)
    reference = execute(network.graph, {"input": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    # The host writes the input's patches (`graph.passes.stem`) and the host nodes'
    # results a layer reads (maxpool's for conv2, the pooled vector for fc); no layer's
    # output.
    written = sum(arena.slots[t].nbytes for t in ("conv1/im2col", "p1", "g"))
    assert result.copied_bytes == written
    # A second run reuses the arena (code and constants placed once): the same outputs.
    again = network.run({"input": x})
    for name, array in again.outputs.items():
        np.testing.assert_array_equal(array, result.outputs[name])


def test_the_verifier_refuses_overlaps_strays_and_moved_tensors(network):
    arena = network.arena()
    verify_arena(network.graph, arena)

    def edited(**changes):
        return dataclasses.replace(arena, **changes)

    def moved(tensor, onto, *uses):
        """The arena with ``tensor`` at ``onto`` (a byte or a tensor's offset), in its slot
        and in the layers that use it (``(layer, region)``)."""
        offset = onto if isinstance(onto, int) else arena.slots[onto].offset
        slots = {**arena.slots, tensor: dataclasses.replace(arena.slots[tensor], offset=offset)}
        programs = dict(arena.programs)
        for name, region in uses:
            program = programs[name]
            offsets = {t.name: t.dram_offset for t in program.tensors}
            programs[name] = relocate(program, program.insn_offset, program.uop_offset,
                                      {**offsets, region: offset}, arena.size)
        return edited(slots=slots, programs=programs)

    # n3 (conv3 -> residual) onto p1 (pool -> conv2 and residual): both alive at conv3.
    with pytest.raises(GraphError, match="^arena: tensor 'p1' and tensor 'n3' share bytes "
                                         "while both are in use$"):
        verify_arena(network.graph, moved("n3", "p1", ("conv3", "out")))
    # r2 onto n3: conv3 would write its output over its input.
    with pytest.raises(GraphError, match=r"^arena: layer 'conv3': DRAM plan: tensor 'data' at "
                                         r"bytes \[\d+, \d+\) overlaps tensor 'out'"):
        verify_arena(network.graph, moved("r2", "n3", ("conv2", "out"), ("conv3", "data")))
    # conv3 reading another tensor's slot (p1's) than its input's.
    p1 = arena.slots["p1"].offset
    with pytest.raises(GraphError, match="^arena: layer 'conv3' has its data tensor at byte "
                                         rf"{p1}, not at the slot of 'r2'$"):
        verify_arena(network.graph, edited(programs={
            **arena.programs, "conv3": moved("r2", "p1", ("conv3", "data")).programs["conv3"]}))
    # An activation slot over a layer's weights.
    weight = arena.programs["conv1"].tensor("weight").dram_offset
    with pytest.raises(GraphError, match="^arena: the weight of layer 'conv1' and tensor 'logits' "
                                         "share bytes while both are in use$"):
        verify_arena(network.graph, moved("logits", weight, ("fc", "out")))
    # A program whose image is not the arena, and one reaching past it.
    small = dataclasses.replace(arena.programs["fc"], dram_bytes=arena.size - 64)
    with pytest.raises(GraphError, match=f"^arena: layer 'fc' runs in a {arena.size - 64}-byte "
                                         f"image, not the {arena.size}-byte arena$"):
        verify_arena(network.graph, edited(programs={**arena.programs, "fc": small}))
    logits = arena.slots["logits"]
    with pytest.raises(GraphError, match=rf"^arena: layer 'fc': DRAM plan: tensor 'out' at bytes "
                                         rf"\[{arena.size}, {arena.size + logits.nbytes}\): "
                                         rf"outside the program's {arena.size}-byte DRAM image$"):
        verify_arena(network.graph, moved("logits", arena.size, ("fc", "out")))


@pytest.mark.parametrize("on_cpu, written", [((), ("conv1/im2col", "p1", "g")),
                                              (("conv1",), ("p1", "g"))])
def test_a_host_result_two_layers_read_is_written_once(on_cpu, written):
    """A pooled tensor read by two convs (then added): the host writes it once, blocked
    from the numpy result or (conv1 on the cpu) packed from the logical one."""
    rng = np.random.default_rng(2)

    def weight(name, out, inp, k):
        return initializer(name, (rng.standard_normal((out, inp, k, k)) / np.sqrt(inp * k * k))
                           .astype(np.float32))
    nodes = [helper.make_node("Conv", ["input", "w1"], ["c1"], name="conv1", pads=[1] * 4),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", pads=[1] * 4),
             helper.make_node("Conv", ["p1", "w3"], ["c3"], name="conv3"),
             helper.make_node("Add", ["c2", "c3"], ["s"], name="add"),
             helper.make_node("GlobalAveragePool", ["s"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc_w"], ["logits"], name="fc", transB=1)]
    inits = [weight("w1", 12, 1, 3), weight("w2", 20, 12, 3), weight("w3", 20, 12, 1),
             initializer("fc_w", rng.standard_normal((5, 20)).astype(np.float32))]
    graph = from_bytes(model_bytes(nodes, [("input", TensorProto.FLOAT, ["N", 1, 8, 8])],
                                   [("logits", TensorProto.FLOAT, ["N", 5])], inits), batch=2)
    network = compile_network(graph, PRESETS["tiny"], {"input": images(16, seed=3)},
                              on_cpu=on_cpu)
    x = images(2, seed=4)
    result = network.run({"input": x}, keep=True)
    reference = execute(network.graph, {"input": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    slots = network.arena().slots
    # The 1x1 conv3 runs first: the 3x3 conv2 (more MACs per output) takes the add in.
    assert [c.name for c in network.graph.consumers("p1")] == ["conv3", "conv2"]
    assert "residual_shift" in network.graph.node("conv2").attrs
    assert result.copied_bytes == sum(slots[t].nbytes for t in written)
