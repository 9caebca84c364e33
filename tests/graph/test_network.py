"""A whole network on fsim, the cpu target and the RTL, bit-exact with the integer reference."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.graph.models import general_convs, images, residual_cnn
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Tensor
from vdla.graph.kernels import execute
from vdla.graph.network import Network, compile_network
from vdla.graph.placement import place
from vdla.hw.config import PRESETS


def _network(config="default", batch=3, **options):
    graph = from_bytes(residual_cnn(seed=5).SerializeToString(), batch=batch)
    return compile_network(graph, PRESETS[config], {"input": images(48, seed=1)}, **options)


def _assert_bit_exact(network, result, x):
    reference = execute(network.graph, {"input": x}, keep=True)
    assert set(result.tensors) == {n for node in network.graph.nodes for n in node.outputs}
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)


@pytest.mark.parametrize("options", [{"sim": "fsim"}, {"target": "cpu"}])
@pytest.mark.slow
def test_every_tensor_matches_the_reference(options):
    network = _network(on_cpu=["conv2"])
    x = images(3, seed=11)
    result = network.run({"input": x}, keep=True, **options)
    _assert_bit_exact(network, result, x)
    # The input packed once for the first layer, the output unpacked once; a cpu layer
    # (conv2) reads and writes the logical layout: one more each way. All on the cpu: none.
    assert result.repacks == (0 if options.get("target") == "cpu" else 4)
    places = {row["name"]: row["place"] for row in result.layers}
    expected_conv1 = "cpu" if options.get("target") == "cpu" else "accel"
    assert places["conv1"] == expected_conv1 and places["conv2"] == "cpu"
    # The residual add is fused into conv3 (graph.passes.residual), on the accelerator or
    # as the cpu target's C.
    assert "residual" not in places and places["conv3"] == expected_conv1
    assert network.graph.node("conv3").attrs["residual_shift"] >= 0


@pytest.mark.parametrize("options", [{"sim": "fsim"}, {"target": "cpu"}])
def test_grouped_dilated_and_padded_convs_run_bit_exact(options):
    """Depthwise, grouped + dilated and asymmetric convs on the accelerator (or cpu) whole."""
    graph = from_bytes(general_convs(seed=3).SerializeToString(), batch=2)
    network = compile_network(graph, PRESETS["default"], {"input": images(32, seed=1)})
    x = images(2, seed=4)
    result = network.run({"input": x}, keep=True, **options)
    _assert_bit_exact(network, result, x)
    ops = {node.name: node for node in network.graph.nodes}
    # The LOADs add all the padding, past the 1x3 kernel's extent too (windows that see
    # only padding): no host pad node.
    assert "wide/pad" not in ops and ops["wide"].attrs["pads"] == (0, 3, 1, 0)
    assert ops["depthwise"].attrs["pads"] == (0, 0, 1, 1)
    assert {row["name"] for row in result.layers if row["place"] != "host"} >= {
        "stem", "depthwise", "grouped", "wide", "fc"}


@pytest.mark.rtl
@pytest.mark.parametrize("sim, batch", [("rtl", 2), ("board-sim", 1)])
def test_timed_tiers_run_the_network_with_cycles(sim, batch):
    """The Verilator model, and the simulated board over its UART."""
    network = _network("tiny", batch=batch)
    x = images(batch, seed=12)
    result = network.run({"input": x}, sim=sim, keep=True)
    _assert_bit_exact(network, result, x)
    layers = [row for row in result.layers if row["place"] == "accel"]
    assert len(layers) == 4 and all(row["cycles"] > 0 for row in layers)
    assert result.repacks == 2  # activations stay blocked from the first layer to the last
    assert result.accel_cycles == sum(row["cycles"] for row in layers)


def test_placement_rule_and_its_override():
    network = _network()
    assert {n: p for n, p in network.placement.items() if p != "host"} == {
        "conv1": "accel", "conv2": "accel", "conv3": "accel", "fc": "accel"}
    assert place(network.graph, "cpu")["fc"] == "cpu"
    with pytest.raises(GraphError, match=r"^--on-cpu: node 'pool1' \(maxpool\) runs on the host "
                                         r"already; the layers are conv1, conv2, conv3, fc$"):
        place(network.graph, on_cpu=["pool1"])
    with pytest.raises(GraphError, match=r"^--on-cpu: no node is named 'nope'; the layers are"):
        place(network.graph, on_cpu=["nope"])


def test_inputs_are_checked_in_one_line():
    network = _network(batch=2)
    with pytest.raises(GraphError, match=r"^input 'input': expected float32 \(2, 1, 8, 8\), got "
                                         r"float32 \(3, 1, 8, 8\)$"):
        network.run({"input": images(3)})
    with pytest.raises(GraphError, match=r"^missing input 'input': expected float32"):
        network.run({})
    with pytest.raises(GraphError, match=r"^input 'input': holds NaN or infinite values$"):
        network.run({"input": np.full((2, 1, 8, 8), np.nan, np.float32)})


@pytest.mark.parametrize("clock_mhz, place", [(1e-3, "cpu"), (1e9, "accel")])
def test_placement_by_cost_follows_the_clock(clock_mhz, place):
    """A crawling accelerator loses every layer to the cpu; an infinitely fast one wins all."""
    network = _network(by_cost=True, clock_mhz=clock_mhz)
    layers = {n: p for n, p in network.placement.items() if p != "host"}
    assert set(layers.values()) == {place}
    assert sorted(network.programs) == (sorted(layers) if place == "accel" else [])
    costs = network.metadata["placement_costs"]
    assert sorted(costs) == sorted(layers) and all(c["cpu_ms"] > 0 for c in costs.values())
    x = images(3, seed=2)
    _assert_bit_exact(network, network.run({"input": x}, keep=True), x)


def test_every_missing_or_unknown_input_is_named():
    graph = Graph({name: Tensor(name, (2, 3), np.float32) for name in "ab"}, [], ["a", "b"],
                  ["a"])
    network = Network(graph, {}, {}, PRESETS["tiny"])
    with pytest.raises(GraphError, match=r"^missing inputs 'a' and 'b': expected float32 "
                                         r"\(2, 3\) and float32 \(2, 3\)$"):
        network.run({})
    zeros = np.zeros((2, 3), np.float32)
    with pytest.raises(GraphError, match=r"^unknown inputs 'c', 'd': the network's inputs "
                                         r"are a, b$"):
        network.run({"a": zeros, "b": zeros, "c": zeros, "d": zeros})


def test_a_run_builds_what_it_needs_before_it_times_any_node(monkeypatch):
    from vdla.compiler.cpu import kernel
    build = kernel.CpuKernel.__init__

    def slow_build(self, *args, **options):
        time.sleep(0.3)
        build(self, *args, **options)
    monkeypatch.setattr(kernel.CpuKernel, "__init__", slow_build)
    network = _network(on_cpu=["conv2"])
    x = images(3, seed=11)
    first = network.run({"input": x})
    assert first.build_seconds >= 0.3
    assert all(row["seconds"] < 0.3 for row in first.layers)
    again = network.run({"input": x})   # built once, for every run
    assert again.build_seconds < 0.3
    np.testing.assert_array_equal(again.outputs["probs"], first.outputs["probs"])
