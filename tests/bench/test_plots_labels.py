"""The roofline's layer names: readable where the layers crowd near the ridge."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from matplotlib.text import Text

from vdla.bench import plots
from vdla.bench.plots import LABEL_GAP, label_positions, roofline
from vdla.hw.config import PRESETS

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "resnet18.json"


@pytest.mark.parametrize("fractions", [
    [0.30, 0.31, 0.31, 0.32, 0.33, 0.40, 0.48, 0.49, 0.50, 0.51],   # ResNet-18 near the ridge
    [0.95, 0.96, 0.97, 0.98],                                        # crowded at the right edge
    [0.0, 0.01, 0.02],                                               # ... and at the left
    [0.1, 0.5, 0.9],                                                 # nothing to move
    [0.5],
])
def test_label_positions_keep_order_and_gap_inside_the_axes(fractions):
    positions = label_positions(fractions)
    assert len(positions) == len(fractions)
    assert all(b - a >= LABEL_GAP - 1e-12 for a, b in zip(positions, positions[1:]))
    assert 0.03 - 1e-12 <= positions[0] and positions[-1] <= 0.97 + 1e-12
    if all(b - a >= LABEL_GAP for a, b in zip(fractions, fractions[1:])) and \
            0.03 <= fractions[0] and fractions[-1] <= 0.97:
        assert positions == fractions  # well spread points keep their labels above them


def _drawn_figure(monkeypatch, tmp_path, report):
    figures = []
    monkeypatch.setattr(plots, "_save", lambda figure, path, crop=False: figures.append(figure))
    roofline(report, PRESETS["default"], tmp_path / "r.png",
             compare=report["ablation"]["without_latency_hiding"])
    (figure,) = figures
    figure.tight_layout()
    return figure


def test_resnet18_labels_overlap_neither_each_other_nor_points(monkeypatch, tmp_path):
    report = json.loads(RESULTS.read_text())
    figure = _drawn_figure(monkeypatch, tmp_path, report)
    renderer = figure.canvas.get_renderer()
    (axes,) = figure.axes
    names = {layer["name"] for layer in report["layers"]}
    labels = [text for text in axes.texts if text.get_text() in names]
    assert sorted(text.get_text() for text in labels) == sorted(names)
    # The text's own box (an annotation's would include its leader line).
    boxes = [Text.get_window_extent(text, renderer) for text in labels]
    for (a, box_a), (b, box_b) in itertools.combinations(zip(labels, boxes), 2):
        assert not box_a.overlaps(box_b), (a.get_text(), b.get_text())
    others = [Text.get_window_extent(text, renderer) for text in axes.texts if text not in labels]
    markers = [axes.transData.transform(offset) for collection in axes.collections
               for offset in collection.get_offsets()]
    assert len(markers) >= 2 * len(names)
    for text, box in zip(labels, boxes):
        assert not any(box.overlaps(other) for other in others), text.get_text()
        assert not any(box.contains(x, y) for x, y in markers), text.get_text()


def test_pareto_labels_of_near_equal_configurations_do_not_overlap(monkeypatch, tmp_path):
    # Configurations 0.3 % apart in area and time (bus widths that cost nothing)
    report = json.loads((RESULTS.parent / "dse.json").read_text())
    front = [r for r in report["configs"] if r["name"] in report["front"]]
    figures = []
    monkeypatch.setattr(plots, "_save", lambda figure, path, crop=False: figures.append(figure))
    plots.pareto(report["configs"], front, report["metric"], tmp_path / "p.png")
    (figure,) = figures
    figure.tight_layout()
    renderer = figure.canvas.get_renderer()
    labels = figure.axes[0].texts
    assert sorted(text.get_text() for text in labels) == sorted(report["front"])
    boxes = [Text.get_window_extent(text, renderer) for text in labels]
    for (a, box_a), (b, box_b) in itertools.combinations(zip(labels, boxes), 2):
        assert not box_a.overlaps(box_b), (a.get_text(), b.get_text())
