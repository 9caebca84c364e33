"""`benchmarks/models_status.py`: the light graphs' seeded weights, and each model's record."""

from __future__ import annotations

import json
import os
import re
import time

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

from benchmarks import models_status
from benchmarks.models_status import _bounded, light_models, model_status, seeded_weights
from benchmarks.models.zoo import _Net

OPTIONS = {"samples": 2, "seed": 0, "config": "default", "max_gmacs": 5.0}


@pytest.fixture(scope="module")
def squeezenet():
    return onnx.load(light_models()["squeezenet"])


def test_the_nine_light_graphs_are_found():
    assert sorted(light_models()) == [
        "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
        "shufflenet", "squeezenet", "vgg19", "zfnet512"]


def test_seeded_weights_replace_every_constant_of_shape_reproducibly(squeezenet):
    seeded = seeded_weights(squeezenet, seed=0)
    assert "ConstantOfShape" in {node.op_type for node in squeezenet.graph.node}
    assert "ConstantOfShape" not in {node.op_type for node in seeded.graph.node}
    assert seeded.SerializeToString() == seeded_weights(squeezenet, seed=0).SerializeToString()
    assert seeded.SerializeToString() != seeded_weights(squeezenet, seed=1).SerializeToString()
    weights = {init.name: numpy_helper.to_array(init) for init in seeded.graph.initializer}
    conv = weights["conv1_w_0"]   # 64 x 3 x 3 x 3: He-normal, std sqrt(2 / 27)
    assert conv.shape == (64, 3, 3, 3)
    assert abs(conv.std() / np.sqrt(2 / 27) - 1) < 0.15
    rng = np.random.default_rng(0)
    images = rng.standard_normal((2, 1, 3, 224, 224)).astype(np.float32)
    session = onnxruntime.InferenceSession(seeded.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    first, second = (session.run(None, {"data_0": image})[0] for image in images)
    assert first.shape == (1, 1000, 1, 1) and not np.allclose(first, second, atol=1e-6)


def test_seeded_folded_batchnorms_are_scales_and_shifts():
    densenet = seeded_weights(onnx.load(light_models()["densenet121"]), seed=0)
    weights = {init.name: numpy_helper.to_array(init) for init in densenet.graph.initializer}
    # ConstantOfShapes that reach a Mul and an Add through Unsqueezes (the first two
    # blocks' are real initialisers, kept).
    scale, shift = weights["conv2_2/x1/bn_w_0"], weights["conv2_2/x1/bn_b_0"]
    assert 0.75 <= scale.min() and scale.max() <= 1.25 and np.ptp(scale) > 0.1
    assert abs(shift.mean()) < 0.1 and shift.min() < 0 < shift.max()
    variances = [name for node in densenet.graph.node if node.op_type == "BatchNormalization"
                 for name in node.input[4:5] if not name.startswith(("conv1/", "conv2_1/"))]
    assert len(variances) > 100 and all(0.5 <= weights[n].min() for n in variances)


def _tiny(seed: int = 0):
    net = _Net("tiny", seed, {"input": (1, 3, 8, 8)})
    x = net.node("Relu", [net.conv("input", "conv", 8, 3)], "relu")
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "pool")], "flatten", axis=1)
    return net.model([net.gemm(x, "fc", 4)])


def _unsupported(seed: int = 0):
    """A model vdla refuses at import: an operator it has no converter for."""
    net = _Net("unsupported", seed, {"input": (1, 3, 8, 8)})
    x = net.node("Einsum", [net.conv("input", "conv", 8, 3)], "einsum", equation="nchw->nchw")
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "pool")], "flatten", axis=1)
    return net.model([net.gemm(x, "fc", 4)])


def test_a_refused_model_records_the_stage_and_vdlas_line():
    record = model_status("unsupported", "test", _unsupported(), True, OPTIONS)
    assert (record["compiles"], record["stage"]) == (False, "import")
    assert record["refusal"].startswith("node 'einsum' (Einsum): operator Einsum is not "
                                        "supported")
    assert "crash" not in record


def test_a_model_over_the_budget_is_compiled_but_not_run():
    model = _tiny()
    record = model_status("tiny", "test", model, True, {**OPTIONS, "max_gmacs": 1e-9})
    assert record["compiles"] is True and record["refusal"] is None
    assert record["accel_mac_share"] == 1.0 and record["batch"] == 1
    assert record["run"].startswith("not run: 0.00 G MACs per sample, over --max-gmacs")
    assert "fsim" not in record


def _sleeps():
    time.sleep(30)


def test_a_model_past_its_time_is_stopped_and_says_where():
    began = time.monotonic()
    record = _bounded(("slow", "test", _sleeps, False, OPTIONS, None), timeout=1)
    assert time.monotonic() - began < 10
    assert record["timeout"] == "stopped after 1 s during start"
    assert record["compiles"] is None


def _compiled(monkeypatch) -> list:
    """The networks `model_status` compiles, and the keywords it compiles them with."""
    import vdla.graph.network
    compiled, real = [], vdla.graph.network.compile_network

    def spy(*args, **kwargs):
        network = real(*args, **kwargs)
        compiled.append((network, kwargs))
        return network
    monkeypatch.setattr(vdla.graph.network, "compile_network", spy)
    return compiled


@pytest.mark.parametrize("per_channel, method", [(True, "entropy"), (False, "minmax")])
def test_the_quantisation_options_reach_the_compiler_and_the_record(monkeypatch, per_channel,
                                                                    method):
    compiled = _compiled(monkeypatch)
    record = model_status("tiny", "test", _tiny(), True,
                          {**OPTIONS, "max_gmacs": 1e-9, "per_channel": per_channel,
                           "calibration_method": method})
    [(network, kwargs)] = compiled
    assert kwargs == {"per_channel": per_channel, "calibration_method": method}
    assert (record["per_channel"], record["calibration_method"]) == (per_channel, method)
    # both layers on the accelerator, where the cost model estimates each
    estimates = network.metadata["estimated_cycles"]
    assert set(estimates) == {"conv", "fc"}
    assert record["estimated_cycles"] == estimates["conv"] + estimates["fc"] > 0
    assert record["placement"] == {"accel": 2, "cpu": 0, "host": len(network.placement) - 2}


def test_without_quantisation_options_a_model_compiles_as_vdla_compile_does(monkeypatch):
    compiled = _compiled(monkeypatch)
    record = model_status("tiny", "test", _tiny(), True, {**OPTIONS, "max_gmacs": 1e-9})
    assert compiled[0][1] == {"per_channel": False, "calibration_method": "mse"}
    assert (record["per_channel"], record["calibration_method"]) == (False, "mse")


@pytest.mark.slow   # the samples run on fsim and the cpu target's C
def test_a_model_at_a_fixed_batch_is_imported_as_at_batch_gives_it():
    """``at_batch``: the model exported again at the batch the samples run in."""
    asked, stages, batched = [], [], []

    def at_batch(batch):
        asked.append(batch)
        net = _Net("tiny", 0, {"input": (batch, 3, 8, 8)})
        x = net.node("Relu", [net.conv("input", "conv", 8, 3)], "relu")
        x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "pool")], "flatten", axis=1)
        return net.model([net.gemm(x, "fc", 4)])
    record = model_status("tiny", "test", _tiny(), True, {**OPTIONS, "max_gmacs": 1e-9},
                          stages.append, at_batch=at_batch)
    assert asked == [] and record["batch"] == 1 and stages == ["import", "compile"]
    record = model_status("tiny", "test", _tiny(), True, OPTIONS, batched.append,
                          at_batch=at_batch)
    assert asked == [2] and record["batch"] == 2
    assert batched[:3] == ["export", "import", "compile"]
    assert record["fsim"]["cosine"] > 0.99 and record["fsim_equals_cpu"] is True


def _staged(job, progress):
    progress("compile")
    if job[2] == "slow":
        time.sleep(30)
    return {"model": job[0], "source": job[1], "compiles": True, "pid": os.getpid()}


def test_the_runner_runs_any_task_in_a_process_of_its_own():
    record = _bounded(("quick", "test", "quick"), timeout=30, task=_staged)
    assert record["model"] == "quick" and record["pid"] != os.getpid()
    began = time.monotonic()
    record = _bounded(("slow", "test", "slow"), timeout=1, task=_staged)
    assert time.monotonic() - began < 10
    assert record == {"model": "slow", "source": "test", "compiles": None, "stage": "compile",
                      "refusal": None, "timeout": "stopped after 1 s during compile"}


def test_the_command_line_takes_the_quantisation_options(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(models_status.zoo, "MODELS", {"tiny": _tiny})
    output = tmp_path / "status.json"
    assert models_status.main(["--no-light", "--samples", "2", "--max-gmacs", "1e-9",
                               "--per-channel", "--calibration-method", "percentile",
                               "--output", str(output)]) == 0
    report = json.loads(output.read_text())
    assert (report["per_channel"], report["calibration_method"]) == (True, "percentile")
    [record] = report["models"]
    assert (record["model"], record["compiles"]) == ("tiny", True)
    assert (record["per_channel"], record["calibration_method"]) == (True, "percentile")
    assert re.search(r"^tiny .* compiles .*; [\d,]+ cycles \(estimated, batch 1\)$",
                     capsys.readouterr().out, re.M)


def test_an_unknown_calibration_method_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stopped:
        models_status.main(["--calibration-method", "kl"])
    assert stopped.value.code == 2
    assert re.search(r"argument --calibration-method: invalid choice: 'kl' \(choose from "
                     r"'?mse'?, '?minmax'?, '?percentile'?, '?entropy'?\)",
                     capsys.readouterr().err)
