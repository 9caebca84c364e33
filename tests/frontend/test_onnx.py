"""ONNX import: real graphs import or are refused in one line; malformed files never crash.

The float graph the importer builds is run by `graph.kernels` and compared
with onnxruntime on the same model (an independent implementation).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.graph.models import general_convs, images, initializer, model_bytes, residual_cnn
from vdla.frontend.onnx import MAX_TENSOR_ELEMENTS, from_bytes, load
from vdla.graph.errors import GraphError
from vdla.graph.kernels import execute

LIGHT = Path(onnx.__file__).parent / "backend/test/data/light"

# Each real graph the onnx wheel ships (opset 9, constant weights) imports: its last node and
# output shape.
IMPORTS = ("softmax", (1, 1000))
LIGHT_MODELS = {
    "light_resnet50.onnx": IMPORTS,
    "light_vgg19.onnx": IMPORTS,
    "light_inception_v2.onnx": IMPORTS,
    "light_shufflenet.onnx": IMPORTS,
    # a classifier's softmax over (1, 1000, 1, 1), flattening as before opset 13
    "light_squeezenet.onnx": ("softmax", (1, 1000, 1, 1)),
    # its last node the classifier's 1x1 conv
    "light_densenet121.onnx": ("conv", (1, 1000, 1, 1)),
    "light_bvlc_alexnet.onnx": IMPORTS,
    "light_zfnet512.onnx": IMPORTS,
    "light_inception_v1.onnx": IMPORTS,
}


@pytest.mark.parametrize("name", sorted(LIGHT_MODELS))
def test_real_graphs_import(name):
    graph = load(LIGHT / name)
    assert [graph.tensors[name].shape for name in graph.inputs] == [(1, 3, 224, 224)]
    assert (graph.nodes[-1].op, graph.tensors[graph.outputs[0]].shape) == LIGHT_MODELS[name]


def test_every_light_model_is_covered():
    assert sorted(os.listdir(LIGHT)) == sorted(
        [*LIGHT_MODELS, *(name.replace(".onnx", "_output_0.pb") for name in LIGHT_MODELS)])


def test_imported_graph_computes_what_onnxruntime_does():
    ort = pytest.importorskip("onnxruntime")
    model = residual_cnn(seed=3)
    graph = from_bytes(model.SerializeToString(), batch=5)
    assert [n.op for n in graph.nodes] == [
        "conv", "batchnorm", "relu", "maxpool", "conv", "batchnorm", "relu", "conv",
        "batchnorm", "add", "relu", "global_avgpool", "flatten", "dense", "softmax"]
    x = images(5)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"input": x})[0]
    np.testing.assert_allclose(execute(graph, {"input": x})["probs"], expected, atol=1e-6)


def test_batch_fixes_the_symbolic_axis():
    graph = from_bytes(residual_cnn().SerializeToString())
    assert graph.tensors["input"].shape == (1, 1, 8, 8)
    graph = from_bytes(residual_cnn().SerializeToString(), batch=7)
    assert graph.tensors["probs"].shape == (7, 10)


def _single(node: onnx.NodeProto, inits=(), shape=(1, 2, 4, 4), opset=17, out_shape=None):
    return model_bytes([node], [("x", TensorProto.FLOAT, list(shape))],
                       [("y", TensorProto.FLOAT, out_shape)], inits, opset)


WEIGHT = initializer("w", np.ones((3, 2, 3, 3), np.float32))


@pytest.mark.parametrize("node, inits, message", [
    (helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2],
                      dilations=[2, 2]), [],
     r"node 'p' \(MaxPool\): attribute dilations=\[2, 2\] is not supported \(only 1\)"),
    (helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2],
                      pads=[2, 0, 0, 0]), [],
     r"node 'p' \(MaxPool\): pads \(2, 0, 0, 0\) reach a whole kernel"),
    (helper.make_node("Pad", ["x", "pads"], ["y"], name="p"),
     [initializer("pads", np.array([0, 1, 0, 0, 0, 0, 0, 0], np.int64))],
     r"node 'p' \(Pad\): pads \[0, 1, 0, 0, 0, 0, 0, 0\]: only padding added to height and "
     r"width is supported \(none on batch or channels, none negative\)$"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="c", group=2), [WEIGHT],
     r"node 'c' \(Conv\): attribute group=2 does not fit input channels 2 and weight "
     r"\(3, 2, 3, 3\) \(expected input channels = group \* weight.shape\[1\], group "
     r"dividing weight.shape\[0\]\)$"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="c", foo=1), [WEIGHT],
     r"node 'c' \(Conv\): attribute foo is not supported"),
    (helper.make_node("Conv", ["x", "missing"], ["y"], name="c"), [],
     r"node 'c' \(Conv\): input 'missing' is not defined \(no initializer, graph input or "
     r"node output\)"),
    (helper.make_node("Einsum", ["x"], ["y"], name="n", equation="nchw->nchw"), [],
     r"node 'n' \(Einsum\): operator Einsum is not supported \(vdla imports Add, "),
    (helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[1, 1], ceil_mode=1,
                      strides=[2, 2]), [],
     r"node 'p' \(MaxPool\): ceil_mode=1 gives output \(1, 2, 2, 2\) by ONNX's rule \(no "
     r"window starts in the bottom or right padding\), but onnx shape inference says "
     r"\(1, 2, 3, 3\)"),
    (helper.make_node("Gemm", ["x", "w"], ["y"], name="g", alpha=2.0), [WEIGHT],
     r"model: onnx shape inference failed: \[ShapeInferenceError\] Inference error\(s\): "
     r"\(op_type:Gemm, node name: g\): \[ShapeInferenceError\] Input 0 expected to have "
     r"rank 2 but has rank 4"),
])
def test_unsupported_nodes_are_refused_naming_node_op_and_what(node, inits, message):
    with pytest.raises(GraphError, match=f"^{message}"):
        from_bytes(_single(node, inits))


def test_asymmetric_pads_are_kept_exactly():
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c", auto_pad="SAME_UPPER",
                            strides=[2, 2])
    graph = from_bytes(_single(node, [initializer("w", np.ones((3, 2, 2, 2), np.float32))]))
    assert graph.nodes[0].attrs["pads"] == (0, 0, 0, 0)
    graph = from_bytes(_single(helper.make_node("Conv", ["x", "w"], ["y"], name="c",
                                                auto_pad="SAME_UPPER"),
                               [initializer("w", np.ones((3, 2, 2, 2), np.float32))]))
    assert graph.nodes[0].attrs["pads"] == (0, 0, 1, 1)


def test_opset_outside_the_supported_range_is_refused():
    data = _single(helper.make_node("Relu", ["x"], ["y"]), opset=8)
    with pytest.raises(GraphError, match=r"^model: opset 8 is not supported \(vdla reads "
                                         r"opsets 9-21\)$"):
        from_bytes(data)


def test_malformed_files_are_one_line(tmp_path):
    data = residual_cnn().SerializeToString()
    with pytest.raises(GraphError, match=r"not a readable ONNX model \(the protobuf does not "
                                         r"parse: DecodeError\)"):
        from_bytes(data[:len(data) // 2])
    with pytest.raises(GraphError, match=r"not an ONNX model \(it holds no graph nodes\)"):
        from_bytes(b"")
    path = tmp_path / "missing.onnx"
    with pytest.raises(GraphError, match=r"^cannot read model \S*missing.onnx: No such file or directory$"):
        load(path)


def test_cycle_is_refused():
    nodes = [helper.make_node("Relu", ["b"], ["a"], name="r1"),
             helper.make_node("Relu", ["a"], ["b"], name="r2"),
             helper.make_node("Add", ["x", "b"], ["y"], name="add")]
    model = model_bytes(nodes, [("x", TensorProto.FLOAT, [1, 2])],
                        [("y", TensorProto.FLOAT, [1, 2])])
    with pytest.raises(GraphError, match=r"^node 'r1' \(Relu\): the graph has a cycle through "
                                         r"input 'b'$"):
        from_bytes(model)


def test_wrong_types_and_absurd_sizes_are_refused():
    wrong = initializer("w", np.ones((3, 2, 3, 3), np.float32))
    wrong.raw_data = wrong.raw_data[:10]  # fewer bytes than its dims need
    with pytest.raises(GraphError, match=r"^initializer 'w': malformed data"):
        from_bytes(_single(helper.make_node("Conv", ["x", "w"], ["y"]), [wrong]))
    huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 10])
    with pytest.raises(GraphError, match=f"^initializer 'w': {(1 << 30):,} elements, more than "
                                         f"vdla's limit of {MAX_TENSOR_ELEMENTS:,} per tensor"):
        from_bytes(_single(helper.make_node("Conv", ["x", "w"], ["y"]), [huge]))
    shape = initializer("s", np.array([1 << 15, 1 << 15], np.int64))
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], name="big")
    with pytest.raises(GraphError, match=r"^node 'big' \(ConstantOfShape\): 1,073,741,824 "
                                         r"elements, more than"):
        from_bytes(_single(node, [shape]))


def test_external_data_outside_the_model_folder_is_refused(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.ones(54, np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    weight = initializer("w", np.zeros((3, 2, 3, 3), np.float32))
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in {"location": "../secret.bin", "offset": "0", "length": "216"}.items():
        weight.external_data.add(key=key, value=value)
    (folder / "m.onnx").write_bytes(_single(helper.make_node("Conv", ["x", "w"], ["y"]),
                                            [weight]))
    with pytest.raises(GraphError, match=r"^initializer 'w': external data location "
                                         r"'../secret.bin' is outside the model's folder"):
        load(folder / "m.onnx")
    # Inside the folder it is read (exactly the bytes its shape needs).
    (folder / "w.bin").write_bytes(np.full(54, 0.5, np.float32).tobytes())
    weight.external_data[0].value = "w.bin"
    (folder / "m.onnx").write_bytes(_single(helper.make_node("Conv", ["x", "w"], ["y"]),
                                            [weight]))
    graph = load(folder / "m.onnx")
    assert np.all(graph.value("w") == 0.5)


def test_a_fixed_batch_changes_with_its_reshapes():
    # The file records batch 1 on its input and output; batch 3 is asked for.
    graph = from_bytes(residual_cnn(batch=1).SerializeToString(), batch=3)
    assert graph.tensors["input"].shape == (3, 1, 8, 8)
    assert graph.tensors["probs"].shape == (3, 10)
    assert graph.tensors["f"].shape == (3, 8)


def test_unsupported_element_types_are_named():
    model = model_bytes([helper.make_node("Relu", ["x"], ["y"], name="r")],
                        [("x", TensorProto.FLOAT16, [1, 2])], [("y", TensorProto.FLOAT16, [1, 2])])
    with pytest.raises(GraphError, match=r"^graph input 'x': element type FLOAT16 is not "
                                         r"supported$"):
        from_bytes(model)


def test_a_reshape_to_the_files_batch_follows_the_new_batch():
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="flat"),
             helper.make_node("Gemm", ["r", "w"], ["y"], name="fc", transB=1)]
    model = model_bytes(nodes, [("x", TensorProto.FLOAT, [1, 2, 3])],
                        [("y", TensorProto.FLOAT, [1, 4])],
                        [initializer("shape", np.array([1, -1], np.int64)),
                         initializer("w", rng.standard_normal((4, 6)).astype(np.float32))])
    graph = from_bytes(model, batch=5)
    assert graph.tensors["r"].shape == (5, 6) and graph.tensors["y"].shape == (5, 4)
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    np.testing.assert_allclose(execute(graph, {"x": x})["y"],
                               x.reshape(5, 6) @ graph.value("w").T, rtol=1e-5)


def test_grouped_dilated_and_padded_convs_match_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    model = general_convs(seed=3).SerializeToString()
    graph = from_bytes(model, batch=4)
    convs = {n.name: n.attrs for n in graph.nodes if n.op == "conv"}
    assert convs["depthwise"]["groups"] == 8 and convs["depthwise"]["pads"] == (0, 0, 1, 1)
    assert convs["grouped"]["dilation"] == (2, 2) and convs["wide"]["pads"] == (0, 3, 1, 0)
    x = images(4, seed=2)
    expected = ort.InferenceSession(model).run(None, {"input": x})[0]
    np.testing.assert_allclose(execute(graph, {"input": x})["logits"], expected, atol=1e-6)


def _external_model(folder: Path, entries: dict[str, str]) -> Path:
    """A one-Conv model in ``folder`` whose weight (3, 2, 3, 3) is external data ``entries``."""
    weight = initializer("w", np.zeros((3, 2, 3, 3), np.float32))
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in entries.items():
        weight.external_data.add(key=key, value=value)
    path = folder / "m.onnx"
    path.write_bytes(_single(helper.make_node("Conv", ["x", "w"], ["y"]), [weight]))
    return path


@pytest.mark.parametrize("entries, message", [
    ({"location": "w\0.bin"}, r"external data location 'w\\x00.bin' holds a NUL byte; not a "
                              r"file name$"),
    ({"location": "w.bin", "offset": str(2 ** 63)},
     r"external data file 'w.bin' is truncated \(216 bytes; 216 needed at offset "
     r"9223372036854775808\)$"),
    ({"location": "w.bin", "offset": "1"},
     r"external data file 'w.bin' is truncated \(216 bytes; 216 needed at offset 1\)$"),
    ({"location": "sub"}, r"cannot read external data 'sub' \(Is a directory\)$"),
])
def test_external_data_locations_and_offsets_are_checked_before_reading(tmp_path, entries,
                                                                          message):
    (tmp_path / "w.bin").write_bytes(np.full(54, 0.5, np.float32).tobytes())
    (tmp_path / "sub").mkdir()
    with pytest.raises(GraphError, match=r"^initializer 'w': " + message):
        load(_external_model(tmp_path, entries))


def test_external_data_in_a_fifo_is_refused_without_blocking(tmp_path):
    import threading
    os.mkfifo(tmp_path / "w.bin")
    path = _external_model(tmp_path, {"location": "w.bin"})
    outcome = []

    def import_it():
        try:
            load(path)
        except GraphError as error:
            outcome.append(str(error))

    thread = threading.Thread(target=import_it, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():       # blocked in open(): a writer lets it go
        os.close(os.open(tmp_path / "w.bin", os.O_WRONLY | os.O_NONBLOCK))
        thread.join(20)
        pytest.fail("the import blocked on a FIFO")
    assert outcome == ["initializer 'w': external data 'w.bin' is not a regular file"]


CONV = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c")
CLIP = helper.make_node("Clip", ["x", "low", "high"], ["y"], name="clip")
BATCHNORM = helper.make_node("BatchNormalization", ["x", "s", "beta", "mean", "var"], ["y"],
                             name="bn")


def _vector(name, *values):
    return initializer(name, np.array(values, np.float32))


def _scalar(name, value):
    return initializer(name, np.array(value, np.float32))


@pytest.mark.parametrize("node, inits, opset, message", [
    (CONV, [initializer("w", np.full((3, 2, 3, 3), np.nan, np.float32)), _vector("b", 0, 0, 0)],
     17, r"node 'c' \(Conv\): its constant input 'w' holds NaN values"),
    (CONV, [WEIGHT, _vector("b", 0, np.nan, 0)], 17,
     r"node 'c' \(Conv\): its constant input 'b' holds NaN values"),
    (CONV, [WEIGHT, _vector("b", 0, np.inf, 0)], 17,
     r"node 'c' \(Conv\): its constant input 'b' holds infinite values"),
    (helper.make_node("Add", ["x", "b"], ["y"], name="add"), [_vector("b", 1, -np.inf)], 17,
     r"node 'add' \(Add\): its constant input 'b' holds infinite values"),
    (CLIP, [_scalar("low", np.nan), _scalar("high", 6)], 17,
     r"node 'clip' \(Clip\): its min \('low'\) holds NaN values"),
    (CLIP, [_scalar("low", 0), _scalar("high", np.nan)], 17,
     r"node 'clip' \(Clip\): its max \('high'\) holds NaN values"),
    (CLIP, [_scalar("low", 0), _scalar("high", np.inf)], 17,
     r"node 'clip' \(Clip\): its max \('high'\) holds infinite values"),
    (helper.make_node("Clip", ["x"], ["y"], name="clip", min=float("nan"), max=6.0), [], 10,
     r"node 'clip' \(Clip\): its min attribute holds NaN values"),
    (BATCHNORM, [_vector("s", 1, 1), _vector("beta", 0, 0), _vector("mean", 0, 0),
                 _vector("var", 1, np.nan)], 17,
     r"node 'bn' \(BatchNormalization\): its constant input 'var' holds NaN values"),
    (BATCHNORM, [_vector("s", 1, 1), _vector("beta", 0, 0), _vector("mean", 0, 0),
                 _vector("var", 1, -1)], 17,
     r"node 'bn' \(BatchNormalization\): its variance \('var'\) plus epsilon is not positive "
     r"everywhere \(its square root would be NaN\)$"),
])
def test_nan_or_infinite_constants_are_refused_naming_the_tensor(node, inits, opset, message):
    """onnxruntime computes NaN (or infinities) from these; int8 cannot, so they are refused."""
    shape = (1, 2) if node.op_type == "Add" else (1, 2, 4, 4)
    with pytest.raises(GraphError, match=f"^{message}"):
        from_bytes(_single(node, inits, shape=shape, opset=opset))


def test_finite_clip_bounds_and_left_out_ones_import():
    graph = from_bytes(_single(CLIP, [_scalar("low", -1), _scalar("high", 6)]))
    assert graph.nodes[0].attrs == {"min": -1.0, "max": 6.0}
    graph = from_bytes(_single(helper.make_node("Clip", ["x", "", "high"], ["y"]),
                               [_scalar("high", 6)]))
    assert graph.nodes[0].attrs == {"min": -np.inf, "max": 6.0}


def _graph_outputs(outputs, extra_inits=()):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 2]) for name in outputs],
        list(extra_inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("outputs, message", [
    (["y", "y"], r"graph output 'y' is listed 2 times$"),
    (["y", "k"], r"graph output 'k' is a constant \(an initializer, or computed from constants "
                 r"only\); vdla compiles outputs computed from the inputs$"),
    (["y", "x"], r"graph output 'x' is a graph input; vdla compiles outputs computed from the "
                 r"inputs$"),
])
def test_graph_outputs_are_computed_and_listed_once(outputs, message):
    model = _graph_outputs(outputs, [initializer("k", np.ones((1, 2), np.float32))])
    with pytest.raises(GraphError, match=f"^model: {message}"):
        from_bytes(model.SerializeToString())


def test_ir_versions_newer_than_onnx_knows_are_refused_as_onnxruntime_does():
    model = residual_cnn()
    model.ir_version = onnx.IR_VERSION
    from_bytes(model.SerializeToString())
    model.ir_version = 99
    with pytest.raises(GraphError, match=rf"^model: IR version 99 is not one this onnx package "
                                         rf"knows \(0-{onnx.IR_VERSION}\); refused$"):
        from_bytes(model.SerializeToString())
    ort = pytest.importorskip("onnxruntime")
    with pytest.raises(Exception, match="ir_version|IR version"):
        ort.InferenceSession(model.SerializeToString())


def test_two_default_domain_opsets_are_refused():
    model = residual_cnn()
    model.opset_import.append(helper.make_opsetid("ai.onnx", 13))
    with pytest.raises(GraphError, match=r"^model: the model imports the default-domain opset 2 "
                                         r"times \(versions 17, 13\); it must name one$"):
        from_bytes(model.SerializeToString())


@pytest.mark.parametrize("node, inits, message", [
    (helper.make_node("Conv", ["x", "w"], ["y"], name="c", pads=[1, 1, 1, 1]),
     [initializer("w", np.ones((3, 2, 9, 9), np.float32))],
     r"node 'c' \(Conv\): its kernel spans 9 in height \(size 9, dilation 1\) but the padded "
     r"input has 6 \(4 \+ pads 1, 1\): the output would be empty$"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="c", dilations=[1, 1000]), [WEIGHT],
     r"node 'c' \(Conv\): its kernel spans 2001 in width \(size 3, dilation 1000\) but the "
     r"padded input has 4 \(4 \+ pads 0, 0\): the output would be empty$"),
    (helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[5, 5]), [],
     r"node 'p' \(MaxPool\): its kernel spans 5 in height \(size 5, dilation 1\) but the "
     r"padded input has 4 \(4 \+ pads 0, 0\): the output would be empty$"),
])
def test_a_kernel_larger_than_its_padded_input_is_named(node, inits, message):
    with pytest.raises(GraphError, match=f"^{message}"):
        from_bytes(_single(node, inits))


def test_a_batch_beyond_the_limit_is_refused():
    with pytest.raises(GraphError, match=r"^batch 9223372036854775808: more than vdla's limit of "
                                         r"268,435,456 \(each input would exceed the per-tensor "
                                         r"element limit\)$"):
        from_bytes(residual_cnn().SerializeToString(), batch=2 ** 63)
