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
from vdla.graph.ops import OPS
from vdla.graph.placement import ACCEL_REASON, ON_CPU_REASON
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


def test_placement_reasons_round_trip_and_older_files_load_without_them(data):
    network = loads(data)
    assert network.reasons == {"conv1": ACCEL_REASON, "conv2": ACCEL_REASON,
                               "conv3": ACCEL_REASON, "fc": ON_CPU_REASON}
    assert network.reason("pool1") == OPS["maxpool"].why
    older = loads(_resign(data, lambda h: h.pop("reasons")))
    assert older.reasons == {} and older.placement == network.placement
    assert older.reason("conv1") == ACCEL_REASON and older.reason("pool1") == OPS["maxpool"].why
    assert older.reason("fc") == "placed on the cpu (the file records no reason)"


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


def _rename_node(header, old, new):
    _node(header, old)["name"] = new
    header["placement"][new] = header["placement"].pop(old)


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
    (lambda h: h["tensors"][0].update(shape=[], scale=[0.5]),
     r"tensor 'input': a list of 1 scales for shape \[\] \(at most one per index of its first "
     r"axis\)$"),
    # Names reach terminals: an escape sequence or a newline in one is refused.
    (lambda h: _rename_node(h, "pool1", "p\x1b]0;owned\x07\nX"),
     r"node name 'p\\x1b\]0;owned\\x07\\nX' is not a name \(a non-empty string of printable "
     r"characters\)$"),
    (lambda h: h["tensors"][0].update(name="in\u202eput"),
     r"tensor name 'in\\u202eput' is not a name"),
    (lambda h: _rename_node(h, "pool1", ""), r"node name '' is not a name"),
    # Declared sizes are capped, one tensor and all of them.
    (lambda h: h["tensors"][0].update(shape=[1 << 15, 1 << 14]),
     r"tensor 'input': shape \[32768, 16384\] declares more than the 268,435,456 elements"),
    (lambda h: h["tensors"].extend({"name": f"big{i}", "shape": [1 << 28], "dtype": "float32",
                                    "exponent": None} for i in range(5)),
     r"the tensors up to 'big\d' declare more than the 4,294,967,296 bytes a network's tensors "
     r"may hold together$"),
    # Windows are checked by arithmetic: a huge one is refused at once, not walked.
    (lambda h: _node(h, "pool1")["attrs"].update(kernel=[65535, 65535]),
     r"node 'pool1' \(maxpool\): its 65535x65535 window is larger than its padded input "
     r"\(8x8\)$"),
    # Pads just under such a window leave a few outputs, and a padded input of terabytes.
    (lambda h: _node(h, "pool1")["attrs"].update(kernel=[65535, 65535], stride=[65535, 65535],
                                                 pads=[65534, 65534, 65534, 65534]),
     r"node 'pool1' \(maxpool\): its padded input 2x8x131076x131076 holds more than the "
     r"268,435,456 elements a network's tensor may hold$"),
    (lambda h: _node(h, "pool1")["attrs"].update(pads=[2, 0, 0, 0]),
     r"node 'pool1' \(maxpool\): pads \(2, 0, 0, 0\) reach a whole 2x2 window"),
    (lambda h: _node(h, "pool1")["attrs"].update(stride=[1, 1]),
     r"node 'pool1' \(maxpool\): output 'p1' declared int8 \(2, 8, 4, 4\), computed int8 "
     r"\(2, 8, 7, 7\)$"),
    (lambda h: _node(h, "flatten")["attrs"].update(axis=5),
     r"node 'flatten' \(flatten\): axis 5 is out of range for int8 \(2, 8, 1, 1\)$"),
    (lambda h: _node(h, "softmax")["attrs"].update(axis=2),
     r"node 'softmax' \(softmax\): axis 2 is out of range for float32 \(2, 10\)$"),
    (lambda h: _node(h, "softmax")["inputs"].append("logits/float"),
     r"node 'softmax' \(softmax\): reads 2 and writes 1 tensors, expected 1 and 1$"),
    (lambda h: _node(h, "softmax/dequantize")["attrs"].update(exponent=-2000),
     r"node 'softmax/dequantize' \('dequantize_output'\): attribute exponent=-2000 is out of "
     r"range$"),
    (lambda h: _node(h, "input/quantize")["attrs"].update(exponent=None, scale=1e-300)
     or _node(h, "input/quantize")["attrs"].pop("exponent"),
     r"node 'input/quantize' \('quantize_input'\): attribute scale=1e-300 is outside "
     r"float32's normal range \(1.18e-38 to 3.4e\+38\)$"),
    # The metadata: the types and ranges every reader of it counts on.
    (lambda h: h["metadata"]["estimated_cycles"].update(conv1="lots"),
     r"metadata: estimated_cycles of 'conv1': 'lots' is not a cycle count \(an integer from 0 "
     r"to 9223372036854775807\)$"),
    (lambda h: h["metadata"]["estimated_cycles"].update(conv1=10 ** 400),
     r"metadata: estimated_cycles of 'conv1': 1000000000000000000000000000000000000\.\.\. is "
     r"not a cycle count"),
    (lambda h: h["metadata"]["estimated_cycles"].update(conv1=-1),
     r"metadata: estimated_cycles of 'conv1': -1 is not a cycle count"),
    (lambda h: h["metadata"]["estimated_cycles"].update(conv1=True),
     r"metadata: estimated_cycles of 'conv1': True is not a cycle count"),
    (lambda h: h["metadata"]["estimated_cycles"].update(pool1=5),
     r"metadata: estimated_cycles names 'pool1', which is no layer$"),
    (lambda h: h["metadata"]["estimated_cycles"].pop("conv2"),
     r"metadata: estimated_cycles has no count for accelerator layer 'conv2'$"),
    (lambda h: h["metadata"].update(estimated_cycles=[1, 2]),
     r"metadata: estimated_cycles must be a JSON object$"),
    (lambda h: h["metadata"].update(placement_costs={"fc": {"accel_ms": "x", "cpu_ms": 1.0}}),
     r"metadata: placement_costs of 'fc': \{'accel_ms': 'x', 'cpu_ms': 1\.0\} is not "
     r"\{accel_ms, cpu_ms\} \(milliseconds, finite and >= 0\)$"),
    (lambda h: h["metadata"].update(notes="\x1b[2J"),
     r"metadata: unknown entry 'notes' \(known: estimated_cycles, placement_costs\)$"),
    # The layers' placement reasons: one printable line each, for every layer and no other.
    (lambda h: h.update(reasons=["conv1"]), r"reasons must be a JSON object$"),
    (lambda h: h["reasons"].update(pool1="numpy"), r"reasons: names 'pool1', which is no layer$"),
    (lambda h: h["reasons"].pop("conv2"), r"reasons: no reason for layer 'conv2'$"),
    (lambda h: h["reasons"].update(conv1="\x1b[2Jfine"),
     r"reasons: the reason of 'conv1' \('\\x1b\[2Jfine'\) is not one line of at most 2000 "
     r"printable characters$"),
    (lambda h: h["reasons"].update(fc=7), r"reasons: the reason of 'fc' \(7\) is not one line"),
    (lambda h: h["reasons"].update(fc="x" * 2001), r"reasons: the reason of 'fc' \('xxx"),
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


def _host_only(shape):
    """A header change: the network becomes input -> quantize -> relu -> dequantize on
    ``shape``, all on the host."""
    def change(h):
        h["tensors"] = [{"name": name, "shape": shape, "dtype": dtype, "exponent": exponent}
                        for name, dtype, exponent in (("x", "float32", None), ("q", "int8", 4),
                                                      ("r", "int8", 4), ("y", "float32", None))]
        h["nodes"] = [{"name": op, "op": op, "inputs": [a], "outputs": [b],
                       "attrs": {"exponent": 4} if "quantize" in op else {}}
                      for op, a, b in (("quantize_input", "x", "q"), ("relu", "q", "r"),
                                       ("dequantize_output", "r", "y"))]
        h.update(inputs=["x"], outputs=["y"], programs={}, metadata={"estimated_cycles": {}},
                 placement={op: "host" for op in ("quantize_input", "relu",
                                                  "dequantize_output")})
        h.pop("reasons", None)   # the layers' reasons: this network has none
    return change


def test_loading_runs_no_node(data, monkeypatch):
    """Output shapes follow from the shape rules: no kernel runs while a file is checked."""
    import vdla.graph.kernels as kernels

    def refuse(node, *args):
        raise AssertionError(f"{node.op} ran while the file was loaded")
    for op in kernels.KERNELS:
        monkeypatch.setitem(kernels.KERNELS, op, refuse)
    assert loads(data).graph.outputs == ["probs"]
    assert loads(_resign(data, _host_only([1, 1, 8, 8]))).graph.outputs == ["y"]


def test_a_large_declared_tensor_costs_nothing_to_load(data):
    """A file of a few KB declaring 16M-element tensors loads in a few MB of memory."""
    import tracemalloc
    hostile = _resign(data, _host_only([1, 1, 4096, 4096]))
    tracemalloc.start()
    try:
        network = loads(hostile)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert network.graph.tensors["x"].shape == (1, 1, 4096, 4096)
    assert peak < 8 << 20, f"loading took {peak:,} bytes"


def _shape_cases():
    """(op, attrs, input shapes and dtypes) for every host operator, the odd ones included."""
    pool = {"kernel": (3, 2), "stride": (2, 3), "pads": (1, 0, 2, 1)}
    x4 = [((2, 3, 9, 7), np.int8)]
    f32 = np.float32
    recurrent = {"hidden": 2, "scale": 0.5, "out_scale": 0.25}
    return [
        ("quantize_input", {"exponent": 3}, [((2, 5), np.float32)]),
        ("dequantize_output", {"scale": 0.25}, [((3, 4, 1, 2), np.int8)]),
        ("qadd", {"shift_a": 1, "shift_b": 0, "shift": 2, "relu": True}, x4 * 2),
        ("qavgpool", {**pool, "count_include_pad": False}, x4),
        ("qavgpool", {**pool, "count_include_pad": True, "scale": 0.5, "out_scale": 0.25}, x4),
        ("qglobal_avgpool", {}, x4),
        ("maxpool", pool, x4),
        ("maxpool", {"kernel": (9, 7), "stride": (1, 1), "pads": (0, 0, 0, 0)},
         [((1, 2, 9, 7), np.float32)]),
        ("relu", {}, [((5,), np.int32)]),
        ("clip", {"min": -3, "max": 9}, x4),
        ("flatten", {"axis": 0}, x4),
        ("flatten", {"axis": 2}, x4),
        ("flatten", {"axis": 4}, x4),
        ("reshape", {"shape": (6, 63)}, x4),
        ("pad", {"pads": (1, 2, 3, 4)}, x4),
        ("softmax", {"axis": -1}, [((2, 10), np.float32)]),
        ("softmax", {"axis": 0}, [((2, 10), np.int8)]),
        ("concat", {"axis": 1}, [((2, 3, 4), np.int8), ((2, 5, 4), np.int8)]),
        ("concat", {"axis": -1}, [((2, 3), np.int8)] * 3),
        ("slice", {"starts": (1, 0, 3), "ends": (2, 3, -1), "steps": (1, 2, -2)},
         [((2, 3, 4), np.int8)]),
        ("transpose", {"perm": (2, 0, 3, 1)}, x4),
        ("qmatmul", {"shift": 7}, [((2, 1, 5, 4), np.int8), ((3, 4, 6), np.int8)]),
        ("qmatmul", {"shift": 0, "round_even": True}, [((5, 4), np.int8), ((4, 2), np.int8)]),
        ("qmatmul", {"scale": 0.01}, [((2, 5, 4), np.int8), ((2, 4, 3), np.int8)]),
        ("qsoftmax", {"axis": 1, "scale": 0.5, "out_scale": 0.25}, [((2, 5, 4), np.int8)]),
        ("qlayernorm", {"axis": 2, "epsilon": 1e-5, "scale": 0.5, "out_scale": 0.25},
         [((2, 5, 4), np.int8), ((4,), f32), ((4,), f32)]),
        ("gelu", {"table": tuple(range(-128, 128)), "tanh": True}, [((2, 5, 4), np.int8)]),
        ("erf", {"table": tuple(range(-128, 128))}, x4),
        ("sqrt", {"table": tuple(range(-128, 128))}, x4),
        ("reciprocal", {"table": tuple(range(-128, 128))}, x4),
        ("pow", {"table": tuple(range(-128, 128)), "exponent": 2.0}, x4),
        ("take", {"axis": 0}, [((10, 4), np.int8), ((2, 3), np.int64)]),
        ("where", {}, [((2, 5, 4), np.int8), ((1, 5, 1), np.bool_), ((1,), np.int8)]),
        ("expand", {"shape": (3, 2, 5, 4)}, [((2, 1, 4), np.int8)]),
        ("insert_zeros", {"stride": (2, 3), "crop": (1, 0, 2, 1)}, x4),
        ("interleave", {"block": (1, 3), "crop": (0, 1, 0, 2)}, x4),
        ("qaffine", {"scale": 0.5, "out_scale": 0.25, "relu": True},
         [((2, 3, 4), np.int8), ((1, 3, 1), np.float32), ((1, 1, 4), np.float32)]),
        ("requantize", {"scale": 0.5, "out_scale": 0.125}, x4),
        ("hardsigmoid", {"table": tuple(range(-128, 128)), "alpha": 0.2, "beta": 0.5}, x4),
        ("hardswish", {"table": (0,) * 256}, x4),
        ("sigmoid", {"table": (0,) * 256}, x4),
        ("tanh", {"table": (0,) * 256}, x4),
        ("leakyrelu", {"table": (0,) * 256, "alpha": 0.1}, x4),
        ("silu", {"table": (0,) * 256}, x4),
        ("qmul", {"shift": 7}, [((2, 3, 9, 7), np.int8), ((2, 3, 1, 1), np.int8)]),
        ("qmul", {"scale_a": 0.5, "scale_b": 0.25, "out_scale": 0.1},
         [((3, 1, 7), np.int8), ((4, 1), np.int8)]),
        ("qdiv", {"scale_a": 0.5, "scale_b": 0.25, "out_scale": 0.1},
         [((), np.int8), ((2, 3), np.int8)]),
        ("qsub", {"shift_a": 1, "shift_b": 0, "shift": 2, "relu": False},
         [((1, 3, 1, 1), np.int8), ((2, 3, 9, 7), np.int8)]),
        ("qadd_broadcast", {"scale_a": 0.5, "scale_b": 0.25, "relu": True},
         [((2, 3, 9, 7), np.int8), ((1, 3, 1, 1), np.int8)]),
        ("qprelu", {"scale": 0.5, "out_scale": 0.25},
         [((2, 3, 9, 7), np.int8), ((1, 3, 1, 1), np.float32)]),
        ("resize", {"size": (4, 15), "factor_h": 0.5, "factor_w": 2.0, "linear": True,
                    "coordinates": 0, "rounding": 0, "scale": 0.5, "out_scale": 0.25}, x4),
        ("reduce_max", {"axes": (1, 3), "keepdims": False}, x4),
        ("reduce_mean", {"axes": (2, 3), "keepdims": True}, x4),
        ("qlrn", {"size": 3, "alpha": 1e-4, "beta": 0.75, "bias": 1.0, "scale": 0.5,
                  "out_scale": 0.25}, x4),
        ("im2col", {**pool, "dilation": (2, 1)}, x4),
        ("qlstm", {**recurrent, "which": 0, "layout": 0, "direction": 0, "input_forget": False},
         [((15, 8), np.int8), ((1, 8, 2), f32), ((1, 8), f32), ((1, 6), f32),
          ((1, 3, 2), f32), ((1, 3, 2), f32)]),
        ("qlstm", {**recurrent, "which": 2, "layout": 1, "direction": 2, "input_forget": True,
                   "clip": 2.5},
         [((15, 16), np.int8), ((2, 8, 2), f32), ((2, 8), f32), ((2, 6), f32),
          ((3, 2, 2), f32), ((3, 2, 2), f32)]),
        ("qgru", {**recurrent, "which": 1, "layout": 0, "direction": 2,
                  "linear_before_reset": True},
         [((15, 12), np.int8), ((2, 6, 2), f32), ((2, 6), f32), ((2, 3, 2), f32)]),
        ("qgru", {**recurrent, "which": 0, "layout": 1, "direction": 1,
                  "linear_before_reset": False},
         [((15, 6), np.int8), ((1, 6, 2), f32), ((1, 6), f32), ((3, 1, 2), f32)]),
    ]


def test_host_shape_rules_agree_with_the_kernels():
    """Each host operator's shape rule gives the shape and dtype its kernel computes."""
    from vdla.graph.ir import Node, Tensor
    from vdla.graph.kernels import run_node
    from vdla.graph.network_file import HOST_SHAPES, NODE_ATTRS
    from vdla.graph.placement import LAYER_OPS
    assert set(HOST_SHAPES) == set(NODE_ATTRS) - set(LAYER_OPS)
    cases = _shape_cases()
    assert {op for op, *_ in cases} == set(HOST_SHAPES)
    for op, attrs, inputs in cases:
        node = Node(op, op, [f"in{i}" for i in range(len(inputs))], ["out"], attrs)
        tensors = [Tensor(f"in{i}", shape, dtype) for i, (shape, dtype) in enumerate(inputs)]
        arity, rule, dtype = HOST_SHAPES[op]
        (computed,) = run_node(node, [np.zeros(shape, dtype) for shape, dtype in inputs])
        assert arity in (None, len(inputs)), op   # None: any number (a concat's)
        assert tuple(rule(node, *tensors)) == computed.shape, (op, attrs)
        assert np.dtype(dtype or tensors[0].dtype) == computed.dtype, (op, attrs)


@pytest.mark.parametrize("op, attrs, shapes, message", [
    ("qglobal_avgpool", {}, [(2, 8)], r"input 'in0' is int8 \(2, 8\), not of rank 4$"),
    ("maxpool", {"kernel": (2, 2), "stride": (1, 1), "pads": (0, 0, 0, 0)}, [(2, 8, 8)],
     r"input 'in0' is int8 \(2, 8, 8\), not of rank 4$"),
    ("pad", {"pads": (1, 1, 1, 1)}, [(4,)], r"input 'in0' is int8 \(4,\), not of rank 4$"),
    ("qadd", {"relu": False, "scale_a": 1.0, "scale_b": 1.0}, [(2, 8, 4, 4), (1, 8, 4, 4)],
     r"adds int8 \(2, 8, 4, 4\) and int8 \(1, 8, 4, 4\), not two tensors of one shape$"),
    ("reshape", {"shape": (3, 3)}, [(2, 4)],
     r"shape \[3, 3\] does not hold its input int8 \(2, 4\)$"),
    ("qavgpool", {"kernel": (3, 3), "stride": (1, 1), "pads": (0, 0, 0, 3),
                  "count_include_pad": False}, [(1, 1, 4, 4)],
     r"pads \(0, 0, 0, 3\) reach a whole 3x3 window \(a window would see only padding\)$"),
    ("qgru", {"hidden": 2, "direction": 0, "layout": 0, "which": 0, "scale": 0.5,
              "out_scale": 0.25, "linear_before_reset": False}, [(15, 6), (1, 6, 2), (1, 6), (1, 3, 2)],
     r"input 'in1' is int8 \(1, 6, 2\), expected float32 of shape \(1, 6, 2\)$"),
])
def test_host_shape_rules_refuse_what_the_kernels_cannot_run(op, attrs, shapes, message):
    from vdla.graph.ir import Node, Tensor
    from vdla.graph.network_file import HOST_SHAPES
    node = Node("n", op, [f"in{i}" for i in range(len(shapes))], ["out"], attrs)
    _, rule, _ = HOST_SHAPES[op]
    with pytest.raises(GraphError, match=rf"^node 'n' \({op}\): {message}"):
        rule(node, *(Tensor(f"in{i}", shape, np.int8) for i, shape in enumerate(shapes)))


@pytest.mark.parametrize("region, change, message", [
    # (2, 7, 8, 8) packs into the bytes of (2, 8, 8, 8): the DRAM plan alone would pass it.
    ("out", {"shape": (2, 7, 8, 8)},
     r"its program's tensor 'out' is role output, layout output, shape \(2, 7, 8, 8\), the "
     r"layer's is role output, layout output, shape \(2, 8, 8, 8\)$"),
    ("data", {"role": "output"}, r"its program's tensor 'data' is role output, layout "
                                 r"activation, shape \(2, 9, 8, 8\), the layer's is role input"),
    ("bias", {"name": "scratch"}, r"its program's tensor 'bias' is none, the layer's is role "
                                  r"input, layout bias, shape \(8,\)$"),
])
def test_a_layer_program_must_hold_the_layers_tensors(region, change, message):
    import dataclasses
    network = _compile()
    program = network.programs["conv1"]
    network.programs["conv1"] = dataclasses.replace(program, tensors=[
        dataclasses.replace(t, **change) if t.name == region else t for t in program.tensors])
    with pytest.raises(GraphError, match=rf"^network file: node 'conv1' \(qconv\): {message}"):
        loads(dumps(network))
