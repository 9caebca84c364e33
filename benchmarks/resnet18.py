"""ResNet-18 (C2–C11) on the cycle-accurate RTL, with and without latency hiding.

Usage::

    python benchmarks/resnet18.py               # default config, 2 worker processes
    python benchmarks/resnet18.py --jobs 1 --config tiny

Runs `bench.suite` on the rtl simulator (each layer checked against numpy),
prints the per-layer table and the ablation, and writes
``benchmarks/results/resnet18.json`` (the ``vdla bench --json`` report plus
the machine and commit), ``benchmarks/results/resnet18_roofline.png`` and the
``## ResNet-18`` section of ``benchmarks/README.md`` (other sections are left
alone). Other configs write ``resnet18-<config>.*`` and do not touch the
README. Exits non-zero when a layer is wrong.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from vdla.cli.bench import describe_config, report_lines
from vdla.hw.config import load_config
from vdla.bench import suite as bench
from vdla.bench.report import bench_report
from vdla.bench.plots import roofline

HERE = Path(__file__).resolve().parent

RESULTS = HERE / "results"
README = HERE / "README.md"
HEADING = "## ResNet-18"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def readme_section(report: dict, roofline_name: str) -> str:
    """The ``## ResNet-18`` section: the figures as measured and how to reproduce them."""
    ablation = report["ablation"]
    rows = []
    for layer, side in zip(report["layers"], ablation["layers"]):
        rows.append(f"| {layer['name']} | {layer['uses']} | {layer['cycles']:,} | "
                    f"{layer['ideal_cycles']:,} | {100 * layer['gemm_utilization']:.1f} % | "
                    f"{side['cycles_without_latency_hiding']:,} | "
                    f"{100 * side['gemm_utilization_without_latency_hiding']:.1f} % | "
                    f"{side['speedup']:.2f}x |")
    total = report["resnet18_total_cycles"]
    total_off = ablation["resnet18_total_cycles_without_latency_hiding"]
    config = report["config"]
    vta = report["vta_total_cycles"]
    lines = [
        HEADING,
        "",
        f"ResNet-18's offloaded convolutions C2–C11 on the cycle-accurate RTL (Verilator) at "
        f"`{config['name']}` ({config['batch']}x{config['block_in']}x{config['block_out']} GEMM, "
        f"{config['dram_bus_bits']}-bit DRAM port on `{config.get('memory', 'ideal')}` memory "
        f"(\"Memory systems\" below), {config['dram_read_latency']}-cycle read "
        f"latency), default schedules, random inputs (seed {report['seed']}); every layer "
        f"matches numpy. Measured {report['measured_at']} at commit `{report['commit']}`.",
        "",
        "| layer | uses | cycles | ideal | GEMM util | cycles, no latency hiding | "
        "util, no latency hiding | speed-up |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
        *rows,
        f"| **total** (× uses) | | **{total:,}** | {report['resnet18_ideal_cycles']:,} | "
        f"{100 * report['resnet18_gemm_utilization']:.1f} % | {total_off:,} | "
        f"{100 * ablation['gemm_utilization_without_latency_hiding']:.1f} % | "
        f"{ablation['speedup']:.2f}x |",
        "",
        f"- Total: {total / 1e6:.2f} M cycles against an ideal {report['resnet18_ideal_cycles']:,}"
        f" (a GEMM core busy every cycle); geomean layer utilization "
        f"{100 * report['geomean_gemm_utilization']:.1f} %.",
    ]
    if vta:
        lines.append(f"- VTA: {vta / 1e6:.2f} M cycles; this design needs "
                     f"{abs(1 - total / vta):.1%} {'fewer' if total <= vta else 'more'} "
                     f"({vta / total:.2f}x VTA's speed).")
    ranked = sorted(ablation["layers"], key=lambda side: -side["speedup"])
    lines += [
        f"- Latency hiding (virtual threads + dependency tokens) saves {1 - total / total_off:.1%}"
        f" of the network's cycles ({ablation['speedup']:.2f}x); without it every module waits "
        "for the others. Largest speed-ups: "
        + ", ".join(f"{side['name']} {side['speedup']:.2f}x" for side in ranked[:3])
        + "; smallest: " + ", ".join(f"{side['name']} {side['speedup']:.2f}x"
                                     for side in ranked[-2:]) + ".",
        f"- Simulated in {report['seconds']:.0f} s on {report['machine']}.",
        "",
        f"![roofline of C2–C11](results/{roofline_name})",
        "",
        "Reproduce (the roofline puts each layer at 2·MACs per DRAM byte and 2·MACs per cycle, "
        "under the compute and DRAM ceilings):",
        "",
        "```",
        "python benchmarks/resnet18.py        # this section, results/resnet18.json, "
        "results/resnet18_roofline.png",
        "vdla bench resnet18 --ablation --jobs 2 --json resnet18.json --roofline roofline.png",
        "vdla bench resnet18 --config tiny --jobs 2 --check-baseline   # cycle regression check",
        "vdla bench resnet18 --config tiny --jobs 2 --update-baseline  # after an intended change",
        "```",
        "",
        "`--check-baseline` compares every layer's cycles with "
        "`bench/baselines/<config>.json` and fails when one grows by more than 1 %.",
        "",
    ]
    return "\n".join(lines)


def update_readme(section: str, path: Path = README) -> None:
    """Replace (or append) the ``## ResNet-18`` section, keeping every other section."""
    text = path.read_text() if path.exists() else "# Benchmarks\n\nMeasured figures and the " \
        "commands that reproduce them.\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == HEADING), None)
    if start is None:
        path.write_text(text.rstrip("\n") + "\n\n" + section)
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    rest = "".join(lines[end:])
    path.write_text("".join(lines[:start]) + section + ("\n" + rest if rest else ""))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default", help="preset or JSON file")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    config = load_config(args.config)
    stem = "resnet18" if config.name == "default" else f"resnet18-{config.name}"

    print(f"ResNet-18 C2–C11 on rtl at {describe_config(config)}, with and without latency "
          f"hiding, {args.jobs} worker(s)...", file=sys.stderr)
    done = []

    def progress(layer):
        done.append(layer)
        state = f"{layer.cycles:,} cycles" if layer.cycles is not None else "FAILED"
        print(f"  [{len(done)}/20] {layer.name}{'' if layer.latency_hiding else ' (no hiding)'}:"
              f" {state}", file=sys.stderr)

    with_hiding, without = bench.run_benches(
        bench.select_workloads(None), config, "rtl", variants=(True, False), seed=args.seed,
        jobs=args.jobs, progress=progress, message=lambda text: print(text, file=sys.stderr))
    report = bench_report(
        with_hiding, without, jobs=args.jobs, commit=_commit(),
        measured_at=time.strftime("%Y-%m-%d"),
        machine=f"{platform.machine()}, {platform.python_implementation()} "
                f"{platform.python_version()}, {args.jobs} worker process(es)")
    print("\n".join(report_lines(with_hiding, report)))

    report["command"] = " ".join(["python", "benchmarks/resnet18.py", *sys.argv[1:]])
    RESULTS.mkdir(exist_ok=True)
    json_path = RESULTS / f"{stem}.json"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    png_path = RESULTS / f"{stem}_roofline.png"
    roofline(with_hiding, config, png_path, compare=without)
    print(f"\nwrote {json_path.relative_to(HERE.parent)} and {png_path.relative_to(HERE.parent)}")
    correct = with_hiding.all_correct and without.all_correct
    if config.name == "default" and correct:
        update_readme(readme_section(report, png_path.name))
        print(f"updated the {HEADING!r} section of {README.relative_to(HERE.parent)}")
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main())
