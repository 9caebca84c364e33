"""Module activity timelines of ResNet-18's C2 on the RTL, with and without latency hiding.

Compiles C2 for a config twice (the default schedule, and ``latency_hiding=False``
as ``vdla compile --no-latency-hiding`` does), runs both on the Verilator model
with activity recording on, and draws each run whole (a bounded record, binned
when the run has too many state changes) and in a common window of cycles
recorded exactly (the start-up and a few tile boundaries at the default
config), so the two zoomed pictures share a scale. The same figures come from
``vdla run c2.vdla --sim rtl --timeline FILE.png [--timeline-window START:END]``.

Usage: ``python benchmarks/timeline_c2.py [--config default] [--window 0:130000]
[--out docs/images]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


from vdla.compiler.accel.driver import compile_op
from vdla.compiler.workloads import resnet18_layer
from vdla.hw.config import PRESETS
from vdla.runtime.runner import AccelRunner
from vdla.bench.plots import timeline


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
        how = "latency hiding" if hiding else "no latency hiding"
        # The whole run with the default bounded record (binned if long), and the
        # window recorded on its own, exactly.
        for window_or_none in (None, window):
            device = AccelRunner(config, sim="rtl", activity=True, activity_window=window_or_none,
                            progress=print)
            result = device.run(program, inputs)
            if not np.array_equal(result.outputs["out"], reference):
                raise SystemExit(f"C2 ({how}): wrong output")
            bins = max(result.details["activity_bin_cycles"].values())
            title = (f"ResNet-18 C2 ({op.describe()})\non {config.name}, {how}: "
                     f"{result.cycles:,} cycles")
            if window_or_none is None:
                path = args.out / f"timeline_c2{suffix}_full.png"
                if bins > 1:
                    title += f" (binned, {bins:,} cycles per bin)"
                timeline(result.details["activity"], path, cycles=result.cycles, title=title)
                modules = result.details["modules"]
                print(f"{how}: {result.cycles:,} cycles; busy (memory stalls included): "
                      + ", ".join(f"{m} {modules[m]['busy']:,}" for m in modules)
                      + f" -> {path}")
            else:
                if bins > 1:
                    raise SystemExit("the window's record was coarsened; narrow the window")
                path = args.out / f"timeline_c2{suffix}.png"
                drawn = timeline(result.details["activity"], path, cycles=result.cycles,
                                 title=f"{title}, cycles {window[0]:,}-{window[1]:,}",
                                 window=(window[0], min(window[1], result.cycles)))
                print(f"{how}, cycles {window[0]:,}-{window[1]:,}: compute idle or waiting "
                      f"{drawn['compute']['wait_token'] + drawn['compute']['idle']:,} cycles"
                      f" -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
