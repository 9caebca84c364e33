"""Design-space exploration of ResNet-18 layers: time against area over accelerator configs.

Usage::

    python benchmarks/dse.py [--space benchmarks/dse_space.json] [--layers C4,C7,C10]
        [--jobs 2] [--metric luts] [--output benchmarks/results/dse.json]

Runs `vdla.tune.dse` (the engine of ``vdla dse``) on every configuration of
the space: the layers on the RTL with the default schedule (bit-exactness
checked), the synthesis estimate of `vdla.hw.synth` (ECP5; synthesis only, so
time is cycles at the nominal clock unless the flow gives an Fmax). The sweep
is logged to ``benchmarks/results/dse_log.jsonl`` (shared by every space) and
resumes from it. Writes the table and Pareto front to ``--output`` and the plot
beside it (same name, ``.png``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from vdla.tune import dse
from vdla.bench.plots import pareto
from vdla.bench.suite import select_workloads
from vdla.tune.log import read_jsonl

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default=str(ROOT / "benchmarks" / "dse_space.json"))
    parser.add_argument("--layers", default="C4,C7,C10")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--metric", default="luts")
    parser.add_argument("--output", type=Path, default=RESULTS / "dse.json",
                        help="report (JSON); the plot goes beside it as .png")
    parser.add_argument("--report-only", action="store_true",
                        help="report the configurations the log holds, evaluate nothing")
    args = parser.parse_args()
    try:
        space = dse.load_space(args.space)
        workloads = select_workloads(args.layers)
    except ValueError as error:   # DseError, or an unknown layer
        parser.error(str(error))
    log = RESULTS / "dse_log.jsonl"
    began = time.perf_counter()
    if args.report_only:
        names = [w.name for w in workloads]
        configs = space.configs()[0]
        latest = {r["config_hash"]: r for r in read_jsonl(log, what="DSE record",
                                                          required="config_hash")
                  if r.get("workloads") == names and r.get("schedules") == space.schedules}
        records = [{**latest[c.hash], "name": c.name} for c in configs if c.hash in latest]
    else:
        records = dse.run_dse(space, workloads, log=log, resume=True, jobs=args.jobs,
                              progress=lambda r: print(
                                  f"  {r['name']}: " + (r["error"] or f"{r['cycles']:,} cycles, "
                                                        f"{r['area']['luts']:,} LUTs"), flush=True))
    front = dse.pareto_front(records, args.metric)
    print(f"{'config':40s} {'cycles':>12s} {args.metric:>8s} {'MHz':>7s} {'time ms':>9s}")
    for record in records:
        if record["error"]:
            print(f"{record['name']:40s} failed: {record['error']}")
            continue
        print(f"{record['name']:40s} {record['cycles']:12,d} {record['area'][args.metric]:8,d} "
              f"{record['clock_mhz']:7.1f} {record['time_s'] * 1e3:9.3f}"
              + (" *" if record in front else ""))
    report = {"command": "python benchmarks/dse.py " + " ".join(sys.argv[1:]),
              "configs_in_space": len(space.configs()[0]),
              "space": json.loads(Path(args.space).read_text()), "layers": args.layers.split(","),
              "metric": args.metric, "seconds": round(time.perf_counter() - began, 1),
              "configs": records, "front": [r["name"] for r in front]}
    plot = args.output.with_suffix(".png")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=1))
    pareto(records, front, args.metric, plot)
    print(f"* Pareto front: {len(front)} of {len(records)} configurations; "
          f"wrote {args.output}, {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
