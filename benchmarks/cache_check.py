"""What the build cache's check costs on a hit: ms per load of an RTL model and a cpu kernel.

Every cache hit verifies the files it hands out against the size and SHA-256
recorded when they were built (`vdla.cache`). This times, on entries already in
the cache (building them first if needed):

* the RTL model of ``--config``: `sim.rtl.build.build_model` on a hit (its
  Verilog entry and its model entry, both verified);
* the cpu kernel of ResNet-18's C2 layer: `compiler.cpu.build.build_library`
  on a hit;

and, of each, the time spent verifying (hashing the files against their
manifests) — the rest is computing the key (hashing the Verilog text, the
config, the tool versions).

Usage::

    python benchmarks/cache_check.py [--config default] [--repeat 20]

Prints the median of ``--repeat`` calls each and writes
``benchmarks/results/cache_check.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from vdla.compiler.cpu.build import build_library
from vdla.compiler.cpu.kernel import CpuKernel
from vdla.compiler.workloads import resnet18_layer
from vdla import cache
from vdla.hw.config import load_config
from vdla.sim.rtl.build import build_model

ROOT = Path(__file__).resolve().parent.parent


def hit_and_check_ms(call, repeat: int) -> tuple[float, float]:
    """Median ms of ``call()``, and of the verification it does (`vdla.cache`'s check, timed)."""
    original, checking = cache._verified, [0.0]

    def timed(directory):
        start = time.perf_counter()
        try:
            return original(directory)
        finally:
            checking[0] += time.perf_counter() - start
    cache._verified = timed
    try:
        totals, checks = [], []
        for _ in range(repeat):
            checking[0] = 0.0
            start = time.perf_counter()
            call()
            totals.append(time.perf_counter() - start)
            checks.append(checking[0])
    finally:
        cache._verified = original
    return (round(1000 * statistics.median(totals), 3),
            round(1000 * statistics.median(checks), 3))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default", help="preset name or JSON file")
    parser.add_argument("--repeat", type=int, default=20, help="calls timed (median kept)")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results"
                                                / "cache_check.json"))
    args = parser.parse_args()
    config = load_config(args.config)

    model = build_model(config, progress=print)
    rtl = {"config": config.name, "library_bytes": model.library.stat().st_size,
           "verilog_bytes": model.verilog.stat().st_size}
    rtl["hit_ms"], rtl["check_ms"] = hit_and_check_ms(lambda: build_model(config), args.repeat)

    source = CpuKernel(resnet18_layer("C2").op).source
    library = build_library(source)
    cpu = {"layer": "ResNet-18 C2", "library_bytes": library.stat().st_size}
    cpu["hit_ms"], cpu["check_ms"] = hit_and_check_ms(lambda: build_library(source), args.repeat)

    for name, row in (("RTL model", rtl), ("cpu kernel", cpu)):
        sizes = ", ".join(f"{key.removesuffix('_bytes')} {value / 1e6:.2f} MB"
                          for key, value in row.items() if key.endswith("_bytes"))
        print(f"{name} ({row.get('config') or row.get('layer')}; {sizes}): "
              f"{row['hit_ms']:.2f} ms per cache hit, of which the check {row['check_ms']:.2f} ms")
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"rtl": rtl, "cpu": cpu, "repeat": args.repeat,
                                  "machine": platform.processor() or platform.machine(),
                                  "command": f"python benchmarks/cache_check.py --config "
                                             f"{args.config} --repeat {args.repeat}"},
                                 indent=2) + "\n")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
