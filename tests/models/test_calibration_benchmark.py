"""`benchmarks/calibration.py`: the calibration methods' table."""

from __future__ import annotations

import pytest

from benchmarks import calibration


def test_the_table_has_a_row_per_method_and_a_column_per_network_and_scales():
    row = {"per-tensor": {"accuracy": 0.99166, "cosine_min": 0.95},
           "per-channel": {"accuracy": 0.5, "cosine_min": 0.912345}}
    results = {"digits": {"mse": row, "entropy": row}, "mobilenet": {"entropy": row}}
    assert calibration.table(results).splitlines() == [
        "| method | digits top-1, per-tensor | digits top-1, per-channel | "
        "MobileNetV2 cosine, per-tensor | MobileNetV2 cosine, per-channel |",
        "|---|--:|--:|--:|--:|",
        "| mse | 99.17 % | 50.00 % | – | – |",
        "| entropy | 99.17 % | 50.00 % | 0.9500 | 0.9123 |"]


@pytest.mark.slow   # four compiles of a MobileNetV2
def test_the_small_mobilenet_compiles_with_each_scales_close_to_float():
    """A method with per-tensor and per-channel weight scales: the int8 logits of each of
    the samples against onnxruntime fp32's."""
    figures = calibration.large_figures("mobilenet", ("minmax",), small=True,
                                        calibration_images=2, samples=2)
    assert (figures["config"], figures["input"]) == ("tiny", [1, 3, 32, 32])
    rows = figures["minmax"]
    assert set(rows) == {"per-tensor", "per-channel"}
    for row in rows.values():
        assert len(row["cosine_vs_float"]) == 2 and row["cosine_min"] == min(row["cosine_vs_float"])
        assert row["cosine_min"] > 0.9 and row["estimated_cycles"] > 0


@pytest.mark.parametrize("argv, message", [
    (["--methods", "mse,kl"], "Error: --methods: 'kl' is not one of mse, minmax, percentile, "
                              "entropy"),
    (["--only", "vgg"], "Error: --only: 'vgg' is not one of digits, resnet18, mobilenet"),
    (["--only", ","], "Error: --only: empty")])
def test_an_unknown_name_is_refused_in_one_line(argv, message):
    with pytest.raises(SystemExit) as stopped:
        calibration.main(argv)
    assert str(stopped.value.code) == message
