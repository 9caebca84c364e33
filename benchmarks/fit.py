"""The fit estimate before synthesis (`hw.synth.fit`) against Yosys, on every shipped preset.

Usage::

    python benchmarks/fit.py [--configs default,tiny,odd,ulx3s,ecpix5-256,icebreaker]

For each preset: the estimate from its core's RTLIL (seconds, no tool) and
Yosys's report of the same core (`hw.synth.estimate`: ``synth_ecp5``, or
``synth_ice40`` for ``icebreaker``; minutes, cached), block RAMs, DSPs, LUT
RAMs and LUTs side by side with the estimate's error in per cent. Prints a
markdown table and writes ``benchmarks/results/fit.json`` (with the command
that made it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from vdla.hw.config import PRESETS
from vdla.hw.synth import PARTS, estimate, estimate_rtlil
from vdla.hw.synth.flow import _core_rtlil

ROOT = Path(__file__).resolve().parent.parent
RESOURCES = ("brams", "dsps", "lutrams", "luts")


def error_percent(estimated: int, actual: int) -> float | None:
    """The estimate's error relative to Yosys's count (None where Yosys has none)."""
    return round(100 * (estimated - actual) / actual, 1) if actual else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="default,tiny,odd,ulx3s,ecpix5-256,icebreaker")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "fit.json"))
    args = parser.parse_args()
    rows = []
    for name in args.configs.split(","):
        config = PRESETS[name]
        target = "ice40" if name == "icebreaker" else "ecp5"
        part = PARTS["iCE40UP5K" if target == "ice40" else "LFE5U-85F"]
        began = time.monotonic()
        fit = estimate_rtlil(_core_rtlil(config), target, part)
        fit_seconds = round(time.monotonic() - began, 1)
        yosys = estimate(config, target, part.name)
        row = {"config": name, "target": target, "fit_seconds": fit_seconds,
               "yosys_seconds": yosys.seconds}
        for key in RESOURCES:
            row[key] = {"estimate": getattr(fit, key), "yosys": getattr(yosys, key),
                        "error_percent": error_percent(getattr(fit, key), getattr(yosys, key))}
        rows.append(row)
        print(f"{name}: " + ", ".join(f"{key} {row[key]['estimate']} vs {row[key]['yosys']}"
                                      for key in RESOURCES), flush=True)

    print("\n| config | family | block RAMs (est. / Yosys) | DSPs | LUT RAMs | LUTs | "
          "LUT error |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for row in rows:
        cells = [f"{row[key]['estimate']} / {row[key]['yosys']}" for key in RESOURCES]
        error = row["luts"]["error_percent"]
        print(f"| `{row['config']}` | {row['target']} | " + " | ".join(cells)
              + f" | {error:+.0f} % |")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    result = {"command": "python benchmarks/fit.py " + " ".join(sys.argv[1:]),
              "commit": commit, "measured": time.strftime("%Y-%m-%d"), "rows": rows}
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
