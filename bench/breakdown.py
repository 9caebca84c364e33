"""Where a whole network's time goes: per node and per kind of work, CPU only against CPU +
accelerator, as the TVM paper's figure shows it; and end-to-end latencies against onnxruntime.

`node_times` times each node of a `graph.network.Network` on this machine
(every layer as the cpu target's generated C on one thread, the host's nodes
as numpy, each node's best of ``repeat`` runs) beside the accelerator
layers' cycles at a clock; `by_kind` (`breakdown`) sums them per kind of
work for the two bars that `plot_breakdown` draws stacked; `end_to_end` times whole runs,
each implementation in a block of its own (`bench.onnx_network`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from vdla.graph.placement import LAYER_OPS

__all__ = ["KINDS", "node_times", "breakdown", "by_kind", "plot_breakdown", "end_to_end"]

# Timed runs of the whole network on the CPU; each node's best counts.
REPEAT = 3

# Kinds of work in the breakdown, in stacking order.
KINDS = {"qconv": "conv", "qdense": "dense", "qadd": "residual add", "maxpool": "pooling",
          "qavgpool": "pooling", "qglobal_avgpool": "pooling"}


def node_times(network, images, accel_cycles: dict[str, int], clock_mhz: float,
               repeat: int = REPEAT) -> list[dict]:
    """Per node: name, op, place (the network's), kind of work, ``cpu_ms``, ``cycles`` and
    ``accel_ms``.

    ``cpu_ms``: the node on the CPU (a layer as the cpu target's generated C,
    its own call, one thread, warm; anything else as numpy on the host), its
    best of ``repeat`` runs. ``accel_ms``: for the layers in ``accel_cycles``
    (cycles from a timed run), those cycles at ``clock_mhz``; else None.
    """
    name = network.graph.inputs[0]
    network.run({name: images}, target="cpu", threads=1)  # warm: the C built and loaded
    runs = [network.run({name: images}, target="cpu", threads=1).layers
            for _ in range(repeat)]
    rows = []
    for index, row in enumerate(runs[0]):
        key = "kernel_seconds" if row["place"] == "cpu" else "seconds"
        cycles = accel_cycles.get(row["name"])
        rows.append({"name": row["name"], "op": row["op"],
                     "place": network.placement[row["name"]],
                     "kind": KINDS.get(row["op"], "other host work"),
                     "cpu_ms": round(min(run[index][key] for run in runs) * 1e3, 4),
                     "cycles": cycles,
                     "accel_ms": None if cycles is None else
                     round(cycles / (clock_mhz * 1e3), 4)})
    return rows


def breakdown(network, images, accel_cycles: dict[str, int], clock_mhz: float
              ) -> dict[str, dict[str, float]]:
    """Milliseconds per kind of work, CPU only and with the accelerator (`by_kind` of
    `node_times`)."""
    return by_kind(node_times(network, images, accel_cycles, clock_mhz))


def by_kind(rows: list[dict]) -> dict[str, dict[str, float]]:
    """`node_times` rows summed per kind of work, for two bars.

    ``"cpu only"``: every node's ``cpu_ms`` (layers labelled ``(cpu)``);
    ``"cpu + accelerator"``: the same host work, and the accelerator layers'
    ``accel_ms`` instead of their cpu time.
    """
    shares = {"cpu only": {}, "cpu + accelerator": {}}
    for row in rows:
        label = f"{row['kind']} (cpu)" if row["op"] in LAYER_OPS else row["kind"]
        shares["cpu only"][label] = shares["cpu only"].get(label, 0.0) + row["cpu_ms"]
        ms = row["cpu_ms"]
        if row["accel_ms"] is not None:
            label, ms = f"{row['kind']} (accelerator)", row["accel_ms"]
        shares["cpu + accelerator"][label] = shares["cpu + accelerator"].get(label, 0.0) + ms
    return {bar: {kind: round(ms, 4) for kind, ms in kinds.items()}
            for bar, kinds in shares.items()}


def plot_breakdown(shares: dict[str, dict[str, float]], title: str, path: Path) -> None:
    """Stacked bars, one per configuration, in the manner of the TVM paper's figure."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    kinds = sorted({kind for bars in shares.values() for kind in bars})
    figure, axes = plt.subplots(figsize=(6, 4))
    bottoms = [0.0] * len(shares)
    for kind in kinds:
        heights = [bars.get(kind, 0.0) for bars in shares.values()]
        axes.bar(list(shares), heights, bottom=bottoms, label=kind)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    axes.set_ylabel("time per inference batch (ms)")
    axes.set_title(title)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def end_to_end(network, model_path: Path, image: np.ndarray, calibration: np.ndarray,
               host_and_accel_ms: float) -> dict | str:
    """Whole-network latency, each implementation timed in a block of its own (batch of ``image``).

    vdla on the CPU (`Network.run` with ``target="cpu"``, one thread: generated
    C layers, numpy host work, every copy included); onnxruntime fp32 and its
    own int8 QDQ forms (`bench.onnx_network`, one thread, no spinning); and
    vdla with the accelerator, projected: ``host_and_accel_ms``, its layers'
    cycles at a clock plus the host work measured on the CPU (`breakdown`).
    """
    try:
        from vdla.bench.onnx_network import peer_models, time_block, time_model
    except ImportError:
        return "not measured (pip install onnxruntime: a dependency of vdla)"
    name = network.graph.inputs[0]
    timing, _ = time_block("vdla cpu int8", lambda: network.run({name: image}, target="cpu",
                                                                threads=1), threads=1)
    rows = {"vdla cpu int8": timing.as_dict(),
            "vdla cpu + accelerator (projected)": {"median_ms": round(host_and_accel_ms, 3)}}
    with tempfile.TemporaryDirectory() as folder:
        for label, path in peer_models(model_path, calibration, folder).items():
            rows[label] = time_model(label, path, {name: image})[0].as_dict()
    return rows
