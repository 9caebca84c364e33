"""``vdla compile MODEL.onnx``, then ``vdla inspect`` and ``vdla run`` of the network file."""

from __future__ import annotations

import json

import numpy as np
import onnx

from tests.cli.click_runner import invoke
from tests.graph.models import images, residual_cnn
from vdla.cli.main import cli
from vdla.frontend.onnx import load
from vdla.graph.kernels import execute
from vdla.graph.network_file import load as load_network


def test_compile_inspect_run(tmp_path):
    onnx.save(residual_cnn(seed=8), tmp_path / "m.onnx")
    np.save(tmp_path / "cal.npy", images(32))
    x = images(2, seed=4)
    np.save(tmp_path / "x.npy", x)
    net = tmp_path / "net.vdla"
    result = invoke(cli, ["compile", tmp_path / "m.onnx", "--calibration", tmp_path / "cal.npy",
                          "--batch", 2, "--on-cpu", "fc", "-o", net, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    # The residual add is fused into conv3 (graph.passes.residual): one host node fewer.
    assert summary["placement"] == {"accel": 3, "cpu": 1, "host": 6}
    assert summary["inputs"] == {"input": "float32 (2, 1, 8, 8)"}
    result = invoke(cli, ["compile", tmp_path / "m.onnx", "--calibration", tmp_path / "cal.npy",
                          "--batch", 2, "--on-cpu", "fc", "--no-fuse-residuals",
                          "-o", tmp_path / "unfused.vdla", "--json"])
    assert json.loads(result.stdout)["placement"] == {"accel": 3, "cpu": 1, "host": 7}

    result = invoke(cli, ["inspect", net])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[2:]}
    assert rows["conv1"][1:5] == ["qconv", "2x1x8x8", "2x8x8x8", "accel"]
    assert rows["fc"][4] == "cpu" and "residual" not in rows
    # The fused conv reads its data and the residual.
    assert rows["conv3"][1:6] == ["qconv", "2x8x4x4", "2x8x4x4", "2x8x4x4", "accel"]
    arena = load_network(net).arena()
    assert result.stdout.splitlines()[-1] == (
        f"DRAM arena: {arena.size:,} bytes ({arena.code_bytes:,} code and constants; the "
        f"layers' own images: {arena.images_bytes:,})")

    result = invoke(cli, ["run", net, "--input", f"input={tmp_path / 'x.npy'}", "--output",
                          tmp_path / "y.npy", "--json"])
    assert result.exit_code == 0, result.output
    network = load_network(net)
    expected = execute(network.graph, {"input": x})["probs"]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)
    assert [row["place"] for row in json.loads(result.stdout)["layers"]].count("accel") == 3
    # The float model, for scale: the int8 network's probabilities are close to it.
    floating = execute(load(tmp_path / "m.onnx", batch=2), {"input": x})["probs"]
    assert np.abs(expected - floating).max() < 0.05


def net_file(tmp_path):
    """A compiled network file of the test model."""
    from tests.graph.models import residual_cnn as model
    from vdla.frontend.onnx import from_bytes
    from vdla.graph.network import compile_network
    from vdla.graph.network_file import save
    from vdla.hw.config import PRESETS
    network = compile_network(from_bytes(model().SerializeToString()), PRESETS["tiny"],
                              {"input": images(4)})
    return save(network, tmp_path / "t.vdla")


def test_compile_errors_are_one_line(tmp_path):
    onnx.save(residual_cnn(), tmp_path / "m.onnx")
    result = invoke(cli, ["compile", tmp_path / "m.onnx", "-o", tmp_path / "n.vdla"])
    assert result.exit_code == 1
    assert result.output.strip() == ("Error: tensor 'input' has no scale: calibrate with sample "
                                     "inputs (--calibration) or give a QDQ model")
    result = invoke(cli, ["run", net_file(tmp_path), "--target", "gpu"])
    assert result.output.strip() == ("Error: --target gpu: a network runs on the accelerator "
                                     "(--sim ...) or with --target cpu")
    np.save(tmp_path / "cal.npy", images(4, size=4))
    result = invoke(cli, ["compile", tmp_path / "m.onnx", "--calibration", tmp_path / "cal.npy",
                          "-o", tmp_path / "n.vdla"])
    assert result.output.strip() == ("Error: calibration 'input': expected float samples of "
                                     "shape (count, 1, 8, 8), got float32 (4, 1, 4, 4)")
    # A header announcing 4 GiB is refused before anything is read (the file has no data).
    huge = tmp_path / "huge.npy"
    with open(huge, "wb") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "<f4", "fortran_order": False, "shape": (1 << 28, 1, 2, 2)})
    result = invoke(cli, ["compile", tmp_path / "m.onnx", "--calibration", huge,
                          "-o", tmp_path / "n.vdla"])
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error: --calibration: ")
    assert result.output.strip().endswith("more than the 1073741824-byte limit")


def test_quantize_writes_a_qdq_model_that_compiles_without_calibration(tmp_path):
    onnx.save(residual_cnn(seed=8), tmp_path / "m.onnx")
    np.save(tmp_path / "cal.npy", images(32))
    result = invoke(cli, ["quantize", tmp_path / "m.onnx", "--calibration", tmp_path / "cal.npy",
                          "-o", tmp_path / "q.onnx", "--json"])
    assert result.exit_code == 0, result.output
    shifts = json.loads(result.stdout)["shifts"]
    # The residual add is fused into conv3 (graph.passes.residual): no shift of its own.
    assert sorted(shifts) == ["conv1", "conv2", "conv3", "fc"]
    result = invoke(cli, ["compile", tmp_path / "q.onnx", "-o", tmp_path / "q.vdla"])
    assert result.exit_code == 0, result.output
    network = load_network(tmp_path / "q.vdla")
    assert {n.name: n.attrs["shift"] for n in network.graph.nodes if "shift" in n.attrs} == shifts
