"""`bench.onnx_network`: blocks of timed calls, onnxruntime sessions, output comparison."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vdla.bench import onnx_network

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models"


def test_a_block_calls_warmup_plus_calls_times_and_keeps_the_last_result():
    count = []
    timing, result = onnx_network.time_block("count", lambda: count.append(1) or len(count),
                                             warmup=2, calls=5, threads=3)
    assert len(count) == 7 and result == 7
    assert timing.calls == 5 and timing.settings == {"threads": 3}
    assert 0 <= timing.p10_ms <= timing.median_ms <= timing.p90_ms


def test_a_block_needs_calls():
    with pytest.raises(ValueError, match=r"^a timed block needs at least one warm-up call and "
                                         r"one timed call \(got 1 and 0\)$"):
        onnx_network.time_block("none", lambda: None, warmup=1, calls=0)


@pytest.mark.parametrize("spinning", [False, True])
def test_time_model_runs_the_model(spinning):
    data = np.load(MODELS / "digits_data.npz")
    timing, logits = onnx_network.time_model("ort fp32", MODELS / "digits.onnx",
                                             {"input": data["images"][:3]}, threads=1,
                                             spinning=spinning, warmup=1, calls=2)
    np.testing.assert_allclose(logits, data["float_logits"][:3], atol=1e-4)
    assert timing.settings == {"threads": 1, "spinning": spinning}
    assert onnx_network.format_timings([timing])[1].split()[:4] == [
        "ort", "fp32", "1", "yes" if spinning else "no"]


def test_compare_outputs():
    a = np.array([[1.0, 2.0, 3.0], [3.0, 0.0, 0.0]])
    assert onnx_network.compare_outputs(a, a) == {"cosine": pytest.approx(1.0),
                                                  "top1_agreement": 1.0}
    flipped = np.array([[1.0, 2.0, 3.0], [-3.0, 0.0, 0.0]])
    assert onnx_network.compare_outputs(flipped, a) == {"cosine": pytest.approx(0.0),
                                                        "top1_agreement": 0.5}


def test_peer_models_writes_one_qdq_model_per_scheme(tmp_path):
    data = np.load(MODELS / "digits_data.npz")
    models = onnx_network.peer_models(MODELS / "digits.onnx", data["calibration"], tmp_path,
                                      ("int8-pow2",))
    assert models == {"ort fp32": MODELS / "digits.onnx",
                      "ort int8-pow2": tmp_path / "digits.int8-pow2.onnx"}
    assert models["ort int8-pow2"].exists()


def test_run_all_feeds_the_models_batch_size(tmp_path):
    import onnx
    data = np.load(MODELS / "digits_data.npz")
    fixed = onnx.load(MODELS / "digits.onnx")
    fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 4
    onnx.save(fixed, tmp_path / "batch4.onnx")
    logits = onnx_network.run_all(tmp_path / "batch4.onnx", data["images"][:8])
    np.testing.assert_allclose(logits, data["float_logits"][:8], atol=1e-4)
    with pytest.raises(ValueError, match=r"^6 inputs do not fill batches of 4 "
                                         r"\(the model's batch size\)$"):
        onnx_network.run_all(tmp_path / "batch4.onnx", data["images"][:6])
