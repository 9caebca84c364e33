"""Placement: the rule, its reasons, the cpu fallback for layers the accelerator refuses, and
the split of a dense layer over the per-program DRAM limit (`graph.placement`,
`graph.network.compile_network`)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.graph.models import initializer, model_bytes
from vdla.compiler.accel import driver
from vdla.compiler.ops import Dense
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network
from vdla.graph.ops import OPS
from vdla.graph.placement import (ACCEL_REASON, ON_CPU_REASON, TARGET_CPU_REASON,
                                  split_bounds)
from vdla.hw.config import PRESETS

BATCH = 2
# A grouped conv whose 33x33 kernel needs more wgt entries than the default config's
# buffer holds (the accelerator refuses it), then a dense layer of 40
# features, 288 inputs: its packed tensors take 14,688 bytes, a part of 32 features
# 9,984 and one of 16 5,280, so under an 8,000-byte limit it splits 16 + 16 + 8.
REFUSED = (r"no schedule fits conv2d \S+ -> 8 k33x33 .* on config 'default': even a 1x1 tile "
           r"with one channel block needs 1089 wgt entries")
TOO_LARGE = (r"dense 2x288 -> 40 \+bias \S+ is too large to compile: its tensors need "
             r"[\d,]+ bytes of DRAM \(weight [\d,]+\), more than vdla's limit of {limit:,} "
             r"bytes per layer")


def _model(seed: int = 0, spread: bool = False) -> bytes:
    """x (N, 12, 6, 6) -> grouped conv (4 groups, 8 channels, 33x33 kernel) -> relu -> flatten
    -> dense 40.

    ``spread``: the dense layer's rows at scales 2**0 .. 2**-3 (per-channel quantisation
    gives them exponents that differ: per-channel multipliers)."""
    rng = np.random.default_rng(seed)
    conv = (rng.standard_normal((8, 3, 33, 33)) / 40).astype(np.float32)
    dense = (rng.standard_normal((40, 288)) / 17).astype(np.float32)
    if spread:
        dense *= (2.0 ** -(np.arange(40) % 4)).astype(np.float32)[:, None]
    bias = rng.uniform(-0.2, 0.2, 40).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "cw"], ["c"], name="conv", group=4,
                              pads=[16, 16, 16, 16]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "dw", "db"], ["y"], name="fc", transB=1)]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, [BATCH, 12, 6, 6])],
                       [("y", TensorProto.FLOAT, [BATCH, 40])],
                       [initializer("cw", conv), initializer("dw", dense),
                        initializer("db", bias)])


def _compile(spread: bool = False, **options):
    rng = np.random.default_rng(3)
    graph = from_bytes(_model(spread=spread), batch=BATCH)
    calibration = {"x": rng.standard_normal((16, 12, 6, 6)).astype(np.float32)}
    return compile_network(graph, PRESETS["default"], calibration, **options)


def _input(seed: int = 9) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((BATCH, 12, 6, 6))
            .astype(np.float32)}


def _layers(network) -> dict[str, str]:
    return {name: place for name, place in network.placement.items() if place != "host"}


def test_a_layer_the_accelerator_refuses_runs_on_the_cpu_and_says_why():
    network = _compile()
    assert _layers(network) == {"conv": "cpu", "fc": "accel"}
    assert re.fullmatch(f"the accelerator refuses it: {REFUSED}.*", network.reason("conv"))
    assert re.fullmatch(f"on the cpu: the accelerator refuses it: {REFUSED}.*",
                        network.changes["conv"])
    assert network.reason("fc") == ACCEL_REASON and list(network.changes) == ["conv"]
    result = network.run(_input(), keep=True)
    reference = execute(network.graph, _input(), keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    assert {row["name"]: row["place"] for row in result.layers}["conv"] == "cpu"


def test_without_fallback_the_refusal_stops_the_compile():
    with pytest.raises(GraphError, match=rf"^node 'conv' \(qconv\): {REFUSED}.* \(place it on "
                                         r"the cpu with --on-cpu conv\)$"):
        _compile(fallback=False)


def test_each_place_has_its_reason():
    network = _compile(on_cpu=["conv"])
    assert network.reasons == {"conv": ON_CPU_REASON, "fc": ACCEL_REASON}
    assert network.changes == {}
    host = [node for node in network.graph.nodes if network.placement[node.name] == "host"]
    assert host and all(network.reason(node.name) == OPS[node.op].why for node in host)
    assert {row["name"]: row["reason"] for row in network.rows()} == {
        node.name: network.reason(node.name) for node in network.graph.nodes}
    assert _compile(target="cpu").reasons == {"conv": TARGET_CPU_REASON,
                                              "fc": TARGET_CPU_REASON}


@pytest.mark.parametrize("spread, per_channel", [(False, False), (True, True)])
def test_a_dense_layer_over_the_limit_splits_bit_exact(monkeypatch, spread, per_channel):
    whole = _compile(spread, per_channel=per_channel)
    monkeypatch.setattr(driver, "MAX_LAYER_BYTES", 8000)
    split = _compile(spread, per_channel=per_channel)
    parts = ["fc/part0", "fc/part1", "fc/part2"]
    assert _layers(split) == {"conv": "cpu", **{part: "accel" for part in parts}}
    assert split.placement["fc/concat"] == "host" and "fc" not in split.placement
    fc = whole.graph.node("fc")
    assert fc.attrs.get("per_channel", False) == per_channel
    weights = [split.graph.value(split.graph.node(part).inputs[1]) for part in parts]
    assert [w.shape[0] for w in weights] == [16, 16, 8]   # whole output blocks, then the rest
    np.testing.assert_array_equal(np.concatenate(weights), whole.graph.value(fc.inputs[1]))
    limit = TOO_LARGE.format(limit=8000)
    for index, part in enumerate(parts):
        assert re.fullmatch(rf"part {index + 1} of 3 of dense layer 'fc', split along its output "
                            rf"features: {limit}", split.reason(part))
    assert re.fullmatch(r"split into 3 accelerator layers \(fc/part0, fc/part1, fc/part2\) "
                        rf"joined by 'fc/concat' on the host: {limit}", split.changes["fc"])
    # The unsplit layer's reference (its numpy kernel on the whole weights) is the result.
    expected = execute(whole.graph, _input(), keep=True)
    result = split.run(_input(), keep=True)
    np.testing.assert_array_equal(result.outputs["y"], expected["y"])
    np.testing.assert_array_equal(result.tensors[fc.outputs[0]], expected[fc.outputs[0]])
    assert {row["name"] for row in result.layers if row["place"] == "accel"} == set(parts)


def test_a_dense_layer_whose_input_alone_is_over_the_limit_runs_on_the_cpu(monkeypatch):
    monkeypatch.setattr(driver, "MAX_LAYER_BYTES", 5000)   # under a 16-feature part
    network = _compile()
    assert _layers(network) == {"conv": "cpu", "fc": "cpu"}
    assert re.fullmatch(r"the accelerator refuses it: " + TOO_LARGE.format(limit=5000),
                        network.reason("fc"))
    with pytest.raises(GraphError, match=r"^node 'fc' \(qdense\): " + TOO_LARGE.format(
            limit=5000) + r" \(place it on the cpu with --on-cpu fc\)$"):
        _compile(on_cpu=["conv"], fallback=False)


def test_split_bounds_take_the_fewest_parts_of_whole_blocks():
    op = Dense(1, 8, 100, bias=True)

    def under(limit):
        return lambda part: part.out_features <= limit
    assert split_bounds(op, 16, under(64)) == [(0, 64), (64, 100)]
    assert split_bounds(op, 16, under(40)) == [(0, 32), (32, 64), (64, 96), (96, 100)]
    assert split_bounds(op, 16, under(16)) == [(i, min(i + 16, 100)) for i in range(0, 100, 16)]
    assert split_bounds(op, 16, under(15)) is None
