"""What the READMEs say about the repository's files holds: what their commands write is
ignored by git, the files they name are described where they say, and the figures they
quote are those of the results file they cite."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()

# The options through which the README's commands name the files they write.
_WRITES = re.compile(r"(?:-o|--output|--plot|--json-out|--log|--timeline|--roofline|--dump|>) +"
                     r"([\w./-]+)")


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="not a git checkout")
def test_what_the_readmes_commands_write_is_ignored_by_git():
    written = sorted({name.rstrip("/") + ("/x.npy" if name.endswith("/") else "")
                      for name in _WRITES.findall(README)})
    assert "k.c" in written and "in/x.npy" in written
    result = subprocess.run(["git", "check-ignore", "--no-index", *written], cwd=REPO,
                            capture_output=True, text=True)
    assert sorted(result.stdout.split()) == written


def test_the_sample_files_the_readme_runs_are_described_and_are_the_models_data():
    models = REPO / "benchmarks" / "models"
    table = (models / "README.md").read_text()
    for name in sorted(set(re.findall(r"benchmarks/models/(\w+\.(?:npy|onnx))", README))):
        assert re.search(rf"^\| `{re.escape(name)}` \(", table, re.MULTILINE), name
    data = np.load(models / "digits_data.npz")
    calibration = np.load(models / "digits_calibration.npy")
    sample = np.load(models / "digits_sample16.npy")
    assert calibration.dtype == sample.dtype == np.float32
    assert np.array_equal(calibration, data["calibration"]) and calibration.shape == (64, 1, 8, 8)
    assert np.array_equal(sample, data["images"][:16]) and sample.shape == (16, 1, 8, 8)


def test_the_cpu_comparison_quotes_its_results_file():
    """"What it does today" quotes benchmarks/results/compare_cpu.json, with the command
    that wrote it."""
    report = json.loads((REPO / "benchmarks" / "results" / "compare_cpu.json").read_text())
    totals = {name: column["total_seconds"] * 1e3 for name, column in report["columns"].items()}
    today = " ".join(README.split("## What it does today")[1].strip().split("\n\n")[0].split())
    load = report["machine"]["load_average_at_start"]
    assert report["command"].startswith("python benchmarks/compare.py --alone 3")
    assert "`python benchmarks/compare.py --alone 3`, `benchmarks/results/compare_cpu.json`" in today
    assert f"those cycles are {totals['accel']:.1f} ms" in today
    assert f"take {totals['cpu int8']:.1f} ms on two cores" in today
    assert f"{report['ratios']['cpu int8 / ort best int8']:.2f}x onnxruntime's fastest int8" in today
    assert f"is {report['ratios']['accel / cpu int8']:.1f}x slower" in today
    match = round(report["clock_mhz"] * totals["accel"] / totals["cpu int8"], -1)
    assert f"~{match:.0f} MHz to match" in today
    low, high = map(int, re.search(r"load average (\d+)–(\d+)", today).groups())
    assert all(low <= value <= high for value in load)
