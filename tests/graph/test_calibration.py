"""Calibration methods (`graph.calibration`) against onnxruntime's own calculators.

onnxruntime.quantization.calibrate's HistogramCollector is the reference:
fed the same values in one batch, its Percentile (symmetric) and Entropy
thresholds are vdla's exactly (the same histogram); over several batches it
grows its histogram as they come, vdla builds it once over the whole range,
and the two agree within ``BINS_APART`` of its bins (Percentile) or on the
power-of-two exponent chosen (Entropy, whose KL curve is flat enough near its
minimum that the bins move it).
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.graph.calibration import ENTROPY_BINS, PERCENTILE, PERCENTILE_BINS, QUANTIZED_BINS
from vdla.graph.errors import GraphError

calibrate = pytest.importorskip("onnxruntime.quantization.calibrate")

BINS_APART = 4


def _arrays(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"normal": rng.standard_normal((2, 8, 8, 8)).astype(np.float32),
            "relu": np.maximum(rng.standard_normal((2, 8, 8, 8)), 0).astype(np.float32),
            "heavy": (rng.standard_t(3, (2, 1024)) * 0.5 + 0.2).astype(np.float32)}


def _ours(method: str, batches: list[dict[str, np.ndarray]]) -> dict[str, float]:
    from vdla.graph.calibration import thresholds
    ranges = {}
    for name in batches[0]:
        values = np.concatenate([batch[name].reshape(-1) for batch in batches]).astype(
            np.float64)
        ranges[name] = (values.min(), values.max(), np.abs(values).min(),
                        np.abs(values).max())

    def observe(record):
        for batch in batches:
            for name, array in batch.items():
                record(name, array)
    return thresholds(method, list(ranges), observe, ranges)


def _theirs(method: str, batches: list[dict[str, np.ndarray]]) -> dict[str, float]:
    import contextlib
    import io
    collector = calibrate.HistogramCollector(
        method=method, symmetric=True,
        num_bins=PERCENTILE_BINS if method == "percentile" else ENTROPY_BINS,
        num_quantized_bins=QUANTIZED_BINS, percentile=PERCENTILE, scenario="same")
    with contextlib.redirect_stdout(io.StringIO()):   # it prints its progress
        for batch in batches:
            collector.collect({name: [array] for name, array in batch.items()})
        result = collector.compute_collection_result()
    return {name: float(max(abs(float(values[0])), abs(float(values[1]))))
            for name, values in result.items()}


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_one_batch_gives_onnxruntimes_thresholds(method):
    batch = _arrays(0)
    ours, theirs = _ours(method, [batch]), _theirs(method, [batch])
    for name in batch:
        assert ours[name] == pytest.approx(theirs[name], rel=1e-6), (name, ours, theirs)
    # Not the largest magnitude: each method clips the heavy tail.
    assert ours["heavy"] < np.abs(batch["heavy"]).max()


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_several_batches_agree_within_a_few_bins(method):
    batches = [_arrays(seed) for seed in range(3)]
    ours, theirs = _ours(method, batches), _theirs(method, batches)
    from vdla.graph.quantize import exponent_for
    for name in batches[0]:
        largest = max(np.abs(batch[name]).max() for batch in batches)
        if method == "percentile":
            assert abs(ours[name] - theirs[name]) <= BINS_APART * largest / PERCENTILE_BINS, (
                name, ours, theirs)
        else:   # a flat KL curve's minimum moves with the bins: the same scale is chosen
            assert exponent_for(ours[name]) == exponent_for(theirs[name]), (name, ours, theirs)


def test_minmax_is_the_largest_magnitude():
    batches = [_arrays(seed) for seed in range(2)]
    ours = _ours("minmax", batches)
    for name in batches[0]:
        assert ours[name] == max(float(np.abs(b[name]).max()) for b in batches)


def test_methods_through_calibrate_and_their_exponents():
    """`graph.quantize.calibrate` with each method: every tensor's exponent is the finest
    that holds onnxruntime's threshold for its values."""
    from tests.graph.models import images, residual_cnn
    from vdla.frontend.onnx import from_bytes
    from vdla.graph.kernels import execute
    from vdla.graph.passes import PIPELINE, run_passes
    from vdla.graph.quantize import calibrate as vdla_calibrate
    from vdla.graph.quantize import exponent_for
    graph = run_passes(from_bytes(residual_cnn().SerializeToString(), batch=8), PIPELINE)
    samples = {graph.inputs[0]: images(8)}
    seen = {}
    execute(graph, {graph.inputs[0]: samples[graph.inputs[0]]},
            hook=lambda node, outputs: seen.update(zip(node.outputs, outputs)))
    for method in ("percentile", "entropy"):
        exponents = vdla_calibrate(graph, samples, method)
        # onnxruntime's entropy search is slow: a few tensors (the input, a conv, the last).
        names = sorted(set(seen) & set(exponents))[:3]
        theirs = _theirs(method, [{name: seen[name] for name in names}])
        for name, threshold in theirs.items():
            assert exponents[name] == exponent_for(threshold), (method, name)
    mse = vdla_calibrate(graph, samples)
    minmax = vdla_calibrate(graph, samples, "minmax")
    assert all(mse[name] >= minmax[name] for name in mse)   # mse only ever refines


def test_an_unknown_method_is_refused():
    from vdla.graph.calibration import check_method
    with pytest.raises(GraphError, match=r"^calibration method 'kl' is not one vdla knows "
                                         r"\(mse, minmax, percentile, entropy\)$"):
        check_method("kl")
