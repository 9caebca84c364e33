"""The plan of a network's run (which node runs where, on which buffers) and its executors."""

from __future__ import annotations

import numpy as np

from tests.graph.models import images, residual_cnn
from vdla.frontend.onnx import from_bytes
from vdla.graph.execution import ARENA, CPU, HOST, HOST_BLOCKED, IMAGE, plan_steps
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network
from vdla.hw.config import PRESETS


def _network(config: str, **options):
    graph = from_bytes(residual_cnn(seed=5).SerializeToString(), batch=2)
    return compile_network(graph, PRESETS[config], {"input": images(32, seed=1)}, **options)


def _plan(network, target="accel", in_arena=None):
    in_arena = network.runs_in_arena if in_arena is None else in_arena
    return {step.node.name: (step.place, step.kind)
            for step in plan_steps(network.graph, network.placement, target, in_arena)}


def test_the_plan_keeps_the_arenas_blocked_tensors_blocked_where_readers_can_take_them():
    network = _network("tiny", on_cpu=["conv2"])
    assert network.runs_in_arena
    assert _plan(network) == {
        "input/quantize": ("host", HOST),
        "conv1/im2col": ("host", HOST),       # the stem's patches (graph.passes.stem)
        "conv1": ("accel", ARENA),
        "pool1": ("host", HOST_BLOCKED),      # conv1's output as it lies in its slot
        "conv2": ("cpu", CPU),                # reads and writes the logical layout
        "conv3": ("accel", ARENA),
        "gap": ("host", HOST_BLOCKED),
        "flatten": ("host", HOST_BLOCKED),    # of a 1x1 image: the same bytes
        "fc": ("accel", ARENA),
        "softmax/dequantize": ("host", HOST),
        "softmax": ("host", HOST),
    }
    # Every layer as C: nothing is blocked, so every host node runs on logical arrays.
    assert {kind for _, kind in _plan(network, target="cpu").values()} == {CPU, HOST}
    # Layers in images of their own hand logical tensors on.
    assert {name: kind for name, (_, kind) in _plan(network, in_arena=False).items()
            if kind not in (CPU, HOST)} == {"conv1": IMAGE, "conv3": IMAGE, "fc": IMAGE}


def test_layers_in_images_of_their_own_run_bit_exact_without_repacking():
    """A 2x8x4 block: input and output layouts differ, so no arena (the image executor)."""
    network = _network("odd")
    assert not network.runs_in_arena
    assert {kind for _, kind in _plan(network).values()} == {IMAGE, HOST}
    x = images(2, seed=7)
    result = network.run({"input": x}, keep=True)
    reference = execute(network.graph, {"input": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    assert result.repacks == 0
