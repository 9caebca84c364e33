"""Patterns torch's ONNX exporter writes that shape inference alone leaves unsized.

``torch.chunk`` exports a Slice whose ends come from ``Shape -> Gather -> Add
-> Div -> Mul`` (onnx's data propagation stops at Div), and the channel
shuffle a Reshape whose shape is a ``Constant`` node holding the export's
batch. The graphs here are built by hand in that form (ShuffleNetV2's unit,
small) and run against onnxruntime; the real export is checked where torch is
installed.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vdla.frontend.onnx import from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.kernels import execute

CHANNELS, SIDE = 8, 4


def _constant(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.asarray(value, np.int64), name))


def _shuffle_unit(batch: int, opset: int = 17) -> bytes:
    """x -> chunk(2, dim=1) as torch exports it -> (half, relu(conv(other half))) -> concat ->
    channel shuffle through Constant-shaped Reshapes (batch ``batch`` baked in)."""
    half = CHANNELS // 2
    weight = np.random.default_rng(0).normal(size=(half, half, 1, 1)).astype(np.float32)
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        _constant("axis", [1]),
        helper.make_node("Gather", ["shape", "axis"], ["channels"], axis=0),
        _constant("zero", [0]),
        _constant("one", [1]),
        helper.make_node("Add", ["channels", "one"], ["rounded"]),
        _constant("two", [2]),
        helper.make_node("Div", ["rounded", "two"], ["size"]),
        helper.make_node("Mul", ["size", "one"], ["end0"]),
        helper.make_node("Slice", ["x", "zero", "end0", "axis"], ["first"]),
        helper.make_node("Mul", ["size", "two"], ["end1"]),
        helper.make_node("Slice", ["x", "end0", "end1", "axis"], ["second"]),
        helper.make_node("Conv", ["second", "w"], ["conv"]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("Concat", ["first", "relu"], ["joined"], axis=1),
        _constant("split_shape", [batch, 2, half, SIDE, SIDE]),
        helper.make_node("Reshape", ["joined", "split_shape"], ["split"]),
        helper.make_node("Transpose", ["split"], ["swapped"], perm=[0, 2, 1, 3, 4]),
        _constant("flat_shape", [batch, -1, SIDE, SIDE]),
        helper.make_node("Reshape", ["swapped", "flat_shape"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "shuffle_unit",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, CHANNELS, SIDE, SIDE])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, CHANNELS, SIDE, SIDE])],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _onnxruntime(data: bytes, x: np.ndarray) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _inputs(batch: int) -> np.ndarray:
    return np.random.default_rng(1).normal(size=(batch, CHANNELS, SIDE, SIDE)).astype(np.float32)


def test_chunk_slices_fold_their_computed_ends():
    data = _shuffle_unit(1)
    graph = from_bytes(data)
    assert graph.tensors["first"].shape == (1, CHANNELS // 2, SIDE, SIDE)
    assert graph.tensors["second"].shape == (1, CHANNELS // 2, SIDE, SIDE)
    # The shape arithmetic is folded: no node of the IR computes it.
    assert not {"shape", "size", "end0", "end1"} & {o for n in graph.nodes for o in n.outputs}
    x = _inputs(1)
    (y,) = execute(graph, {"x": x}).values()
    np.testing.assert_allclose(y, _onnxruntime(data, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("exported, imported", [(1, 3), (2, 1)])
def test_constant_node_reshapes_are_rebatched(exported, imported):
    data = _shuffle_unit(exported)
    graph = from_bytes(data, batch=imported)
    assert graph.tensors["y"].shape == (imported, CHANNELS, SIDE, SIDE)
    x = _inputs(imported)
    # The reference: the same unit exported at the batch it is imported at.
    expected = _onnxruntime(_shuffle_unit(imported), x)
    (y,) = execute(graph, {"x": x}).values()
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_a_size_folding_cannot_find_is_still_refused():
    # A size no constant decides (a symbolic axis that is not the batch): inference runs
    # again on the folded values, still finds none, and the tensor is refused in one line.
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "symbolic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(GraphError, match=r"^graph input 'x': shape \[1, None\] is not static "
                                         r"\(vdla needs every size known; pass the batch\)$"):
        from_bytes(model.SerializeToString())


@pytest.mark.slow
def test_shufflenet_v2_export_imports_at_another_batch():
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    from vdla.frontend.torch import export
    torch.manual_seed(0)
    module = torchvision.models.shufflenet_v2_x0_5(weights=None).eval()
    data = export(module, torch.zeros(1, 3, 32, 32))
    x = np.random.default_rng(2).normal(size=(2, 3, 32, 32)).astype(np.float32)
    graph = from_bytes(data, batch=2)
    assert graph.tensors[graph.outputs[0]].shape == (2, 1000)
    (y,) = execute(graph, {graph.inputs[0]: x}).values()
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(y, expected, rtol=1e-3, atol=1e-4)
