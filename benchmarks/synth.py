"""Resources, Fmax and ResNet-18 time of `default` and of each board preset.

Usage::

    python benchmarks/synth.py [--configs default,ulx3s,ecpix5,ecpix5-256,icebreaker] [--estimate]
                               [--jobs 2] [--seed 1]

For each config: Yosys + nextpnr through YoWASP (`hw.synth`). A board preset
is placed as its board top (accelerator, on-chip memory, UART link) on its
board's part (`hw.boards.table.BOARDS`) with its board's clock as the goal, as
`hw.synth.place_and_route` does; `default` as the accelerator core alone, out
of context, on an LFE5U-85F (it cannot fit one, `hw.synth.fit`, so its row is
Yosys's synthesis alone). ResNet-18 C2–C11 cycles (sum of cycles x uses)
come from ``bench/baselines/<config>.json`` when it matches the config, else
from a run on the RTL tier; milliseconds are those cycles at the reported
Fmax. A preset whose DRAM addresses are too narrow for a ResNet-18 layer's
image (iCEBreaker's 128 KiB) runs with 32-bit addresses: `dram_addr_bits`
sizes only the address and count registers, no cycle depends on it. Prints a
markdown table and writes ``benchmarks/results/synth.json`` (with the command
that made it). Rows of configs not named in ``--configs``
are kept from the file already there, each with the command, commit and date
that measured it, so one config can be re-measured alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from vdla.bench.baseline import baseline_path, load_baseline
from vdla.bench.suite import run_bench
from vdla.compiler.workloads import RESNET18
from vdla.hw.boards.table import BOARDS
from vdla.hw.config import PRESETS, HwConfig
from vdla.hw.synth import DoesNotFit, estimate, place_and_route, synthesize_rtlil

ROOT = Path(__file__).resolve().parent.parent


def resnet18_cycles(config, jobs: int) -> tuple[int | None, str]:
    """C2–C11 total cycles (x uses) at ``config`` and where the figure came from."""
    wide = HwConfig.DRAM_ADDR_BITS
    if config.dram_addr_bits < wide:
        cycles, source = resnet18_cycles(dataclasses.replace(config, dram_addr_bits=wide), jobs)
        return cycles, f"{source} with {wide}-bit DRAM addresses"
    path = baseline_path(config)
    if path.exists():
        baseline = load_baseline(path)
        if baseline.get("config_hash") == config.hash and baseline.get("resnet18_total_cycles"):
            return baseline["resnet18_total_cycles"], str(path.relative_to(path.parents[2]))
    try:
        result = run_bench(RESNET18, config, "rtl", jobs=jobs)
    except ValueError as error:
        return None, f"RTL run failed: {error}"
    failed = [f"{layer.name}: {layer.error}" for layer in result.layers if layer.error]
    if result.total_cycles is None and failed:
        return None, f"RTL run: {len(failed)} layers failed ({failed[0]})"
    return result.total_cycles, "RTL run"


def board_report(name: str, estimate_only: bool, seed: int):
    """`hw.synth` report of a board preset's board top on its board's part (placed at
    the board's clock, as `place_and_route` places a board preset)."""
    from vdla.hw.boards.top import BOARD_TOP_NAME
    board = next(b for b in BOARDS.values() if b.preset == name)
    if not estimate_only:
        return place_and_route(board.config, board.target, board.device, seed=seed), board
    return synthesize_rtlil(board.rtlil(), BOARD_TOP_NAME, board.target, board.device,
                            top_kind="board"), board


def kept_rows(path: Path, measured: set[str]) -> list[dict]:
    """The rows of ``path`` (an earlier output) for configs not in ``measured``, each
    with its own command, commit and date (from the file where a row has none)."""
    if not path.exists():
        return []
    earlier = json.loads(path.read_text())
    provenance = {key: earlier.get(key) for key in ("command", "commit", "measured")}
    return [{**provenance, **row} for row in earlier.get("rows", [])
            if row["config"] not in measured]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="default,ulx3s,ecpix5,ecpix5-256,icebreaker")
    parser.add_argument("--estimate", action="store_true", help="synthesis only (no Fmax)")
    parser.add_argument("--jobs", type=int, default=2, help="RTL workers for missing cycles")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr's placement seed")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "synth.json"))
    args = parser.parse_args()
    command = "python benchmarks/synth.py " + " ".join(sys.argv[1:])
    rows = []
    cycles_of: dict[str, tuple] = {}   # by hardware (`HwConfig.hash`): presets may share it
    for name in args.configs.split(","):
        config = PRESETS[name]
        began = time.monotonic()
        if any(board.preset == name for board in BOARDS.values()):
            report, board = board_report(name, args.estimate, args.seed)
            where = f"{board.name} board top"
        else:
            where = "core, out of context"
            try:
                report = (estimate(config, "ecp5") if args.estimate
                          else place_and_route(config, "ecp5", seed=args.seed))
            except DoesNotFit as error:   # refused before synthesis: Yosys's counts instead
                print(error, flush=True)
                report, where = estimate(config, "ecp5"), f"{where}, synthesis only (does not fit)"
        if config.hash in cycles_of:
            cycles, source, first = cycles_of[config.hash]
            source = f"{source}, the same hardware as {first}"
        else:
            cycles, source = resnet18_cycles(config, args.jobs)
            cycles_of[config.hash] = (cycles, source, name)
        milliseconds = (cycles / (report.fmax_mhz * 1e3)
                        if cycles and report.fmax_mhz else None)
        rows.append({"config": name, "what": where, "report": report.to_dict(),
                     "resnet18_cycles": cycles, "cycles_from": source,
                     "resnet18_ms_at_fmax": milliseconds,
                     "seconds": round(time.monotonic() - began, 1)})
        print(f"{name}: {report.summary()}; ResNet-18 C2-C11 {cycles} cycles ({source})",
              flush=True)

    print("\n| config | placed | part | LUTs | FFs | block RAMs | DSPs | fits | Fmax (MHz) "
          "| C2–C11 cycles | ms at Fmax |")
    print("|---|---|---|--:|--:|--:|--:|---|--:|--:|--:|")
    for row in rows:
        r = row["report"]
        fmax = f"{r['fmax_mhz']:.1f}" if r["fmax_mhz"] else "—"
        ms = f"{row['resnet18_ms_at_fmax']:.1f}" if row["resnet18_ms_at_fmax"] else "—"
        cycles = f"{row['resnet18_cycles']:,}" if row["resnet18_cycles"] else "—"
        print(f"| `{row['config']}` | {row['what']} | {r['device']} | {r['luts']:,} | "
              f"{r['ffs']:,} | {r['brams']} | {r['dsps']} | {'yes' if r['fits'] else 'no'} | "
              f"{fmax} | {cycles} | {ms} |")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    provenance = {"command": command, "commit": commit, "measured": time.strftime("%Y-%m-%d")}
    rows = [{**row, **provenance} for row in rows]
    result = {**provenance, "python": platform.python_version(),
              "rows": kept_rows(Path(args.output), {row["config"] for row in rows}) + rows}
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
