"""onnxruntime running a whole network, fp32 and in its own int8: the end-to-end peers.

`peer_models` writes the models (the float model as given, and onnxruntime's
own QDQ quantisations of it, `bench.onnx_quantize`); `time_model` times one of
them on one input:

- each implementation is timed in a block of its own (a fresh session, its
  warm-up calls, then ``calls`` timed calls), never interleaved with
  another's, so one's threads and caches do not disturb the next;
- with and without intra-op spinning (``session.intra_op.allow_spinning``):
  spinning threads answer faster but steal cores other processes share;
- the median is the figure; the 10th and 90th percentiles are the spread.

`run_all` runs a model over many inputs (in the batch size it takes) and
`compare_outputs` says how far an int8 peer's outputs are from fp32's.
``onnx`` and ``onnxruntime`` are needed (both dependencies of vdla).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import numpy as np

from vdla.bench.onnx_quantize import quantize_qdq
from vdla.bench.timing import summarise, time_block as time_calls

__all__ = ["Timing", "time_block", "session", "time_model", "peer_models", "run_all",
           "compare_outputs", "format_timings"]


@dataclasses.dataclass(frozen=True)
class Timing:
    """Wall-clock times of one implementation's block of calls, in milliseconds."""

    name: str
    calls: int
    median_ms: float
    p10_ms: float
    p90_ms: float
    settings: dict = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def time_block(name: str, call: Callable[[], object], warmup: int = 3, calls: int = 20,
               **settings) -> tuple[Timing, object]:
    """Call ``call`` ``warmup`` times, then time ``calls`` calls; the last result too.

    ``settings`` (threads, spinning, ...) are recorded with the figures. The
    timing and its statistics are `bench.timing`'s, as `vdla compare` uses them.
    """
    if warmup < 1 or calls < 1:
        raise ValueError(f"a timed block needs at least one warm-up call and one timed call "
                         f"(got {warmup} and {calls})")
    result = None

    def timed():
        nonlocal result
        result = call()
    summary = summarise([time_calls(timed, warmup, calls)])
    return Timing(name, calls, summary.median * 1e3, summary.p10 * 1e3, summary.p90 * 1e3,
                  settings), result


def session(model_path, threads: int, spinning: bool):
    """An onnxruntime CPU session with all graph optimisations, ``threads`` intra-op threads."""
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", str(int(spinning)))
    return onnxruntime.InferenceSession(str(model_path), options,
                                        providers=["CPUExecutionProvider"])


def time_model(name: str, model_path, feed: dict[str, np.ndarray], threads: int = 1,
               spinning: bool = False, warmup: int = 3, calls: int = 20
               ) -> tuple[Timing, np.ndarray]:
    """Time onnxruntime on ``model_path`` with inputs ``feed``, in a block of its own.

    Returns the timing and the first output of the last call.
    """
    runner = session(model_path, threads, spinning)
    timing, outputs = time_block(name, lambda: runner.run(None, feed), warmup, calls,
                                 threads=threads, spinning=spinning)
    return timing, outputs[0]


def peer_models(model_path, calibration: np.ndarray, folder,
                schemes=("int8", "uint8")) -> dict[str, Path]:
    """``ort fp32`` (the model itself) and ``ort <scheme>`` (its QDQ in ``folder``)."""
    models = {"ort fp32": Path(model_path)}
    for scheme in schemes:
        models[f"ort {scheme}"] = Path(folder) / f"{Path(model_path).stem}.{scheme}.onnx"
        quantize_qdq(model_path, calibration, models[f"ort {scheme}"], scheme)
    return models


def run_all(model_path, images: np.ndarray, threads: int = 1) -> np.ndarray:
    """The model's first output on every image, fed in the batch size its input takes."""
    runner = session(model_path, threads, spinning=False)
    (graph_input,) = runner.get_inputs()
    batch = graph_input.shape[0] if isinstance(graph_input.shape[0], int) else len(images)
    if len(images) % batch:
        raise ValueError(f"{len(images)} inputs do not fill batches of {batch} "
                         f"(the model's batch size)")
    return np.concatenate([runner.run(None, {graph_input.name: images[first:first + batch]})[0]
                           for first in range(0, len(images), batch)])


def compare_outputs(output: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """Mean per-sample cosine similarity and top-1 agreement of ``output`` with ``reference``."""
    a = output.reshape(len(output), -1).astype(np.float64)
    b = reference.reshape(len(reference), -1).astype(np.float64)
    cosine = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {"cosine": float(cosine.mean()),
            "top1_agreement": float((a.argmax(axis=1) == b.argmax(axis=1)).mean())}


def format_timings(timings: list[Timing]) -> list[str]:
    """One row per timed block: median and spread (10th-90th percentile)."""
    width = max([len("implementation"), *(len(timing.name) for timing in timings)])
    rows = [f"{'implementation':<{width}} {'threads':>7} {'spinning':>8} {'median ms':>10} "
            f"{'p10-p90 ms':>16}"]
    for timing in timings:
        spread = f"{timing.p10_ms:.3f}-{timing.p90_ms:.3f}"
        rows.append(f"{timing.name:<{width}} {timing.settings.get('threads', ''):>7} "
                    f"{'yes' if timing.settings.get('spinning') else 'no':>8} "
                    f"{timing.median_ms:>10.3f} {spread:>16}")
    return rows
