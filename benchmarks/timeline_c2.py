"""Module activity timelines of ResNet-18's C2 on the RTL, with and without latency hiding.

Compiles C2 for a config twice (the default schedule, and ``latency_hiding=False``
as ``vdla compile --no-latency-hiding`` does), runs both on the Verilator model
with activity recording on, and draws each run whole and in a common window of
cycles (the start-up and two tile boundaries at the default config), so the
two pictures share a scale. The same figures come from
``vdla run c2.vdla --sim rtl --timeline FILE.png [--timeline-window START:END]``.

Usage: ``python benchmarks/timeline_c2.py [--config default] [--window 0:130000]
[--out docs/images]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.driver import compile_op  # noqa: E402
from compiler.workloads import resnet18_layer  # noqa: E402
from hw.config import PRESETS  # noqa: E402
from runtime.device import Device  # noqa: E402
from runtime.plots import timeline  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default", choices=sorted(PRESETS))
    parser.add_argument("--window", default="0:130000", help="START:END cycles of the zoom")
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    args = parser.parse_args(argv)
    config = PRESETS[args.config]
    window = tuple(int(v) for v in args.window.split(":"))
    op = resnet18_layer("C2").op
    inputs = op.random_inputs(np.random.default_rng(0))
    reference = op.reference(**inputs)
    for hiding, suffix in ((True, ""), (False, "_no_latency_hiding")):
        program = compile_op(op, config, latency_hiding=hiding)
        result = Device(config, sim="rtl", activity=True, progress=print).run(program, inputs)
        if not np.array_equal(result.outputs["out"], reference):
            raise SystemExit(f"C2 ({'with' if hiding else 'without'} latency hiding): wrong output")
        if max(result.details["activity_bin_cycles"].values()) > 1:
            raise SystemExit("the activity record was coarsened; raise activity_segments")
        how = "latency hiding" if hiding else "no latency hiding"
        title = f"ResNet-18 C2 ({op.describe()})\non {config.name}, {how}: {result.cycles:,} cycles"
        whole = args.out / f"timeline_c2{suffix}_full.png"
        zoom = args.out / f"timeline_c2{suffix}.png"
        timeline(result.details["activity"], whole, cycles=result.cycles, title=title)
        drawn = timeline(result.details["activity"], zoom, cycles=result.cycles,
                         title=f"{title}, cycles {window[0]:,}-{window[1]:,}", window=window)
        modules = result.details["modules"]
        print(f"{how}: {result.cycles:,} cycles; busy (memory stalls included): "
              + ", ".join(f"{m} {modules[m]['busy']:,}" for m in modules)
              + f"; in the window, compute idle or waiting "
              f"{drawn['compute']['wait_token'] + drawn['compute']['idle']:,} cycles"
              f" -> {zoom}, {whole}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
