"""`benchmarks/models/transformers.py`: the BERT-like encoder and DeiT builders are valid,
seeded ONNX as torch.onnx.export writes them, and their mini variants compile, run bit-exact
on fsim and come close to onnxruntime's float results.

onnxruntime is the independent executor the models are checked with, and the float
reference of vdla's int8 results.
"""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime
import pytest

from benchmarks.models.transformers import MODELS, main, random_inputs
from vdla.frontend.onnx import from_bytes
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network
from vdla.graph.placement import LAYER_OPS
from vdla.hw.config import PRESETS

MINI = ("bert_mini", "deit_mini")
# What an export of each writes (the decomposed LayerNorm, the Erf GELU, the head split).
OPERATORS = {"ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Erf", "MatMul", "Softmax",
             "Transpose", "Reshape", "Shape", "Gather", "Unsqueeze", "Concat"}


def _cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _session(model):
    return onnxruntime.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def models():
    return {name: MODELS[name](0) for name in MINI}


@pytest.mark.parametrize("name", MINI)
def test_the_mini_models_are_valid_seeded_exports(models, name):
    model = models[name]
    onnx.checker.check_model(model, full_check=True)
    assert [(entry.domain, entry.version) for entry in model.opset_import] == [("", 14)]
    assert OPERATORS <= {node.op_type for node in model.graph.node}
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert MODELS[name](0).SerializeToString() == model.SerializeToString()
    assert MODELS[name](1).SerializeToString() != model.SerializeToString()
    feeds = random_inputs(model, 2, seed=3)
    for output in _session(model).run(None, feeds):
        assert output.shape[0] == 2 and np.all(np.isfinite(output)) and output.std() > 1e-2


def test_the_full_models_have_the_issues_sizes():
    """BERT-like: 2 layers, hidden 128, 2 heads, sequence 128; DeiT-tiny: 192 dims, 12
    blocks, 3 heads, 197 tokens (224 px in 16 px patches)."""
    bert, deit = MODELS["bert"](0), MODELS["deit_tiny"](0)
    dims = [d.dim_value for d in bert.graph.input[0].type.tensor_type.shape.dim[1:]]
    assert dims == [128, 128]
    assert sum(node.op_type == "Softmax" for node in bert.graph.node) == 2
    weights = {init.name: init.dims for init in bert.graph.initializer}
    assert weights[next(n for n in weights if "layer.0/intermediate.dense.weight" in n)] == [
        128, 512]
    assert sum(node.op_type == "Softmax" for node in deit.graph.node) == 12
    pos = next(init for init in deit.graph.initializer if "pos_embed" in init.name)
    assert list(pos.dims) == [1, 197, 192]
    qkv = next(init for init in deit.graph.initializer if "blocks.0/attn/qkv.weight" in init.name)
    assert list(qkv.dims) == [192, 576]


@pytest.mark.parametrize("name", MINI)
def test_mini_models_compile_run_bit_exact_on_fsim_and_close_to_onnxruntime(models, name):
    model = models[name]
    graph = from_bytes(model.SerializeToString(), batch=1)
    network = compile_network(graph, PRESETS["default"], random_inputs(model, 4, seed=1))
    ops = collections.Counter(node.op for node in network.graph.nodes)
    # The fusions took the decompositions: one table per GELU, one node per layer norm; the
    # attention products became accelerator layers (`graph.ops.matmul.lower_to_layers`).
    assert ops["qlayernorm"] == 5 and ops["gelu"] == 2 and ops["qmatmul"] == 0
    assert not {"pow", "sqrt", "erf", "qdiv"} & set(ops)
    layers = [node for node in network.graph.nodes if node.op in LAYER_OPS]
    places = collections.Counter(network.placement.values())
    assert places["accel"] == len(layers) >= 9 and places["cpu"] == 0
    feeds = random_inputs(model, 1, seed=2)
    result = network.run(feeds, sim="fsim", keep=True)
    reference = execute(network.graph, feeds, keep=True)
    for tensor, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[tensor], err_msg=tensor)
    session = _session(model)
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    for output in network.graph.outputs:
        # int8 with power-of-two scales: 0.9986-0.9995 measured on the mini models.
        assert _cosine(result.outputs[output], expected[output]) >= 0.99, output


@pytest.mark.slow
@pytest.mark.parametrize("name", MINI)
def test_mini_models_on_the_cpu_target_are_close_to_onnxruntime(models, name):
    model = models[name]
    graph = from_bytes(model.SerializeToString(), batch=1)
    network = compile_network(graph, PRESETS["default"], random_inputs(model, 4, seed=1),
                              target="cpu")
    places = collections.Counter(network.placement.values())
    layers = [node for node in network.graph.nodes if node.op in LAYER_OPS]
    assert places["cpu"] == len(layers) >= 9 and places["accel"] == 0
    feeds = random_inputs(model, 1, seed=2)
    result = network.run(feeds, sim="fsim", keep=True)
    reference = execute(network.graph, feeds, keep=True)
    for output in network.graph.outputs:
        np.testing.assert_array_equal(result.outputs[output], reference[output])
    expected = dict(zip([o.name for o in _session(model).get_outputs()],
                        _session(model).run(None, feeds)))
    for output in network.graph.outputs:
        assert _cosine(result.outputs[output], expected[output]) >= 0.99, output


def test_main_writes_the_models_and_refuses_an_unknown_name(tmp_path, capsys):
    assert main(["-o", str(tmp_path), "--only", "bert_mini"]) == 0
    assert (tmp_path / "bert_mini.onnx").read_bytes() == MODELS["bert_mini"](0).SerializeToString()
    with pytest.raises(SystemExit) as stopped:
        main(["-o", str(tmp_path), "--only", "gpt"])
    assert stopped.value.code == 2
    assert "unknown model 'gpt'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("opset, approximate", [(14, "none"), (17, "tanh")])
def test_a_torch_export_of_an_encoder_imports_as_it_is(opset, approximate):
    """torch.onnx.export's own graph (decomposed LayerNorm and Erf GELU at opset 14,
    LayerNormalization and the tanh GELU at 17): fused, compiled and close to onnxruntime."""
    torch = pytest.importorskip("torch")
    import io
    import math

    class Block(torch.nn.Module):
        def __init__(self, dims=32, heads=2):
            super().__init__()
            self.heads = heads
            self.qkv = torch.nn.ModuleList(torch.nn.Linear(dims, dims) for _ in range(3))
            self.out, self.up = torch.nn.Linear(dims, dims), torch.nn.Linear(dims, 2 * dims)
            self.down = torch.nn.Linear(2 * dims, dims)
            self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(dims) for _ in range(2))
            self.act = torch.nn.GELU(approximate=approximate)

        def forward(self, x):
            n, s, d = x.shape
            q, k, v = (layer(x).view(n, s, self.heads, d // self.heads).transpose(1, 2)
                       for layer in self.qkv)
            scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
            context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(n, s, d)
            x = self.norms[0](x + self.out(context))
            return self.norms[1](x + self.down(self.act(self.up(x))))

    torch.manual_seed(0)
    buffer = io.BytesIO()
    torch.onnx.export(Block().eval(), (torch.randn(1, 16, 32),), buffer, opset_version=opset,
                      dynamo=False, input_names=["input"], output_names=["y"])
    data = buffer.getvalue()
    rng = np.random.default_rng(0)
    network = compile_network(from_bytes(data, batch=1), PRESETS["default"],
                              {"input": rng.standard_normal((4, 16, 32)).astype(np.float32)})
    ops = collections.Counter(node.op for node in network.graph.nodes)
    assert ops["qlayernorm"] == 2 and ops["gelu"] == 1 and ops["qmatmul"] == 0
    feeds = {"input": rng.standard_normal((1, 16, 32)).astype(np.float32)}
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]
    assert _cosine(network.run(feeds, sim="fsim").outputs["y"], want) >= 0.99
