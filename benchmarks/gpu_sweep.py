"""The gpu target's schedule space on the GPU: each candidate checked bit-exact and timed.

Usage (on the GPU machine, from the repository's root)::

    python benchmarks/gpu_sweep.py [--top 24] [--random 24] [--deadline 150] [--jobs 14]

For ResNet-18's C2–C11 at batch 1 and 8 in int8, takes the ``--top`` candidates
of `compiler.gpu.schedule.gpu_knob_space` by the cost model
(`estimate_gpu_cost`; the first is `default_gpu_schedule`) and ``--random``
more drawn from the rest, compiles them all with NVRTC in ``--jobs`` processes
(CuPy's on-disk cache then serves the measuring process), and for each:

- checks its output against numpy's (``op.reference``) on random inputs;
- times it twice: ``launch``, the CUDA-event time of 20 back-to-back launches
  from Python / 20 (what `bench.gpu_compare` reports), and ``device``, the
  same 20 launches replayed as one CUDA graph / 20 (the kernel alone, without
  the host's launch cost); medians of ``--repeats`` samples.

Also times an empty kernel both ways (the launch floor). Stops measuring at
``--deadline`` seconds and writes what it has to ``results/gpu_sweep.json``
(every candidate, and per layer the default's and the best's times, and the
rank correlation of the model with the measured device times).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import multiprocessing
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from vdla.bench.gpu_compare import gpu_machine
from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.gpu.codegen import KERNEL_NAME, generate_op_cuda
from vdla.compiler.gpu.kernel import NVRTC_OPTIONS, GpuKernel
from vdla.compiler.gpu.schedule import GpuSchedule, estimate_gpu_cost, gpu_knob_space
from vdla.compiler.workloads import RESNET18

ROOT = Path(__file__).resolve().parent.parent
INNER = 20


def _compile(source: str) -> float:
    """NVRTC-compile ``source`` (filling CuPy's disk cache); its seconds."""
    import cupy
    start = time.perf_counter()
    cupy.RawModule(code=source, options=NVRTC_OPTIONS).get_function(KERNEL_NAME)
    return time.perf_counter() - start


def _median_event_ms(cupy, enqueue, stream, repeats: int, per_sample: int) -> float:
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    samples = []
    for _ in range(repeats):
        start.record(stream)
        enqueue()
        end.record(stream)
        end.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, end) / per_sample)
    return statistics.median(samples)


def _times_us(cupy, kernels_launch, stream, repeats: int) -> dict:
    """``launch``: 20 Python launches per sample; ``device``: one graph of 20 launches."""
    def launches():
        for _ in range(INNER):
            kernels_launch(stream)
    launches()
    stream.synchronize()
    launch = _median_event_ms(cupy, launches, stream, repeats, INNER)
    stream.begin_capture()
    try:
        launches()
    finally:
        graph = stream.end_capture()
    graph.launch(stream)
    device = _median_event_ms(cupy, lambda: graph.launch(stream), stream, repeats, INNER)
    return {"launch_us": launch * 1e3, "device_us": device * 1e3}


def _spearman(xs, ys) -> float | None:
    if len(xs) < 3:
        return None
    rank_x, rank_y = (np.argsort(np.argsort(v)) for v in (xs, ys))
    return float(np.corrcoef(rank_x, rank_y)[0, 1])


def candidates(op, top: int, extra: int, seed: int) -> list[tuple[GpuSchedule, int]]:
    """(schedule, model rank) pairs: the model's ``top`` best, then ``extra`` drawn from the rest."""
    problem = CpuProblem.from_op(op)
    ranked = sorted(gpu_knob_space(problem, "int8"),
                    key=lambda schedule: estimate_gpu_cost(problem, schedule, "int8"))
    chosen = list(range(min(top, len(ranked))))
    rest = list(range(len(chosen), len(ranked)))
    chosen += sorted(random.Random(seed).sample(rest, min(extra, len(rest))))
    return [(ranked[index], index) for index in chosen]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default=",".join(w.name for w in RESNET18))
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--top", type=int, default=24)
    parser.add_argument("--random", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=14)
    parser.add_argument("--deadline", type=float, default=150.0, help="seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "gpu_sweep.json"))
    args = parser.parse_args()
    began = time.perf_counter()
    layers = [w for w in RESNET18 if w.name in args.layers.split(",")]
    work = []  # (workload, batch, op, schedule, rank)
    for workload in layers:
        for batch in map(int, args.batches.split(",")):
            op = dataclasses.replace(workload.op, batch=batch)
            work += [(workload, batch, op, schedule, rank)
                     for schedule, rank in candidates(op, args.top, args.random, args.seed)]
    sources = [generate_op_cuda(op, "int8", schedule) for _, _, op, schedule, _ in work]
    # spawn: the workers open their own CUDA contexts (a forked context is unusable).
    with concurrent.futures.ProcessPoolExecutor(
            args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        compile_seconds = list(pool.map(_compile, sources, chunksize=4))
    print(f"compiled {len(sources)} kernels in {time.perf_counter() - began:.1f} s "
          f"(median {statistics.median(compile_seconds):.2f} s each)", flush=True)

    import cupy
    stream = cupy.cuda.Stream(non_blocking=True)
    empty = cupy.RawKernel('extern "C" __global__ void empty() {}', "empty")
    floor = _times_us(cupy, lambda s: empty((1,), (32,), (), stream=s), stream, args.repeats * 4)
    report = {"device": gpu_machine(), "command": "python benchmarks/gpu_sweep.py "
              + " ".join(sys.argv[1:]), "inner": INNER, "empty_kernel": floor,
              "candidates": [], "layers": {}}
    rng = np.random.default_rng(args.seed)
    inputs_of = {}
    for (workload, batch, op, schedule, rank), seconds in zip(work, compile_seconds):
        if time.perf_counter() - began > args.deadline:
            report["stopped"] = f"deadline of {args.deadline:g} s"
            break
        key = f"{workload.name}/b{batch}"
        if key not in inputs_of:
            inputs = op.random_inputs(rng, bias_range=1 << 20)
            inputs_of[key] = (inputs, op.reference(**inputs))
        inputs, expected = inputs_of[key]
        kernel = GpuKernel(op, "int8", schedule)
        kernel.set_weights(inputs["weight"], inputs.get("bias"))
        exact = bool(np.array_equal(kernel.run(inputs["data"]), expected))
        record = {"layer": key, "schedule": schedule.to_dict(), "model_rank": rank,
                  "model_cycles": estimate_gpu_cost(CpuProblem.from_op(op), schedule, "int8"),
                  "compile_s": seconds, "bit_exact": exact,
                  **_times_us(cupy, lambda s, kernel=kernel: kernel.launch(stream=s), stream, args.repeats)}
        report["candidates"].append(record)
        print(f"{key:7} rank {rank:4} {'exact' if exact else 'WRONG'} "
              f"device {record['device_us']:8.2f} us launch {record['launch_us']:8.2f} us",
              flush=True)
    for key in dict.fromkeys(r["layer"] for r in report["candidates"]):
        rows = [r for r in report["candidates"] if r["layer"] == key]
        default = next((r for r in rows if r["model_rank"] == 0), None)
        best = min(rows, key=lambda r: r["device_us"])
        report["layers"][key] = {
            "measured": len(rows), "all_bit_exact": all(r["bit_exact"] for r in rows),
            "default_device_us": default and default["device_us"],
            "default_launch_us": default and default["launch_us"],
            "best_device_us": best["device_us"], "best_launch_us": best["launch_us"],
            "best_schedule": best["schedule"], "best_model_rank": best["model_rank"],
            "model_spearman": _spearman([r["model_cycles"] for r in rows],
                                        [r["device_us"] for r in rows])}
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    print(f"empty kernel: device {floor['device_us']:.2f} us, launch {floor['launch_us']:.2f} us")
    print(f"{'layer':7} {'n':>3} {'exact':>5} {'default dev/launch us':>22} "
          f"{'best dev/launch us':>20} {'rank':>4} {'rho':>5}")
    for key, row in report["layers"].items():
        rho = row["model_spearman"]
        print(f"{key:7} {row['measured']:3} {str(row['all_bit_exact']):>5} "
              f"{row['default_device_us'] or 0:10.2f}/{row['default_launch_us'] or 0:<10.2f} "
              f"{row['best_device_us']:9.2f}/{row['best_launch_us']:<9.2f} "
              f"{row['best_model_rank']:4} {rho if rho is None else round(rho, 2)!s:>5}")
    print(f"wrote {args.output}")
    return 0 if all(r["bit_exact"] for r in report["candidates"]) else 1


if __name__ == "__main__":
    sys.exit(main())
