"""``vdla bench-net``: a network's time per node and per kind of work, CPU only and with the
accelerator, printed and written as JSON."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from tests.cli.click_runner import invoke
from tests.graph.models import images, residual_cnn
from vdla.cli.main import cli
from vdla.graph.network_file import load as load_network


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench_net")
    onnx.save(residual_cnn(seed=8), folder / "m.onnx")
    np.save(folder / "cal.npy", images(16))
    np.save(folder / "x.npy", images(2, seed=4))
    return folder


def test_breakdown_of_an_onnx_model(model, tmp_path):
    out, plot = tmp_path / "r.json", tmp_path / "r.png"
    result = invoke(cli, ["bench-net", model / "m.onnx", "--calibration", model / "cal.npy",
                          "--input", model / "x.npy", "--batch", 2, "--sim", "fsim",
                          "--clock-mhz", 50, "-o", out, "--plot", plot])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["bit_exact"] and report["cycles"] == "estimated" and report["batch"] == 2
    rows = {row["name"]: row for row in report["nodes"]}
    # The residual add is fused into conv3 (graph.passes.residual).
    assert rows["conv1"]["place"] == "accel" and "residual" not in rows
    layers = [row for row in report["nodes"] if row["op"] in ("qconv", "qdense")]
    assert all(row["accel_ms"] == round(row["cycles"] / 50e3, 4) for row in layers)
    shares = report["breakdown_ms"]
    # The host's work is in both bars; the layers' cpu time in one, their cycles in the other.
    assert shares["cpu only"]["pooling"] == shares["cpu + accelerator"]["pooling"]
    assert "residual add" not in shares["cpu only"]
    assert shares["cpu + accelerator"]["conv (accelerator)"] == pytest.approx(
        sum(row["accel_ms"] for row in layers if row["op"] == "qconv"), abs=1e-3)
    assert report["total_ms"]["cpu only"] == pytest.approx(
        sum(row["cpu_ms"] for row in report["nodes"]), abs=1e-3)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = result.stdout.splitlines()
    assert "50 MHz (--clock-mhz); estimated cycles; outputs bit-exact" in lines[0]
    # The files written, named after the table.
    assert lines[-3].split()[0] == "total"
    assert lines[-2:] == [f"results: {out}", f"plot: {plot}"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["r.json", "r.png"]


def test_the_default_results_file_is_named(model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke(cli, ["bench-net", model / "m.onnx", "--calibration", model / "cal.npy",
                          "--input", model / "x.npy", "--batch", 2, "--sim", "fsim",
                          "--clock-mhz", 50, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["files"] == {"results": "m.onnx.bench.json"}
    assert json.loads((tmp_path / "m.onnx.bench.json").read_text())["batch"] == 2


def test_network_file_input_and_errors(model, tmp_path):
    net = tmp_path / "net.vdla"
    assert invoke(cli, ["compile", model / "m.onnx", "--calibration", model / "cal.npy",
                        "--batch", 2, "-o", net]).exit_code == 0
    assert load_network(net).graph.inputs == ["input"]
    result = invoke(cli, ["bench-net", net, "--input", model / "x.npy", "--sim", "fsim",
                          "--clock-mhz", 100, "-o", tmp_path / "r.json", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["clock_mhz"] == 100
    result = invoke(cli, ["bench-net", net, "--sim", "fsim", "--clock-mhz", 100,
                          "-o", tmp_path / "r.json"])
    assert result.exit_code != 0
    assert result.stderr.strip() == ("Error: give the inputs: --input FILE.npy with a batch of 2 "
                                     "(or --calibration with at least that many samples)")
    result = invoke(cli, ["bench-net", net, "--input", model / "x.npy", "--sim", "fsim",
                          "-o", tmp_path / "r.json"])
    assert result.stderr.strip() == ("Error: cycles become time at a clock: pass --clock-mhz "
                                     "(no Fmax is known for config 'default'; vdla hw synth "
                                     "finds it)")
    np.save(tmp_path / "bad.npy", images(3))
    result = invoke(cli, ["bench-net", net, "--input", tmp_path / "bad.npy", "--sim", "fsim",
                          "--clock-mhz", 100, "-o", tmp_path / "r.json"])
    assert result.stderr.strip() == ("Error: input 'input': expected float32 (2, 1, 8, 8), "
                                     f"got float32 (3, 1, 8, 8) ({tmp_path / 'bad.npy'})")
    result = invoke(cli, ["bench-net", net, "--input", model / "x.npy", "--sim", "fsim",
                          "--clock-mhz", 100, "--plot", tmp_path / "no" / "p.png"])
    assert result.stderr.strip() == (f"Error: --plot {tmp_path / 'no' / 'p.png'}: the folder "
                                     f"{tmp_path / 'no'} does not exist")


@pytest.mark.rtl
def test_rtl_cycles_are_measured(model, tmp_path):
    out = tmp_path / "r.json"
    result = invoke(cli, ["bench-net", model / "m.onnx", "--calibration", model / "cal.npy",
                          "--batch", 1, "--config", "tiny", "--clock-mhz", 25, "-o", out])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["cycles"] == "measured" and report["bit_exact"]
    assert all(row["cycles"] > 0 for row in report["nodes"] if row["place"] == "accel")


def test_node_names_from_the_model_are_shown_not_obeyed(model, tmp_path):
    evil = residual_cnn(seed=8)
    next(node for node in evil.graph.node if node.name == "conv1").name = "conv\x1b[2J1"
    onnx.save(evil, tmp_path / "evil.onnx")
    result = invoke(cli, ["bench-net", tmp_path / "evil.onnx", "--calibration",
                          model / "cal.npy", "--input", model / "x.npy", "--batch", 2, "--sim",
                          "fsim", "--clock-mhz", 50, "-o", tmp_path / "r.json"])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout
    assert any(line.startswith("conv\\x1b[2J1 ") for line in result.stdout.splitlines())
