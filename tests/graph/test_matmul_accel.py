"""Attention's MatMuls on the accelerator: a ``qmatmul`` at power-of-two scales as dense layers
whose weight is an activation (`graph.ops.matmul.lower_to_layers`), on fsim, the cpu target
and the RTL, bit for bit the integer reference."""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from vdla.frontend.onnx import from_bytes
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network, quantize_graph, residual_fusion
from vdla.graph.network_file import dumps, loads
from vdla.graph.ops.matmul import lower_to_layers
from vdla.graph.passes import TARGET_PIPELINE, run_passes
from vdla.hw.config import PRESETS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "models"))
import transformers  # noqa: E402  (benchmarks/models: the transformer zoo's builders)


def _expected(a: np.ndarray, b: np.ndarray, shift: int, even: bool) -> np.ndarray:
    """The int8 product rounded by ``shift`` (half up, or half to even), saturated."""
    acc = np.matmul(a.astype(np.int64), b.astype(np.int64))
    if even:
        rounded = np.round(acc / 2.0 ** shift).astype(np.int64)   # numpy rounds ties to even
    else:
        rounded = np.floor((acc + (2 ** shift) / 2) / 2.0 ** shift).astype(np.int64) \
            if shift else acc
    return np.clip(rounded, -128, 127).astype(np.int8)


def _qmatmul_graph(a_shape, b_shape, attrs, b_value=None) -> Graph:
    out = (*a_shape[:-1], b_shape[-1])
    tensors = {"a": Tensor("a", a_shape, np.int8, exponent=4),
               "b": Tensor("b", b_shape, np.int8, b_value, exponent=5),
               "y": Tensor("y", out, np.int8, exponent=3)}
    return Graph(tensors, [Node("mm", "qmatmul", ["a", "b"], ["y"], attrs)],
                 ["a"] + ([] if b_value is not None else ["b"]), ["y"]).check()


@pytest.mark.parametrize("a_shape, b_shape, attrs, constant", [
    ((5, 8), (8, 6), {"shift": 6}, False),
    ((3, 5, 8), (3, 8, 6), {"shift": 7}, False),
    ((2, 3, 5, 8), (2, 3, 8, 6), {"shift": 6, "round_even": True}, False),
    ((2, 3, 5, 8), (2, 3, 8, 6), {"shift": 0}, False),
    ((2, 5, 8), (2, 8, 6), {"shift": 5}, True),
])
def test_a_qmatmul_becomes_one_dense_layer_per_product_bit_for_bit(a_shape, b_shape, attrs,
                                                                   constant):
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, a_shape).astype(np.int8)
    b = rng.integers(-128, 128, b_shape).astype(np.int8)
    lowered = lower_to_layers(_qmatmul_graph(a_shape, b_shape, attrs, b if constant else None))
    layers = [node for node in lowered.nodes if node.op == "qdense"]
    assert "qmatmul" not in {node.op for node in lowered.nodes}
    assert len(layers) == math.prod(a_shape[:-2])
    assert all(lowered.tensors[node.inputs[1]].constant == constant for node in layers)
    assert ("b" in lowered.tensors) != constant   # a constant operand: in the weights only
    feeds = {"a": a} if constant else {"a": a, "b": b}
    got = execute(lowered, feeds)["y"]
    assert got.dtype == np.int8 and got.shape == (*a_shape[:-1], b_shape[-1])
    np.testing.assert_array_equal(got, _expected(a, b, attrs["shift"], "round_even" in attrs))


@pytest.mark.parametrize("a_shape, b_shape, attrs", [
    ((2, 5, 8), (2, 8, 6), {"scale": 0.01}),     # a float factor: the host's
    ((1, 5, 8), (2, 8, 6), {"shift": 6}),         # broadcast leading axes
])
def test_what_the_layers_do_not_compute_stays_a_host_qmatmul(a_shape, b_shape, attrs):
    graph = _qmatmul_graph(a_shape, b_shape, attrs)
    assert [node.op for node in lower_to_layers(graph).nodes] == ["qmatmul"]


def _attention(seq=8, dims=32, heads=2, seed=0):
    """x -> Q, K, V projections -> heads -> softmax(Q K^T / sqrt(d)) V -> merged heads."""
    rng = np.random.default_rng(seed)
    head = dims // heads
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def heads_of(x, name, perm):
        nodes.append(helper.make_node("Reshape", [x, const(f"{name}_shape", np.array(
            [1, seq, heads, head], np.int64))], [f"{name}_h"]))
        nodes.append(helper.make_node("Transpose", [f"{name}_h"], [name], perm=perm))
        return name

    projected = {}
    for what in "qkv":
        weight = (rng.standard_normal((dims, dims)) / np.sqrt(dims)).astype(np.float32)
        nodes.append(helper.make_node("MatMul", ["x", const(f"w{what}", weight)], [what]))
        projected[what] = heads_of(what, f"{what}_heads",
                                   [0, 2, 3, 1] if what == "k" else [0, 2, 1, 3])
    nodes += [
        helper.make_node("MatMul", ["q_heads", "k_heads"], ["scores"]),
        helper.make_node("Mul", ["scores", const("scale", np.float32(1 / np.sqrt(head)))],
                         ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "v_heads"], ["context"]),
        helper.make_node("Transpose", ["context"], ["merged"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["merged", const("out_shape", np.array([1, seq, dims],
                                                                           np.int64))], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                           [1, seq, dims])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return from_bytes(model.SerializeToString())


def _reference(graph, config, calibration):
    """The integer graph as the compile makes it, before its qmatmuls become layers."""
    integer = quantize_graph(graph, calibration, False, residual_fusion(config), "mse")
    return run_passes(integer, TARGET_PIPELINE, config=config, target="accel", on_cpu=())


def _check_products(reference, network, result) -> int:
    """Each of the reference's qmatmuls, recomputed from the run's own int8 operands, is the
    run's output; the number checked."""
    products = [node for node in reference.nodes if node.op == "qmatmul"]
    for node in products:
        a, b = (result.tensors[name] if name in result.tensors else
                network.graph.value(name) for name in node.inputs)
        np.testing.assert_array_equal(
            result.tensors[node.outputs[0]],
            _expected(a, b, node.attrs["shift"], bool(node.attrs.get("round_even"))),
            err_msg=node.name)
    return len(products)


def _compiled(graph, config, calibration, **options):
    network = compile_network(graph, config, calibration, **options)
    assert "qmatmul" not in {node.op for node in network.graph.nodes}
    return network


def test_a_mini_attention_block_runs_its_matmuls_on_the_accelerator_and_the_cpu():
    config, rng = PRESETS["default"], np.random.default_rng(1)
    graph = _attention()
    calibration = {"x": rng.standard_normal((8, 8, 32)).astype(np.float32)}
    reference = _reference(graph, config, calibration)
    assert sum(node.op == "qmatmul" for node in reference.nodes) == 2
    network = _compiled(graph, config, calibration)
    computed = [node for node in network.graph.nodes if node.op == "qdense"
                and not network.graph.tensors[node.inputs[1]].constant]
    assert len(computed) == 4   # two products, two heads each
    assert all(network.placement[node.name] == "accel" for node in computed)
    x = {"x": calibration["x"][:1]}
    want = execute(reference, x)["y"]
    for run in (network.run(x, keep=True), network.run(x, target="cpu", keep=True),
                loads(dumps(network)).run(x, keep=True)):
        assert _check_products(reference, network, run) == 2
        np.testing.assert_array_equal(run.outputs["y"], want)
    on_cpu = _compiled(graph, config, calibration, target="cpu")
    assert {on_cpu.placement[node.name] for node in on_cpu.graph.nodes
            if node.op == "qdense"} == {"cpu"}
    np.testing.assert_array_equal(on_cpu.run(x).outputs["y"], want)


def test_a_config_that_runs_each_layer_in_its_own_image_passes_the_weight_as_an_input():
    config, rng = PRESETS["odd"], np.random.default_rng(3)   # block_in != block_out
    graph = _attention()
    calibration = {"x": rng.standard_normal((4, 8, 32)).astype(np.float32)}
    reference = _reference(graph, config, calibration)
    network = _compiled(graph, config, calibration)
    assert not network.runs_in_arena
    x = {"x": calibration["x"][:1]}
    run = network.run(x, keep=True)
    assert _check_products(reference, network, run) == 2
    np.testing.assert_array_equal(run.outputs["y"], execute(reference, x)["y"])


@functools.lru_cache(maxsize=None)
def _mini(name: str):
    """A mini transformer's calibration, reference integer graph and network (compiled once
    for both targets' tests)."""
    config = PRESETS["default"]
    model = transformers.MODELS[name]()
    graph = from_bytes(model.SerializeToString(), batch=1)
    calibration = transformers.random_inputs(model, 4)
    return (calibration, _reference(graph, config, calibration),
            _compiled(graph, config, calibration))


@pytest.mark.parametrize("target", ["accel", "cpu"])
@pytest.mark.parametrize("name", ["deit_mini", "bert_mini"])
def test_the_mini_transformers_run_their_matmuls_on_the_accelerator(name, target):
    calibration, reference, network = _mini(name)
    assert {network.placement[node.name] for node in network.graph.nodes
            if node.op == "qdense"} == {"accel"}
    feeds = {key: value[:1] for key, value in calibration.items()}
    want = execute(reference, feeds)
    run = network.run(feeds, target=target, keep=True)
    assert _check_products(reference, network, run) == 4   # two blocks, two products each
    for output in reference.outputs:
        np.testing.assert_array_equal(run.outputs[output], want[output], err_msg=output)


@pytest.mark.slow
@pytest.mark.rtl
def test_the_rtl_computes_the_attention_block_as_fsim_does():
    config, rng = PRESETS["tiny"], np.random.default_rng(2)
    graph = _attention(seq=4, dims=16, heads=2)
    calibration = {"x": rng.standard_normal((4, 4, 16)).astype(np.float32)}
    network = _compiled(graph, config, calibration)
    x = {"x": calibration["x"][:1]}
    fsim, rtl = network.run(x, keep=True), network.run(x, sim="rtl", keep=True)
    for name, value in fsim.tensors.items():
        np.testing.assert_array_equal(rtl.tensors[name], value, err_msg=name)
    layers = [row for row in rtl.layers if row["place"] == "accel"]
    assert len(layers) == 7 and all(row["cycles"] > 0 for row in layers)
