"""MLPerf Tiny's four models on the board models: accelerator cycles, bit-exact vs fsim.

Usage::

    python benchmarks/mlperf_tiny.py [--boards icebreaker,ulx3s,ecpix5,ecpix5-256]
                                     [--models kws_dscnn,ic_resnet8,vww_mobilenet,ad_autoencoder]
                                     [--sim board-sim] [--board-memory KIND] [--samples 8]
                                     [--seed 0] [--output benchmarks/results/mlperf_tiny.json]

Each model as `benchmarks/models/zoo.py` builds it (seeded weights: the
architectures of MLPerf Tiny's reference models, not their trained weights),
imported at batch 1, compiled for the board preset by `compile_network` with
``--samples`` seeded calibration inputs (`zoo.random_inputs`), every layer the
accelerator takes on the accelerator (the others fall back to the cpu target,
and are counted). One seeded input then runs once on ``--sim`` (``board-sim``:
the whole board top under Verilator, the host driving it over its simulated
UART as it would the board; ``rtl``: the core alone) and once on fsim, and
every tensor of the two runs is compared (``bit_exact_vs_fsim``), and with the
graph's integer reference kernels (``bit_exact_vs_reference``). ``--sim fsim``
gives a record without measured cycles (the cost model's estimate only), for
pairs whose board simulation was not run.

A record holds the accelerator cycles of one inference (the board's cycle
counter summed over the accelerator layers: the UART transfers and the host's
parts left out), each layer's cycles beside the cost model's estimate, the
milliseconds at the board's clock (`hw.boards.table.BOARDS`), and the board
preset's resources and Fmax as ``results/synth.json`` recorded them (place
and route is not run here). Records of other (board, model, sim) triples
already in ``--output`` are kept, so the table can be filled one run at a
time. Prints the table as markdown.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from models import zoo  # noqa: E402

__all__ = ["MODELS", "BOARD_PRESETS", "board_of", "synthesis", "record", "table", "main"]

MODELS = ("kws_dscnn", "ic_resnet8", "vww_mobilenet", "ad_autoencoder")
BOARD_PRESETS = ("icebreaker", "ulx3s", "ecpix5", "ecpix5-256")
SYNTH_RESULTS = ROOT / "benchmarks" / "results" / "synth.json"
OUTPUT = ROOT / "benchmarks" / "results" / "mlperf_tiny.json"


def board_of(preset: str):
    """The `hw.boards.table.Board` whose preset ``preset`` is."""
    from vdla.hw.boards.table import BOARDS
    return next(board for board in BOARDS.values() if board.preset == preset)


def synthesis(preset: str, path: Path = SYNTH_RESULTS) -> dict | None:
    """The preset's resources and Fmax as ``results/synth.json`` recorded them (None if not)."""
    if not path.exists():
        return None
    for row in json.loads(path.read_text())["rows"]:
        if row.get("config") == preset and "report" in row:
            report = row["report"]
            return {"luts": report.get("luts"), "ffs": report.get("ffs"),
                    "brams": report.get("brams"), "dsps": report.get("dsps"),
                    "sprams": report.get("sprams"), "fmax_mhz": report.get("fmax_mhz"),
                    "device": report.get("device"), "placed": row.get("what"),
                    "command": row.get("command"), "measured": row.get("measured")}
    return None


def _command(preset: str, model: str, sim: str, memory: str | None, samples: int,
             seed: int) -> str:
    parts = ["python benchmarks/mlperf_tiny.py", f"--boards {preset}", f"--models {model}",
             f"--sim {sim}"]
    if memory:
        parts.append(f"--board-memory {memory}")
    if samples != 8:
        parts.append(f"--samples {samples}")
    if seed:
        parts.append(f"--seed {seed}")
    return " ".join(parts)


def record(preset: str, name: str, sim: str = "board-sim", memory: str | None = None,
           samples: int = 8, seed: int = 0) -> dict:
    """One (board preset, model) record: compiled, run once on ``sim`` and once on fsim
    (unless ``sim`` is fsim), each tensor compared with fsim's and the integer reference's."""
    from vdla.frontend.onnx import from_bytes
    from vdla.graph.kernels import execute
    from vdla.graph.network import compile_network
    from vdla.hw.config import PRESETS
    board = board_of(preset)
    model = zoo.MODELS[name](seed)
    rec = {"board": board.name, "config": preset, "model": name, "macs": zoo.macs(model),
           "sim": sim, "board_memory": memory if sim.startswith("board") else None,
           "clock_mhz": board.clock_mhz,
           "command": _command(preset, name, sim, memory, samples, seed)}
    began = time.perf_counter()
    graph = from_bytes(model.SerializeToString(), batch=1, source=name)
    network = compile_network(graph, PRESETS[preset], zoo.random_inputs(model, samples, seed + 1))
    rec["compile_seconds"] = round(time.perf_counter() - began, 1)
    rec["placement"] = {place: sum(p == place for p in network.placement.values())
                        for place in ("accel", "cpu", "host")}
    rec["on_cpu"] = {node: network.reason(node) for node, p in network.placement.items()
                     if p == "cpu"}
    inputs = {k: v[:1] for k, v in zoo.random_inputs(model, 1, seed + 2).items()}
    options = {"memory_kind": memory} if memory and sim.startswith("board") else {}
    began = time.perf_counter()
    result = network.run(inputs, sim=sim, keep=True, **options)
    rec["run_seconds"] = round(time.perf_counter() - began, 1)
    # fsim is the timed tiers' reference; the graph's integer kernels are every tier's.
    fsim = None if sim == "fsim" else network.run(inputs, sim="fsim", keep=True).tensors
    rec["bit_exact_vs_fsim"] = None if fsim is None else _same(result.tensors, fsim)
    rec["bit_exact_vs_reference"] = _same(result.tensors, execute(network.graph, inputs,
                                                                   keep=True))
    estimated = network.metadata.get("estimated_cycles", {})
    rec["layers"] = [{"name": row["name"], "op": row["op"], "place": row["place"],
                      "cycles": row["cycles"], "estimated_cycles": estimated.get(row["name"])}
                     for row in result.layers if row["place"] != "host"]
    rec["accel_cycles"] = result.accel_cycles
    rec["estimated_cycles"] = sum(int(v) for v in estimated.values())
    rec["ms_at_board_clock"] = (None if result.accel_cycles is None else
                                round(result.accel_cycles / (board.clock_mhz * 1e3), 3))
    rec["synthesis"] = synthesis(preset)
    return rec


def _same(tensors: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> bool:
    """Whether every tensor of a run equals the reference's of the same name."""
    return all(name in reference and np.array_equal(array, reference[name])
               for name, array in tensors.items())


def _cell(value, spec: str = ",") -> str:
    return "—" if value is None else format(value, spec)


def table(records: list[dict]) -> str:
    """The records as a markdown table, board by board: one row per (board, model), a
    timed run's where there is one, else the estimate's."""
    best: dict[tuple[str, str], dict] = {}
    for rec in records:
        key = (rec["config"], rec["model"])
        if key not in best or (best[key]["accel_cycles"] is None) > (rec["accel_cycles"] is None):
            best[key] = rec
    lines = ["| board (preset, clock) | model | accel / cpu layers | accelerator cycles "
             "| estimated | ms at the board's clock | bit-exact vs fsim | LUTs | FFs "
             "| block RAMs | DSPs | Fmax (MHz) | command |",
             "|---|---|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|---|"]
    order = {preset: i for i, preset in enumerate(BOARD_PRESETS)}
    def place(rec: dict) -> tuple[int, int]:
        return (order.get(rec["config"], len(order)),
                MODELS.index(rec["model"]) if rec["model"] in MODELS else len(MODELS))

    for rec in sorted(best.values(), key=place):
        synth = rec.get("synthesis") or {}
        placement = rec["placement"]
        cycles = ("not timed (fsim)" if rec["accel_cycles"] is None else
                  f"{rec['accel_cycles']:,} ({rec['sim']})")
        exact = {True: "yes", False: "NO", None: "—"}[rec["bit_exact_vs_fsim"]]
        lines.append(
            f"| {rec['board']} (`{rec['config']}`, {rec['clock_mhz']:g} MHz) | {rec['model']} "
            f"| {placement['accel']} / {placement['cpu']} | {cycles} "
            f"| {_cell(rec['estimated_cycles'])} | {_cell(rec['ms_at_board_clock'], '.2f')} "
            f"| {exact} | {_cell(synth.get('luts'))} "
            f"| {_cell(synth.get('ffs'))} | {_cell(synth.get('brams'))} "
            f"| {_cell(synth.get('dsps'))} | {_cell(synth.get('fmax_mhz'), 'g')} "
            f"| `{rec['command']}` |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boards", default=",".join(BOARD_PRESETS),
                        help="board presets, comma-separated")
    parser.add_argument("--models", default=",".join(MODELS), help="models, comma-separated")
    parser.add_argument("--sim", default="board-sim",
                        help="the tier of the accelerator layers: board-sim or rtl (timed), "
                             "fsim (the estimate only)")
    parser.add_argument("--board-memory", default=None,
                        help="board-sim's memory (default: the board's, as its bitstream has it)")
    parser.add_argument("--samples", type=int, default=8, help="calibration samples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    boards, models = args.boards.split(","), args.models.split(",")
    unknown = [b for b in boards if b not in BOARD_PRESETS] + [m for m in models
                                                               if m not in MODELS]
    if unknown:
        parser.error(f"unknown board or model: {', '.join(unknown)}")
    previous = json.loads(args.output.read_text())["records"] if args.output.exists() else []
    records = {(r["config"], r["model"], r["sim"]): r for r in previous}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()
    for preset in boards:
        for name in models:
            rec = record(preset, name, args.sim, args.board_memory, args.samples, args.seed)
            rec.update(commit=commit, measured=time.strftime("%Y-%m-%d"))
            records[(preset, name, args.sim)] = rec
            print(f"{preset} {name} {args.sim}: {rec['accel_cycles']} cycles, "
                  f"bit-exact {rec['bit_exact_vs_fsim']}, {rec['run_seconds']} s", flush=True)
            args.output.write_text(json.dumps(
                {"machine": platform.machine(), "python": platform.python_version(),
                 "records": list(records.values())}, indent=1) + "\n")
    print(table(list(records.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
