"""`benchmarks/models/zoo.py`: valid, deterministic models of the architectures users bring;
where vdla stops on each, and how close it comes on those it compiles.

onnxruntime is the independent executor the zoo is checked with, and the
float reference of vdla's int8 results.
"""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime
import pytest

from benchmarks.models.zoo import CLASSIFIERS, MODELS, macs, main, random_inputs
from vdla.frontend.onnx import load
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network
from vdla.graph.placement import LAYER_OPS
from vdla.hw.config import PRESETS

# The operators each architecture is there for (its builder may use more).
OPERATORS = {
    "squeezenet": {"Conv", "Relu", "Concat", "MaxPool", "GlobalAveragePool"},
    "mobilenetv3": {"HardSwish", "HardSigmoid", "GlobalAveragePool", "Mul", "Add"},
    "unet": {"ConvTranspose", "Resize", "Concat", "MaxPool", "BatchNormalization"},
    "yolo": {"LeakyRelu", "Split", "Slice", "Concat", "Resize"},
    "shufflenetv2": {"Split", "Concat", "Reshape", "Transpose"},
    "dcgan": {"ConvTranspose", "BatchNormalization", "Relu", "Tanh"},
    "dqn": {"Conv", "Relu", "Flatten", "Gemm"},
    "kws_dscnn": {"Conv", "BatchNormalization", "AveragePool", "Softmax"},
    "ic_resnet8": {"Conv", "BatchNormalization", "Add", "AveragePool", "Softmax"},
    "vww_mobilenet": {"Conv", "BatchNormalization", "Clip", "AveragePool", "Softmax"},
    "ad_autoencoder": {"MatMul", "Add", "BatchNormalization", "Relu"},
    "torch_export": {"Squeeze", "Sub", "Div", "Unsqueeze", "Mul", "Shape", "Gather", "Concat",
                     "Reshape", "Constant", "Gemm"},
}

# Compiled, quantised and run on fsim: (slow?).
COMPILES = {"dqn": False, "kws_dscnn": False, "ic_resnet8": False, "vww_mobilenet": True,
            "squeezenet": True, "shufflenetv2": False, "torch_export": False,
            "ad_autoencoder": False, "mobilenetv3": False, "unet": False, "yolo": False,
            "dcgan": False}


@pytest.fixture(scope="module")
def models():
    return {name: build(0) for name, build in MODELS.items()}


def test_every_model_is_listed_as_compiling():
    assert set(COMPILES) == set(MODELS) == set(OPERATORS)
    assert CLASSIFIERS <= set(MODELS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_model_is_valid_and_runs_on_onnxruntime(models, name):
    model = models[name]
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == 8
    assert [(entry.domain, entry.version) for entry in model.opset_import] == [("", 17)]
    assert OPERATORS[name] <= {node.op_type for node in model.graph.node}
    (graph_input,) = model.graph.input
    assert graph_input.name == "input"
    assert graph_input.type.tensor_type.shape.dim[0].dim_param == "N"
    feeds = random_inputs(model, 2, seed=3)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    outputs = session.run(None, feeds)
    for output, declared in zip(outputs, model.graph.output):
        dims = [d.dim_value for d in declared.type.tensor_type.shape.dim][1:]
        assert output.shape == (2, *dims) and np.all(np.isfinite(output))
        assert output.std() > 1e-3   # not a constant: weights and inputs reach the output
    assert 0.2e6 < macs(model) < 15e6   # CI-sized


def test_builders_are_deterministic_and_seeded(models):
    for name, build in MODELS.items():
        assert build(0).SerializeToString() == models[name].SerializeToString(), name
        assert build(1).SerializeToString() != models[name].SerializeToString(), name


def test_random_inputs_are_seeded_and_differ_after_a_global_pool(models):
    first = random_inputs(models["ic_resnet8"], 4, seed=5)["input"]
    assert first.shape == (4, 3, 32, 32) and first.dtype == np.float32
    np.testing.assert_array_equal(first, random_inputs(models["ic_resnet8"], 4, seed=5)["input"])
    pooled = first.mean(axis=(2, 3))
    assert np.ptp(pooled, axis=0).min() > 0.05
    assert random_inputs(models["ad_autoencoder"], 3, seed=0)["input"].shape == (3, 640)


def test_the_published_architectures_keep_their_shapes(models):
    """Sizes the papers and MLPerf Tiny give, read from the weights and onnxruntime."""
    def weights(name):
        return {init.name: tuple(init.dims) for init in models[name].graph.initializer}

    dqn = weights("dqn")
    assert [dqn[f"conv{i}.weight"] for i in (1, 2, 3)] == [(32, 4, 8, 8), (64, 32, 4, 4),
                                                           (64, 64, 3, 3)]
    assert dqn["fc1.weight"] == (512, 3136) and dqn["fc2.weight"] == (18, 512)
    # 20x20x32x(4x8x8) + 9x9x64x(32x4x4) + 7x7x64x(64x3x3) + 3136x512 + 512x18
    assert macs(models["dqn"]) == 9_352_192
    kws = weights("kws_dscnn")
    assert kws["conv_1.weight"] == (64, 1, 10, 4)
    assert [kws[f"dw_{i}.weight"] for i in range(1, 5)] == [(64, 1, 3, 3)] * 4
    assert [kws[f"pw_{i}.weight"] for i in range(1, 5)] == [(64, 64, 1, 1)] * 4
    assert kws["dense.weight"] == (12, 64)
    resnet = weights("ic_resnet8")
    assert {shape[0] for key, shape in resnet.items() if key.endswith(".weight")
            and len(shape) == 4} == {16, 32, 64}
    assert sum(len(s) == 4 for k, s in resnet.items() if k.endswith(".weight")) == 9
    vww = weights("vww_mobilenet")
    assert vww["conv_pw_13.weight"] == (256, 256, 1, 1) and vww["dense.weight"] == (2, 256)
    autoencoder = [shape for key, shape in weights("ad_autoencoder").items()
                   if key.endswith("/kernel")]
    assert autoencoder == [(640, 128), (128, 128), (128, 128), (128, 128), (128, 8),
                           (8, 128), (128, 128), (128, 128), (128, 128), (128, 640)]
    shapes = {name: [[d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim]
                     for v in (*models[name].graph.input, *models[name].graph.output)]
              for name in ("kws_dscnn", "ic_resnet8", "vww_mobilenet", "dcgan", "yolo")}
    assert shapes == {
        "kws_dscnn": [["N", 1, 49, 10], ["N", 12]],
        "ic_resnet8": [["N", 3, 32, 32], ["N", 10]],
        "vww_mobilenet": [["N", 3, 96, 96], ["N", 2]],
        "dcgan": [["N", 100, 1, 1], ["N", 3, 64, 64]],
        "yolo": [["N", 3, 32, 32], ["N", 24, 8, 8], ["N", 24, 4, 4]],
    }


def test_the_script_writes_every_model_or_names_an_unknown_one(tmp_path, capsys, models):
    assert main(["-o", str(tmp_path), "--only", "dqn,dcgan"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dcgan.onnx", "dqn.onnx"]
    assert (tmp_path / "dqn.onnx").read_bytes() == models["dqn"].SerializeToString()
    with pytest.raises(SystemExit) as stopped:
        main(["-o", str(tmp_path), "--only", "resnet"])
    assert stopped.value.code == 2
    assert "unknown model 'resnet'" in capsys.readouterr().err


def _compile(model, tmp_path, batch: int):
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return compile_network(load(path, batch=batch), PRESETS["default"],
                           random_inputs(model, 8, seed=1))


def _cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[pytest.mark.slow] if slow else []) for name, slow in COMPILES.items()])
def test_compiled_models_on_fsim_are_bit_exact_and_close_to_onnxruntime(models, name, tmp_path):
    model = models[name]
    network = _compile(model, tmp_path, batch=4)
    feeds = random_inputs(model, 4, seed=2)
    result = network.run(feeds, sim="fsim", keep=True)
    reference = execute(network.graph, feeds, keep=True)
    # A softmax output is compared through its logits too: a saturated softmax is near
    # one-hot, its cosine near 1 whatever the logits.
    producers = {out: node for node in model.graph.node for out in node.output}
    logits = {value.name: producers[value.name].input[0] for value in model.graph.output
              if producers[value.name].op_type == "Softmax"}
    extended = onnx.ModelProto()
    extended.CopyFrom(model)
    extended.graph.output.extend(onnx.helper.make_tensor_value_info(
        name, onnx.TensorProto.FLOAT, None) for name in logits.values())
    session = onnxruntime.InferenceSession(extended.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    places = collections.Counter(network.placement.values())
    layers = [node for node in network.graph.nodes if node.op in LAYER_OPS]
    assert len(layers) >= 4 and places["accel"] == len(layers) and places["cpu"] == 0
    for tensor, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[tensor], err_msg=tensor)
    for output in network.graph.outputs:
        got = result.outputs[output]
        # int8 with power-of-two scales: 0.997-0.9995 measured (benchmarks/results/models_status.json)
        assert _cosine(got, expected[output]) >= 0.99
        if output in logits:
            softmax = network.graph.producer(output)
            assert softmax.op == "softmax"
            assert _cosine(result.tensors[softmax.inputs[0]], expected[logits[output]]) >= 0.99
        if name in CLASSIFIERS:
            assert (got.argmax(axis=1) == expected[output].argmax(axis=1)).mean() >= 0.75
