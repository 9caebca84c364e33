"""Resize and Upsample (`graph.ops.resize`): float against onnx's reference (onnxruntime where
the reference has no Upsample linear or Resize of opset 10) on random cases, int8 against
DequantizeLinear -> Resize -> QuantizeLinear, the refusals, the hostile network file's
bounds, and a network through a file on fsim (blocked) and the cpu target."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.graph.models import initializer, model_bytes
from tests.graph.reference import fed_first, onnx_reference, qdq_node, vdla_float
from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.kernels import execute, run_node
from vdla.graph.network import compile_network, quantize_graph
from vdla.graph.network_file import HOST_SHAPES, dumps, loads
from vdla.graph.ops.resize import COORDINATES, ROUNDINGS
from vdla.hw.config import PRESETS

F32 = np.float32


def _resize(mode, coordinates, rounding, **attrs):
    return helper.make_node("Resize", ["x", "", "scales", "sizes"][:4], ["y"], mode=mode,
                            coordinate_transformation_mode=coordinates, nearest_mode=rounding,
                            **attrs)


def _random_case(rng):
    """A random Resize of a (N, C, H, W) input: mode, coordinates, rounding, and scales or
    sizes (upsampling and downsampling, whole and fractional)."""
    shape = tuple(int(v) for v in (rng.integers(1, 3), rng.integers(1, 4),
                                   rng.integers(1, 7), rng.integers(1, 7)))
    mode = str(rng.choice(["nearest", "linear"]))
    node = _resize(mode, str(rng.choice(COORDINATES)), str(rng.choice(ROUNDINGS)))
    if rng.random() < 0.5:
        factors = [float(rng.choice([0.5, 0.6, 0.75, 1.0, 1.5, 2.0, 2.3, 3.0])) for _ in "hw"]
        factors = [max(f, 1.0 / size) for f, size in zip(factors, shape[2:])]
        node.input[:] = ["x", "", "scales"]
        return node, shape, np.array([1, 1, *factors], F32)
    sizes = np.array([*shape[:2], *(int(v) for v in rng.integers(1, 12, 2))], np.int64)
    return node, shape, sizes


def test_resize_matches_onnx_on_random_cases():
    rng = np.random.default_rng(0)
    for _ in range(80):
        node, shape, values = _random_case(rng)
        x = rng.standard_normal(shape).astype(F32)
        arrays = [x, np.zeros(0, F32), values] if len(node.input) == 3 else \
            [x, np.zeros(0, F32), np.zeros(0, F32), values]
        data = fed_first(node, arrays, opset=13)
        (expected,) = onnx_reference(data, {"x": x})
        graph, (got,) = vdla_float(data, {"x": x})
        assert [n.op for n in graph.nodes] == ["resize"]
        assert got.dtype == expected.dtype and got.shape == expected.shape, node
        np.testing.assert_array_equal(got, expected, err_msg=str(node))


@pytest.mark.parametrize("axes, policy", [([2, 3], "stretch"), ([3, 2], "not_larger"),
                                          ([2, 3], "not_smaller"), (None, "stretch")])
def test_resize_axes_and_keep_aspect_ratio_policy_match_onnx(axes, policy):
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 5)).astype(F32)
    sizes = np.array([7, 3] if axes else [1, 2, 7, 3], np.int64)
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                            keep_aspect_ratio_policy=policy, **({"axes": axes} if axes else {}))
    data = fed_first(node, [x, np.zeros(0, F32), np.zeros(0, F32), sizes], opset=18)
    (expected,) = onnx_reference(data, {"x": x})
    _, (got,) = vdla_float(data, {"x": x})
    assert got.shape == expected.shape
    # Axes listed width first: the reference interpolates width first; float64 either way.
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op, mode, scales, opset", [
    ("Upsample", "nearest", [1, 1, 2, 3], 9), ("Upsample", "linear", [1, 1, 2.5, 1.5], 9),
    ("Resize", "nearest", [1, 1, 3, 2], 10), ("Resize", "linear", [1, 1, 0.5, 1.75], 10)])
def test_upsample_and_resize_of_opset_10_match_onnxruntime(op, mode, scales, opset):
    """Asymmetric coordinates, rounding down: what onnxruntime computes for them (onnx's
    reference has no Upsample linear, nor Resize without coordinate_transformation_mode)."""
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(2).standard_normal((1, 2, 4, 4)).astype(F32)
    node = helper.make_node(op, ["x", "scales"], ["y"], mode=mode)
    data = model_bytes([node], [("x", TensorProto.FLOAT, x.shape)],
                       [("y", TensorProto.FLOAT, None)],
                       [initializer("scales", np.array(scales, F32))], opset)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": x})
    _, (got,) = vdla_float(data, {"x": x})
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


# -- int8 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_int8_resize_is_what_dequantize_resize_quantize_computes(mode):
    """At the input's power-of-two scale: nearest moves values, bilinear rounds the float
    interpolation half to even; both exactly onnx's reference between DequantizeLinear and
    QuantizeLinear."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 4)).astype(F32)
    node = _resize(mode, "half_pixel", "round_prefer_ceil")
    node.input[:] = ["x", "", "scales"]
    scales = np.array([1, 1, 1.7, 0.75], F32)
    integer = quantize_graph(from_bytes(fed_first(node, [x, np.zeros(0, F32), scales])),
                             {"x": x})
    (resize,) = [n for n in integer.nodes if n.op == "resize"]
    s_x = integer.tensors[resize.inputs[0]].real_scale
    assert integer.tensors[resize.outputs[0]].real_scale == s_x and "scale" not in resize.attrs
    q = rng.integers(-128, 128, (2, 3, 5, 4), dtype=np.int8)
    (expected,) = _qdq(mode, s_x, s_x, scales, q)
    np.testing.assert_array_equal(run_node(resize, [q])[0], expected)


def _qdq(mode, s_x, s_y, scales, q):
    node = helper.make_node("Resize", ["x", "", "scales"], ["r"], mode=mode,
                            coordinate_transformation_mode="half_pixel",
                            nearest_mode="round_prefer_ceil")
    return onnx_reference(qdq_node(node, s_x, s_y, [initializer("scales", scales)]), {"q": q})


def test_int8_bilinear_resize_at_a_qdq_models_scales_dequantises_first():
    """Another output scale (a QDQ model's): dequantise, interpolate, quantise at it."""
    q = np.random.default_rng(4).integers(-128, 128, (1, 2, 3, 5), dtype=np.int8)
    scales = np.array([1, 1, 2.5, 0.6], F32)
    node = Node("r", "resize", ["q"], ["y"], {
        "size": (7, 3), "factor_h": 2.5, "factor_w": float(F32(0.6)), "linear": True,
        "coordinates": 0, "rounding": 1, "scale": 0.0371, "out_scale": 0.0213})
    (expected,) = _qdq("linear", 0.0371, 0.0213, scales, q)
    np.testing.assert_array_equal(run_node(node, [q])[0], expected)
    assert np.abs(expected.astype(int)).max() == 127   # the output scale saturates some


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("attrs, inputs, message", [
    ({"mode": "cubic"}, "scales", r"attribute mode='cubic' is not supported \(supported: "
                                  r"'nearest', 'linear'\)$"),
    ({"coordinate_transformation_mode": "tf_crop_and_resize"}, "scales",
     r"attribute coordinate_transformation_mode='tf_crop_and_resize' is not supported"),
    ({"antialias": 1, "mode": "linear"}, "scales",
     r"attribute antialias=1 is not supported \(supported: 0\)$"),
    ({"exclude_outside": 1}, "scales", r"attribute exclude_outside=1 is not supported"),
    ({"keep_aspect_ratio_policy": "not_smaller"}, "sizes",   # over every axis, batch too
     r"it resizes axis 0 \(scale 2\); only height and width are supported$"),
    ({}, "computed", r"its scales \('s'\) must be a constant$"),
    ({}, "channels", r"it resizes axis 1 \(scale 2\); only height and width are supported$"),
    ({}, "huge", r"its output 65536x4 at scales \[16384.0, 1.0\]: vdla resizes to fewer than "
                 r"65536 rows and columns"),
])
def test_what_resize_cannot_import_is_refused_in_one_line(attrs, inputs, message):
    f32 = TensorProto.FLOAT
    scales = initializer("scales", np.array([1, 1, 2, 2], F32))
    sizes = initializer("sizes", np.array([1, 2, 8, 8], np.int64))
    names, inits, feeds = ["x", "", "scales"], [scales], [("x", f32, (1, 2, 4, 4))]
    if inputs == "sizes":
        names, inits = ["x", "", "", "sizes"], [sizes]
    elif inputs == "computed":
        names, inits = ["x", "", "s"], []
        feeds.append(("s", f32, (4,)))
    elif inputs == "channels":
        inits = [initializer("scales", np.array([1, 2, 2, 2], F32))]
    elif inputs == "huge":
        inits = [initializer("scales", np.array([1, 1, 16384, 1], F32))]
    node = helper.make_node("Resize", names, ["y"], **attrs)
    data = model_bytes([node], feeds, [("y", f32, None)], inits, 18)
    with pytest.raises(GraphError, match=rf"^node 'y' \(Resize\): {message}"):
        from_bytes(data)


def test_a_nearest_downsampling_upsample_is_refused():
    node = helper.make_node("Resize", ["x", "scales"], ["y"], mode="nearest")
    data = model_bytes([node], [("x", TensorProto.FLOAT, (1, 1, 4, 4))],
                       [("y", TensorProto.FLOAT, None)],
                       [initializer("scales", np.array([1, 1, 0.5, 1], F32))], 10)
    with pytest.raises(GraphError, match=r"^node 'y' \(Resize\): a nearest downsampling "
                                         r"\(scales \[1.0, 1.0, 0.5, 1.0\]\) at opset 10 is not "
                                         r"supported"):
        from_bytes(data)


@pytest.mark.parametrize("attrs, shape, message", [
    ({"size": (60000, 60000)}, (1, 1, 2, 2),
     r"its output would hold 3,600,000,000 elements, more than the 268,435,456"),
    ({"size": (60000, 1)}, (1, 1, 2, 8000),
     r"its rows resized would hold 480,000,000 elements"),
    ({"factor_h": 0.0}, (1, 1, 2, 2), r"factors 0.0, 2.0 are not between 2\*\*-32 and 2\*\*32$"),
    ({"coordinates": 4}, (1, 1, 2, 2), r"coordinates 4 is not one of 0..3 \(half_pixel, "),
    ({"rounding": -1}, (1, 1, 2, 2), r"rounding -1 is not one of 0..3"),
    ({}, (2, 2, 2), r"input 'x' is int8 \(2, 2, 2\), not of rank 4$"),
])
def test_the_shape_rule_bounds_a_hostile_network_files_resize(attrs, shape, message):
    """Before the kernel allocates anything: its output and its one intermediate array are
    capped as tensors are, and its attributes are ones the kernel takes."""
    node = Node("n", "resize", ["x"], ["y"], {"size": (4, 4), "factor_h": 2.0,
                                             "factor_w": 2.0, "linear": True, "coordinates": 0,
                                             "rounding": 0, **attrs})
    with pytest.raises(GraphError, match=rf"^node 'n' \(resize\): {message}"):
        HOST_SHAPES["resize"][1](node, Tensor("x", shape, np.int8))


# -- a network ----------------------------------------------------------------------------------


def _upsampling_model() -> bytes:
    """conv, relu, bilinear x2, conv, nearest x2 (a U-Net decoder's and a YOLO neck's)."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Resize", ["r1", "", "up"], ["u1"], mode="linear"),
             helper.make_node("Conv", ["u1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["c2", "", "up"], ["y"], mode="nearest",
                              coordinate_transformation_mode="asymmetric",
                              nearest_mode="floor")]
    inits = [initializer("w1", (rng.standard_normal((4, 2, 3, 3)) * 0.3).astype(F32)),
             initializer("w2", (rng.standard_normal((3, 4, 3, 3)) * 0.3).astype(F32)),
             initializer("up", np.array([1, 1, 2, 2], F32))]
    return model_bytes(nodes, [("x", TensorProto.FLOAT, (2, 2, 5, 6))],
                       [("y", TensorProto.FLOAT, None)], inits)


@pytest.mark.parametrize("options", [{"sim": "fsim"}, {"target": "cpu"}])
def test_a_network_with_resizes_saves_loads_and_runs_bit_exact(options):
    graph = from_bytes(_upsampling_model())
    rng = np.random.default_rng(6)
    network = loads(dumps(compile_network(graph, PRESETS["default"], {
        "x": rng.standard_normal((8, 2, 5, 6)).astype(F32)})))
    assert [n.op for n in network.graph.nodes if n.op == "resize"] == ["resize", "resize"]
    x = rng.standard_normal((2, 2, 5, 6)).astype(F32)
    result = network.run({"x": x}, keep=True, **options)
    reference = execute(network.graph, {"x": x}, keep=True)
    for name, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    expected = execute(graph, {"x": x})["y"]
    got = result.outputs["y"]
    assert got.shape == (2, 3, 20, 24)
    assert float(np.ravel(got) @ np.ravel(expected)
                 / np.linalg.norm(got) / np.linalg.norm(expected)) > 0.99


def test_the_qdq_export_of_resizes_runs_on_onnxruntime():
    """Each resize of the integer graph, on onnxruntime's own int8 input: nearest exactly,
    bilinear within 1 (onnxruntime's float32 weights)."""
    ort = pytest.importorskip("onnxruntime")
    from vdla.graph.export import to_qdq
    x = np.random.default_rng(7).standard_normal((2, 2, 5, 6)).astype(F32)
    integer = quantize_graph(from_bytes(_upsampling_model()), {"x": x})
    model = to_qdq(integer)
    resizes = [n for n in integer.nodes if n.op == "resize"]
    for node in resizes:
        for name in (node.inputs[0], node.outputs[0]):
            model.graph.output.append(helper.make_tensor_value_info(
                name, TensorProto.INT8, list(integer.tensors[name].shape)))
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    theirs = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"x": x})))
    for node in resizes:
        ours = run_node(node, [theirs[node.inputs[0]]])[0].astype(int)
        difference = np.abs(ours - theirs[node.outputs[0]].astype(int))
        assert difference.max() <= (1 if node.attrs["linear"] else 0), node.name
