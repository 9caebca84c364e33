"""ResNet-18's DRAM arena: its size, the host's copies per inference and the run's wall time.

Usage::

    python benchmarks/arena.py [--rtl] [--repeat N] [--output FILE.json]

Compiles ResNet-18 at 1x3x224x224 (`benchmarks/models/resnet18.py`, seeded)
for ``default`` and runs one image on fsim (and with ``--rtl`` the Verilator
model), ``--repeat`` times each, checking the logits against the integer
reference. Prints and writes (``benchmarks/results/arena.json``):

* the arena's bytes (code and constants, activation slots) against the sum of
  the layers' own DRAM images (`graph.arena`);
* the bytes the host copies into or out of DRAM per inference
  (`NetworkResult.copied_bytes`), and what running each layer in an image of
  its own copied: each image whole, its input placed, its output copied out;
* each run's wall time, best of ``--repeat`` (machine-dependent).

Run from a checkout that predates the arena, it reports the per-layer
figures only (``arena: null``): that is how the "before" column of
benchmarks/README.md was measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks" / "models"))

from resnet18 import build_resnet18, random_images  # noqa: E402

from vdla.frontend.onnx import load  # noqa: E402
from vdla.graph.kernels import execute  # noqa: E402
from vdla.graph.network import compile_network  # noqa: E402
from vdla.hw.config import PRESETS  # noqa: E402


def per_layer_copies(network) -> int:
    """Bytes per inference of an image per layer: the image, its input, its output."""
    config, total = network.config, 0
    for program in network.programs.values():
        total += program.dram_bytes + sum(region.nbytes(config) for region in program.tensors
                                          if region.name in ("data", "out"))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rtl", action="store_true", help="also the Verilator model")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per tier")
    parser.add_argument("--output", type=Path, default=RESULTS / "arena.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "resnet18.onnx"
        build_resnet18(path)
        graph = load(path)
    network = compile_network(graph, PRESETS["default"], {"input": random_images(8, seed=1)})
    image = random_images(1, seed=7)
    (output,) = network.graph.outputs
    reference = execute(network.graph, {"input": image})[output]
    figures = {"images_bytes": sum(p.dram_bytes for p in network.programs.values()),
               "per_layer_copied_bytes": per_layer_copies(network), "arena": None}
    if hasattr(network, "arena"):
        arena = network.arena()
        figures["arena"] = {"bytes": arena.size, "code_and_constants_bytes": arena.code_bytes,
                            "activation_bytes": arena.size - arena.code_bytes,
                            "activation_slots": len({s for s in arena.slots.values()}),
                            "activation_tensors_bytes": sum(
                                s.nbytes for s in set(arena.slots.values()))}
    for sim in ["fsim"] + (["rtl"] if args.rtl else []):
        seconds = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            result = network.run({"input": image}, sim=sim)
            seconds.append(time.perf_counter() - began)
        figures[sim] = {"seconds": round(min(seconds), 2),
                        "bit_exact": bool(np.array_equal(result.outputs[output], reference)),
                        "accel_cycles": result.accel_cycles,
                        "copied_bytes": getattr(result, "copied_bytes", None)}
    print(json.dumps(figures, indent=1))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
