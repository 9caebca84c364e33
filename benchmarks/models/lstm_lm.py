"""The TVM paper's LSTM language model (2 layers, 650 hidden, vocabulary 10,000, 35 steps),
seeded weights, as ONNX; compiled by vdla and compared with onnxruntime fp32.

Usage::

    python benchmarks/models/lstm_lm.py [--size mini|tvm] [--output results.json]

The model (opset 14, layout 0, batch N):

    embedded  T x N x E float32      (the embedding table's rows of the tokens)
    lstm1     LSTM E -> H, forward    Y: T x 1 x N x H, squeezed to T x N x H
    lstm2     LSTM H -> H, forward
    rows      Reshape to (T * N) x H
    decoder   Gemm H -> V (transB)    logits: (T * N) x V

The embedding lookup (a Gather of the constant table by computed token ids)
is not a graph node: vdla imports a Gather of constants only, so the model's
input is the embedded sequence, and `embed` is the lookup on the host. Each
LSTM becomes one dense layer over all T * N rows (the input projection, on
the accelerator) and the recurrence on the host (`vdla.graph.ops.recurrent`);
the decoder is one dense layer.

Sizes: ``tvm`` (E = H = 650, V = 10,000, T = 35, N = 1, the paper's) and
``mini`` (E = H = 32, V = 64, T = 6, N = 2, the tests'). Weights are uniform in
+-1/sqrt(H) as PyTorch initialises an LSTM, from a fixed seed; the sample
tokens and the calibration tokens are drawn from other seeds.

``main`` compiles the model for the default accelerator, runs it on fsim and
as the cpu target and prints (and with ``--output`` writes as JSON) per tier:
cycles of the accelerator layers, the host's share of the wall time, the
GEMM utilisation of the layers, and the cosine of the logits with
onnxruntime fp32's. It also measures one step's recurrent matmul (N x H by H
x 4H) as an accelerator program, against the projection over all steps, to
show what running the recurrence's matmuls on the accelerator would cost.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

__all__ = ["SIZES", "build", "embed", "tokens", "main"]

# (embedding E, hidden H, vocabulary V, steps T, batch N)
SIZES = {"tvm": (650, 650, 10000, 35, 1), "mini": (32, 32, 64, 6, 2)}


def _weights(size: str, seed: int = 0) -> dict[str, np.ndarray]:
    e, h, v, _, _ = SIZES[size]
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(h)

    def uniform(*shape, scale=bound):
        return rng.uniform(-scale, scale, shape).astype(np.float32)

    return {"table": uniform(v, e, scale=0.1),
            "W1": uniform(1, 4 * h, e), "R1": uniform(1, 4 * h, h), "B1": uniform(1, 8 * h),
            "W2": uniform(1, 4 * h, h), "R2": uniform(1, 4 * h, h), "B2": uniform(1, 8 * h),
            "decoder": uniform(v, h, scale=0.1), "decoder_bias": np.zeros(v, np.float32)}


def build(size: str = "mini", seed: int = 0):
    """The model (``onnx.ModelProto``): input ``embedded`` (T, N, E), output ``logits``
    (T * N, V)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    e, h, v, t, n = SIZES[size]
    weights = _weights(size, seed)
    inits = [numpy_helper.from_array(value, name) for name, value in weights.items()
             if name != "table"]
    inits += [numpy_helper.from_array(np.array([1], np.int64), "axis1"),
              numpy_helper.from_array(np.array([t * n, h], np.int64), "rows_shape")]
    nodes = [
        helper.make_node("LSTM", ["embedded", "W1", "R1", "B1"], ["y1"], "lstm1",
                         hidden_size=h),
        helper.make_node("Squeeze", ["y1", "axis1"], ["h1"], "squeeze1"),
        helper.make_node("LSTM", ["h1", "W2", "R2", "B2"], ["y2"], "lstm2", hidden_size=h),
        helper.make_node("Reshape", ["y2", "rows_shape"], ["rows"], "rows"),
        helper.make_node("Gemm", ["rows", "decoder", "decoder_bias"], ["logits"], "decoder",
                         transB=1),
    ]
    graph = helper.make_graph(
        nodes, f"lstm_lm_{size}",
        [helper.make_tensor_value_info("embedded", TensorProto.FLOAT, [t, n, e])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [t * n, v])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def tokens(size: str, count: int = 1, seed: int = 1) -> np.ndarray:
    """``count`` token sequences, (count * T, N) int64, stacked on the time axis."""
    _, _, v, t, n = SIZES[size]
    return np.random.default_rng(seed).integers(0, v, (count * t, n))


def embed(size: str, ids: np.ndarray, seed: int = 0) -> np.ndarray:
    """The embedding lookup of the model of ``seed``: (..., E) float32."""
    return _weights(size, seed)["table"][ids]


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _recurrent_step_cost(size: str, config) -> dict:
    """Estimated accelerator cycles of one step's recurrent matmul as its own program,
    beside the input projection of all steps (`compiler.ops.Dense`)."""
    from vdla.compiler.accel.driver import compile_op
    from vdla.compiler.ops import Dense
    from vdla.graph.network import _estimated_cycles
    e, h, _, t, n = SIZES[size]
    ops = (Dense(n, h, 4 * h, bias=True, shift=8), Dense(t * n, e, 4 * h, bias=True, shift=8))
    cycles = [_estimated_cycles(compile_op(op, config), op, config) for op in ops]
    return {"step_rows": n, "step_estimated_cycles": cycles[0],
            "recurrence_estimated_cycles": None if cycles[0] is None else 2 * t * cycles[0],
            "projection_rows": t * n, "projection_estimated_cycles": cycles[1]}


def run(size: str = "mini", samples: int = 1, sim: str = "fsim") -> dict:
    """Compile the model, run it on fsim and the cpu target; the figures of ``main``."""
    import onnxruntime

    from vdla.frontend.onnx import from_bytes
    from vdla.graph.network import compile_network
    from vdla.hw.config import PRESETS
    from vdla.hw.synth import clock_for
    model = build(size)
    data = model.SerializeToString()
    _, _, _, t, _ = SIZES[size]
    calibration = embed(size, tokens(size, 4, seed=2))
    x = embed(size, tokens(size, samples, seed=1))[:t]
    expected = onnxruntime.InferenceSession(data).run(None, {"embedded": x})[0]
    start = time.perf_counter()
    network = compile_network(from_bytes(data), PRESETS["default"], {"embedded": calibration})
    figures = {"size": size, "dims": dict(zip("EHVTN", SIZES[size])),
               "compile_seconds": round(time.perf_counter() - start, 2), "tiers": {}}
    # fsim is untimed: the accelerator's cycles are the cost model's (`graph.network`), or
    # the RTL's with ``sim="rtl"``.
    estimates = network.metadata["estimated_cycles"]
    accel = [node for node in network.graph.nodes if network.placement[node.name] == "accel"]
    macs = sum(math.prod(network.graph.tensors[node.inputs[0]].shape)
               * network.graph.tensors[node.inputs[1]].shape[0] for node in accel)
    cycles = sum(estimates[node.name] for node in accel)
    clock = clock_for(network.config)
    mhz = clock[0] if clock else 100.0
    figures.update(estimated_cycles=cycles, clock_mhz=mhz,
                   gemm_utilization=round(macs / (cycles * network.config.macs_per_cycle), 4))
    for tier, options in ((sim, {"sim": sim}), ("cpu", {"target": "cpu"})):
        result = network.run({"embedded": x}, **options)
        host = sum(row["seconds"] for row in result.layers if row["place"] == "host")
        entry = {"cosine": round(_cosine(result.outputs["logits"], expected), 6),
                 "host_seconds": round(host, 4)}
        if tier != "cpu":
            timed = result.accel_cycles if result.accel_cycles is not None else cycles
            entry["accel_cycles"] = result.accel_cycles
            # The host's share of a run at the clock: its numpy time against the layers'.
            entry["host_share"] = round(host / (host + timed / (mhz * 1e6)), 4)
        else:
            layers = sum(row["seconds"] for row in result.layers if row["place"] == "cpu")
            entry["layer_seconds"] = round(layers, 4)
            entry["host_share"] = round(host / (host + layers), 4)
        figures["tiers"][tier] = entry
    figures["recurrent_step"] = _recurrent_step_cost(size, PRESETS["default"])
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="mini")
    parser.add_argument("--sim", default="fsim", help="the accelerator's tier (fsim, rtl)")
    parser.add_argument("--output", help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    figures = run(args.size, sim=args.sim)
    text = json.dumps(figures, indent=1)
    print(text)
    if args.output:
        from vdla.files import write_atomic
        write_atomic(args.output, lambda handle: handle.write(text.encode() + b"\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
