"""Depthwise 3x3 convolutions on the accelerator's GEMM core, against the ideal and the CPU.

The accelerator runs a depthwise layer as a grouped GEMM whose every block
holds ``block_in`` channels on its diagonal (`runtime.layout`'s
``block_diagonal`` weights): one GEMM micro-op per (pixel, block of
channels, tap), of which ``1 / block_in`` of the MACs are useful. The ideal of that path is one
micro-op per cycle; GEMM utilisation is counted as for every GEMM layer
(useful MACs over cycles x the MACs the core does per cycle), so its ceiling
is ``1 / block_in`` (6.25 % at ``default``).

The layers are MobileNetV2's depthwise 3x3 layers
(`compiler.workloads.MOBILENET_V2_DEPTHWISE`: 224 px input, 32–960 channels
at 7–112 px, stride 1 and 2), batch 1, bias, shift and ReLU as a quantised
network has them. For each: RTL cycles at ``default`` (Verilator), the
ideal, utilisation, the time at 100 MHz, and the ``cpu`` target's int8 time
on this machine (2 threads, median of 20); totals count each layer as often
as the network runs it. Writes ``benchmarks/results/depthwise.json``. Run::

    python -m benchmarks.depthwise [--config default] [--layers N]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from vdla.compiler import compile_op
from vdla.compiler.cpu import CpuKernel
from vdla.compiler.workloads import MOBILENET_V2_DEPTHWISE
from vdla.hw.config import PRESETS
from vdla.runtime.runner import AccelRunner

RESULTS = Path(__file__).with_name("results") / "depthwise.json"
CLOCK_MHZ = 100


def _cpu_seconds(op, inputs, repeats: int = 20) -> float:
    kernel = CpuKernel(op, "int8")
    kernel.set_weights(inputs["weight"], inputs.get("bias"))
    out = kernel.run(inputs["data"])
    assert np.array_equal(out, op.reference(**inputs)), op.describe()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        kernel.run(inputs["data"], out=out)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def measure(config_name: str, layers: int) -> list[dict]:
    config = PRESETS[config_name]
    device = AccelRunner(config, sim="rtl")
    macs_per_cycle = config.batch * config.block_in * config.block_out
    rows = []
    for workload in MOBILENET_V2_DEPTHWISE[:layers]:
        op = workload.op
        inputs = op.random_inputs(np.random.default_rng(0))
        result = device.run(compile_op(op, config), inputs)
        assert np.array_equal(result.outputs["out"], op.reference(**inputs)), op.describe()
        blocks = -(-op.in_channels // config.block_in)
        ideal = op.batch * op.out_height * op.out_width * blocks * 9
        cpu = _cpu_seconds(op, inputs)
        row = {"name": workload.name, "layer": op.describe(), "uses": workload.uses,
               "macs": op.macs, "cycles": result.cycles, "ideal": ideal,
               "of_ideal": ideal / result.cycles,
               "gemm_utilisation": op.macs / (result.cycles * macs_per_cycle),
               "accel_ms_at_100mhz": result.cycles / (CLOCK_MHZ * 1e3),
               "cpu_ms": cpu * 1e3}
        rows.append(row)
        print(f"{workload.name:13s} {result.cycles:>9,} cycles  ideal {ideal:>9,} "
              f"({row['of_ideal']:.1%})  util {row['gemm_utilisation']:.2%}  "
              f"{row['accel_ms_at_100mhz']:.3f} ms @100MHz  cpu {row['cpu_ms']:.3f} ms",
              flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default")
    parser.add_argument("--layers", type=int, default=len(MOBILENET_V2_DEPTHWISE))
    args = parser.parse_args()
    rows = measure(args.config, args.layers)

    def total(key):
        return sum(r[key] * r["uses"] for r in rows)
    cycles, ideal, macs = total("cycles"), total("ideal"), total("macs")
    config = PRESETS[args.config]
    summary = {"cycles": cycles, "ideal": ideal, "of_ideal": ideal / cycles,
               "gemm_utilisation": macs / (cycles * config.batch * config.block_in
                                           * config.block_out),
               "accel_ms_at_100mhz": cycles / (CLOCK_MHZ * 1e3),
               "cpu_ms": total("cpu_ms")}
    print(f"total {cycles:,} cycles, ideal {ideal:,} ({summary['of_ideal']:.1%}), GEMM "
          f"utilisation {summary['gemm_utilisation']:.2%}, {summary['accel_ms_at_100mhz']:.2f} "
          f"ms at {CLOCK_MHZ} MHz vs cpu {summary['cpu_ms']:.2f} ms")
    RESULTS.write_text(json.dumps({"config": args.config, "clock_mhz": CLOCK_MHZ,
                                   "machine": platform.machine(), "layers": rows,
                                   "total": summary}, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
