"""Calibration methods: each activation's range from sample inputs, as onnxruntime's are.

`graph.quantize.calibrate` runs the float graph over the samples and asks a
method for each tensor's threshold ``t`` (the magnitude its int8 range must
hold); the tensor's exponent is then the finest power of two that holds it,
`graph.quantize.exponent_for(t)`, and values beyond it saturate. Weights keep
their own rule (`graph.quantize.best_exponent`). The methods
(``METHODS``), after onnxruntime's ``CalibrationMethod`` with vdla's
symmetric scales:

- ``mse``: vdla's own (the default): the largest magnitude, then of it and
  the next finer exponents the one of least squared error
  (`graph.quantize.calibrate`);
- ``minmax``: the largest magnitude seen (onnxruntime's MinMax, symmetric);
- ``percentile``: the ``PERCENTILE`` (99.999) percentile of the magnitudes,
  read from a ``PERCENTILE_BINS`` histogram of ``|x|`` over ``[min |x|,
  max |x|]`` (onnxruntime's Percentile with ``symmetric=True``);
- ``entropy``: the threshold whose int8 quantisation of a ``ENTROPY_BINS``
  histogram of ``x`` over ``[-max |x|, max |x|]`` into ``QUANTIZED_BINS``
  bins loses the least information (KL divergence; onnxruntime's Entropy,
  TensorRT's method) with its ``num_bins`` at ``ENTROPY_BINS`` (its default,
  128, leaves one candidate, the full range).

The histograms are built in a second pass over the samples, over the range
the first pass found; onnxruntime grows its histogram batch by batch
instead, so the two agree exactly on one batch and within a few bins of the
histogram otherwise (tests/graph/test_calibration.py).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from vdla.graph.errors import GraphError

__all__ = ["METHODS", "PERCENTILE", "PERCENTILE_BINS", "ENTROPY_BINS", "QUANTIZED_BINS",
           "thresholds", "percentile_threshold", "entropy_threshold", "check_method"]

METHODS = ("mse", "minmax", "percentile", "entropy")
PERCENTILE = 99.999
PERCENTILE_BINS = 2048
ENTROPY_BINS = 2048
QUANTIZED_BINS = 128


def check_method(method: str) -> str:
    """``method`` if it is one of `METHODS`, else `GraphError`."""
    if method not in METHODS:
        raise GraphError(f"calibration method {method!r} is not one vdla knows "
                         f"({', '.join(METHODS)})")
    return method


def percentile_threshold(histogram: np.ndarray, edges: np.ndarray, largest: float,
                         percentile: float = PERCENTILE) -> float:
    """The magnitude below which ``percentile`` % of a histogram of ``|x|`` lies (an edge
    of its bins, at most ``largest``)."""
    cdf = np.cumsum(histogram / histogram.sum())
    index = min(int(np.searchsorted(cdf, percentile / 100.0)), len(edges) - 1)
    return float(min(edges[index], largest))


def _smooth(p: np.ndarray, eps: float = 0.0001) -> np.ndarray | None:
    """Zeros replaced by ``eps``, taken from the others (so that the KL divergence is
    finite); None for an all-zero distribution."""
    zeros = p == 0
    nonzero = p.size - zeros.sum()
    if not nonzero:
        return None
    smoothed = p.astype(np.float32)
    smoothed += np.where(zeros, np.float32(eps), np.float32(-eps * zeros.sum() / nonzero))
    return smoothed if np.all(smoothed > 0) else None


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    p = p / p.sum()
    q = q / q.sum()
    return float(np.sum(p * np.log(p / q)))


def entropy_threshold(histogram: np.ndarray, edges: np.ndarray,
                      quantized_bins: int = QUANTIZED_BINS) -> tuple[float, float]:
    """The ``(low, high)`` edges of the symmetric window of a histogram of ``x`` (centred
    on zero) whose quantisation into ``quantized_bins`` bins keeps the least KL divergence
    from the histogram with its outliers folded into the window's end bins."""
    bins = histogram.size
    zero = bins // 2
    half = quantized_bins // 2
    best, window = np.inf, (edges[0], edges[-1])
    for i in range(half, zero + 1):
        start, end = zero - i, min(zero + i + 1, bins)
        sliced = histogram[start:end].astype(np.int64)
        p = sliced.copy()
        p[0] += histogram[:start].sum()
        p[-1] += histogram[end:].sum()
        merged = sliced.size // quantized_bins
        body = sliced[:merged * quantized_bins].reshape(quantized_bins, merged)
        levels = body.sum(axis=1)
        levels[-1] += sliced[quantized_bins * merged:].sum()
        # Each level spread evenly over the bins of p that are not empty (integer division,
        # as onnxruntime's int64 array keeps it).
        counts = (p[:merged * quantized_bins] != 0).reshape(quantized_bins, merged).sum(axis=1)
        q = np.zeros(p.size, np.int64)
        spread = np.where(counts > 0, levels / np.maximum(counts, 1), 0).astype(np.int64)
        q[:merged * quantized_bins] = np.repeat(spread, merged)
        ps, qs = _smooth(p), _smooth(q)
        divergence = np.inf if ps is None or qs is None else _kl(ps, qs)
        if divergence < best:
            best, window = divergence, (edges[start], edges[end])
    return float(window[0]), float(window[1])


def thresholds(method: str, names: list[str], observe: Callable,
               ranges: dict[str, tuple[float, float, float, float]]) -> dict[str, float]:
    """Each tensor's threshold by ``method`` (``minmax``, ``percentile``, ``entropy``).

    Parameters
    ----------
    method : str
    names : list of str
        The tensors.
    observe : callable
        ``observe(record)`` runs the samples through the graph, calling
        ``record(name, array)`` for each tensor (`graph.quantize._observe`).
    ranges : dict
        Per tensor, ``(min, max, min |x|, max |x|)`` over all the samples.
    """
    check_method(method)
    if method == "minmax":
        return {name: ranges[name][3] for name in names}
    bins = PERCENTILE_BINS if method == "percentile" else ENTROPY_BINS
    histograms = {name: np.zeros(bins, np.int64) for name in names}

    def spans(name: str) -> tuple[float, float]:
        low, high, least, largest = ranges[name]
        return (least, largest) if method == "percentile" else (-largest, largest)

    def record(name: str, array: np.ndarray) -> None:
        if name not in histograms:
            return
        values = np.asarray(array, np.float32).reshape(-1)
        values = np.abs(values) if method == "percentile" else values
        histograms[name] += np.histogram(values, bins, range=spans(name))[0]

    observe(record)
    result = {}
    for name in names:
        low, high, least, largest = ranges[name]
        if largest == 0:
            result[name] = 0.0
            continue
        edges = np.histogram_bin_edges(np.zeros(0), bins, range=spans(name)).astype(
            np.float32)
        if method == "percentile":
            result[name] = percentile_threshold(histograms[name], edges, largest)
        else:
            lo, hi = entropy_threshold(histograms[name], edges)
            result[name] = max(abs(max(lo, low)), abs(min(hi, high)))
    return result


def exponents(graph, samples: dict[str, np.ndarray], method: str, observe: Callable,
              exponent_for: Callable) -> dict[str, int]:
    """Each computed tensor's exponent by ``method``: the finest that holds its threshold.

    ``observe`` and ``exponent_for`` are `graph.quantize`'s (the samples run
    through the graph; a threshold's exponent).
    """
    ranges: dict[str, tuple[float, float, float, float]] = {}

    def extent(name: str, array: np.ndarray) -> None:
        values = np.asarray(array, np.float64).reshape(-1)
        if not values.size:
            return
        magnitudes = np.abs(values)
        seen = (values.min(), values.max(), magnitudes.min(), magnitudes.max())
        old = ranges.get(name, seen)
        ranges[name] = (min(old[0], seen[0]), max(old[1], seen[1]), min(old[2], seen[2]),
                        max(old[3], seen[3]))

    observe(graph, samples, extent)
    found = thresholds(method, list(ranges), lambda record: observe(graph, samples, record),
                       ranges)
    return {name: exponent_for(value, f"tensor {name!r}") for name, value in found.items()}
