"""The network file: deterministic bytes, a faithful round trip, and every tampering refused."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import pytest

from tests.graph.models import general_convs, images, residual_cnn
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network
from vdla.graph.network_file import MAGIC, dumps, is_network_file, load, loads, save
from vdla.hw.config import PRESETS


def _compile():
    graph = from_bytes(residual_cnn(seed=6).SerializeToString(), batch=2)
    return compile_network(graph, PRESETS["tiny"], {"input": images(32, seed=3)},
                           on_cpu=["fc"])


@pytest.fixture(scope="module")
def data():
    return dumps(_compile())


def test_same_network_same_bytes_and_a_faithful_round_trip(data, tmp_path):
    assert dumps(_compile()) == data
    network = loads(data)
    assert network.placement["fc"] == "cpu" and sorted(network.programs) == ["conv1", "conv2",
                                                                             "conv3"]
    x = images(2, seed=4)
    result = network.run({"input": x})
    reference = execute(network.graph, {"input": x})
    np.testing.assert_array_equal(result.outputs["probs"], reference["probs"])
    path = save(network, tmp_path / "net.vdla")
    assert is_network_file(path) and load(path).graph.outputs == ["probs"]
    with pytest.raises(GraphError, match=r"compiled for hardware 'tiny', not for 'default'"):
        load(path, PRESETS["default"])


def test_grouped_and_dilated_layers_round_trip():
    graph = from_bytes(general_convs(seed=3).SerializeToString(), batch=1)
    network = loads(dumps(compile_network(graph, PRESETS["tiny"], {"input": images(16)})))
    assert network.graph.node("depthwise").attrs["groups"] == 8
    assert network.graph.node("grouped").attrs["dilation"] == (2, 2)
    x = images(1, seed=4)
    np.testing.assert_array_equal(network.run({"input": x}).outputs["logits"],
                                  execute(network.graph, {"input": x})["logits"])


def _resign(data: bytes, change) -> bytes:
    """The file with its header changed by ``change(header)`` and a valid digest."""
    _, version, length = struct.unpack_from("<8sII", data)
    header = json.loads(data[16:16 + length])
    change(header)
    text = json.dumps(header).encode()
    body = struct.pack("<8sII", MAGIC, version, len(text)) + text + data[16 + length:-32]
    return body + hashlib.sha256(body).digest()


def _node(header, name):
    return next(n for n in header["nodes"] if n["name"] == name)


@pytest.mark.parametrize("change, message", [
    (lambda h: _node(h, "conv1")["attrs"].update(shift=40),
     r"node 'conv1' \('qconv'\): attribute shift=40 is out of range"),
    (lambda h: _node(h, "conv2")["attrs"].update(shift=3),
     r"node 'conv2' \(qconv\): its program computes 'conv2d .*', not this layer"),
    (lambda h: _node(h, "pool1").update(op="exec"),
     r"node 'pool1' \('exec'\): operator 'exec' is not one a network runs"),
    (lambda h: h["placement"].update(pool1="accel"),
     r"node 'pool1' \(maxpool\): placed on 'accel', expected one of host"),
    (lambda h: h["programs"].update(conv1=[0, 1 << 40]),
     r"node 'conv1' \(qconv\): program: byte range \[0, 1099511627776\] is outside"),
    (lambda h: _node(h, "flatten")["attrs"].update(axis=3),
     r"node 'flatten' \(flatten\): output 'f' declared int8 \(2, 8\), computed int8 \(16, 1\)"),
    (lambda h: _node(h, "conv3")["inputs"].reverse() or h["nodes"].reverse(),
     r"node 'softmax' \(softmax\): input 'logits/float' is not defined before it is read"),
    # A fused residual (graph.passes.residual): conv3 adds p1.
    (lambda h: _node(h, "conv3")["attrs"].update(residual_shift=25),
     r"node 'conv3' \('qconv'\): attribute residual_shift=25 is out of range"),
    (lambda h: _node(h, "conv3")["attrs"].update(residual_shift=_node(h, "conv3")["attrs"][
        "residual_shift"] + 1),
     r"node 'conv3' \(qconv\): its program computes 'conv2d .* \+res<<\d+ .*', not this layer"),
    (lambda h: _node(h, "conv3")["attrs"].update(multiplier=3, pre_shift=0),
     r"node 'conv3' \('qconv'\): attributes \[.*'residual_shift'.*\], expected"),
    (lambda h: _node(h, "conv3")["inputs"].pop(),
     r"node 'conv3' \(qconv\): a layer reads data, weight and bias and a residual and writes "
     r"one tensor"),
    (lambda h: _node(h, "conv3")["attrs"].pop("residual_shift"),
     r"node 'conv3' \(qconv\): a layer reads data, weight and bias and writes one tensor"),
    (lambda h: _node(h, "conv3")["inputs"].__setitem__(3, "input/q"),
     r"node 'conv3': residual int8 \(2, 1, 8, 8\), the layer gives int8 \(2, 8, 4, 4\)"),
    (lambda h: _node(h, "conv3")["inputs"].__setitem__(3, "conv3/bias_q"),
     r"node 'conv3' \(qconv\): its residual is int32 \(8,\), not int8"),
    (lambda h: h["tensors"][0].update(dtype="object"),
     r"tensor 'input': dtype 'object', exponent or scale is not supported"),
])
def test_tampered_headers_are_refused_in_one_line(data, change, message):
    with pytest.raises(GraphError, match=f"^network file: {message}"):
        loads(_resign(data, change))


def test_damage_and_truncation_are_refused(data):
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 1
    with pytest.raises(GraphError, match=r"^network file: damaged or truncated \(SHA-256"):
        loads(bytes(flipped))
    with pytest.raises(GraphError, match=r"^network file: damaged or truncated"):
        loads(data[:-100])
    with pytest.raises(GraphError, match=r"^network file: not a vdla network file"):
        loads(b"VDLAPROG" + data[8:])


def _paths(value, prefix=()):
    """Every path to a value inside a JSON document."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


_HOSTILE = [None, -1, 0, 2 ** 40, "x", [], {}, 1.5, True, [1, 2], {"a": 1}, "qconv"]


def test_any_header_value_replaced_loads_or_is_one_graph_error(data):
    """Each place of the header, given hostile values: a clean refusal or a valid network."""
    _, _, length = struct.unpack_from("<8sII", data)
    header = json.loads(data[16:16 + length])
    paths = [p for p in _paths(header) if p and p[0] != "config"]
    rng = np.random.default_rng(0)
    for index in rng.choice(len(paths), size=min(150, len(paths)), replace=False):
        path = paths[index]
        value = _HOSTILE[rng.integers(len(_HOSTILE))]

        def change(h, path=path, value=value):
            target = h
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
        try:
            loads(_resign(data, change))
        except GraphError as error:
            assert "\n" not in str(error)
