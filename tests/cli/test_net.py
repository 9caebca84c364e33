"""``vdla compile MODEL.onnx``, then ``vdla inspect`` and ``vdla run`` of the network file."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

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
    # The residual add is fused into conv3 (graph.passes.residual): one host node fewer;
    # conv1 reads the input's patches (graph.passes.stem): one more.
    assert summary["placement"] == {"accel": 3, "cpu": 1, "host": 7}
    assert summary["inputs"] == {"input": "float32 (2, 1, 8, 8)"}
    result = invoke(cli, ["compile", tmp_path / "m.onnx", "--calibration", tmp_path / "cal.npy",
                          "--batch", 2, "--on-cpu", "fc", "--no-fuse-residuals",
                          "-o", tmp_path / "unfused.vdla", "--json"])
    assert json.loads(result.stdout)["placement"] == {"accel": 3, "cpu": 1, "host": 8}

    result = invoke(cli, ["inspect", net])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[2:]}
    assert rows["conv1"][1:5] == ["qconv", "2x9x8x8", "2x8x8x8", "accel"]
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


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    """Network files of the test model on tiny: every layer on the accelerator (``accel``),
    and conv2 as the cpu target's C (``cpu``); an input for them, and the folder."""
    from vdla.frontend.onnx import from_bytes
    from vdla.graph.network import compile_network
    from vdla.graph.network_file import save
    from vdla.hw.config import PRESETS
    folder = tmp_path_factory.mktemp("nets")
    graph = from_bytes(residual_cnn(seed=3).SerializeToString(), batch=2)
    files = {name: save(compile_network(graph, PRESETS["tiny"], {"input": images(16)},
                                        on_cpu=on_cpu), folder / f"{name}.vdla")
             for name, on_cpu in (("accel", ()), ("cpu", ["conv2"]))}
    np.save(folder / "x.npy", images(2, seed=9))
    return files, folder


def _expected(net, folder):
    network = load_network(net)
    return execute(network.graph, {"input": np.load(folder / "x.npy")})["probs"]


@pytest.mark.parametrize("extra, message", [
    (["--board-memory", "litedram-sdram"], "--board-memory does not apply to --sim fsim (it "
                                           "applies to --sim board-sim)"),
    (["--port", "/dev/ttyUSB1"], "--port does not apply to --sim fsim (it applies to --sim "
                                 "board)"),
    (["--threads", "3"], "--threads does not apply to --sim fsim (it applies to --target cpu)"),
    (["--sim", "rtl", "--trace", "w.fst"], "--trace records the run of one program; {net} is "
                                           "a network of 11 nodes"),
    (["--target", "cpu", "--sim", "rtl"], "--sim rtl does not apply to {net}: --target cpu "
                                          "runs every layer as C"),
])
def test_network_run_takes_the_options_its_backends_declare(nets, extra, message):
    files, folder = nets
    result = invoke(cli, ["run", files["accel"], "--input", f"input={folder / 'x.npy'}",
                          *extra])
    assert result.exit_code == 1
    assert result.stderr.strip() == "Error: " + message.format(net=files["accel"])


def test_network_run_passes_the_work_limit_to_fsim(nets):
    files, folder = nets
    result = invoke(cli, ["run", files["accel"], "--input", f"input={folder / 'x.npy'}",
                          "--work-limit", 5])
    assert result.exit_code == 1
    assert re.fullmatch(r"Error: the program asks for [\d,]+ micro-op executions, more than "
                        r"the limit of 5 \(GEMM/ALU loop nests too large\?\)",
                        result.stderr.strip()), result.stderr


def test_threads_reach_the_layers_that_run_as_c(nets, tmp_path):
    files, folder = nets
    for net, extra in ((files["cpu"], []), (files["accel"], ["--target", "cpu"])):
        result = invoke(cli, ["run", net, "--input", f"input={folder / 'x.npy'}", "--threads",
                              1, "--output", tmp_path / "y.npy", *extra])
        assert result.exit_code == 0, result.output
        np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), _expected(net, folder))


def test_network_output_is_written_at_the_path_named(nets, tmp_path):
    files, folder = nets
    out = tmp_path / "out.bin"
    result = invoke(cli, ["run", files["accel"], "--input", f"input={folder / 'x.npy'}",
                          "--output", out])
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(out), _expected(files["accel"], folder))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]
    assert result.stdout.splitlines()[-1] == f"output probs: float32 (2, 10) -> {out}"
    # A link to a special file: written through, as the single-program path does.
    link = tmp_path / "null"
    link.symlink_to(os.devnull)
    result = invoke(cli, ["run", files["accel"], "--input", f"input={folder / 'x.npy'}",
                          "--output", link, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["outputs"]["probs"] == {
        "shape": [2, 10], "dtype": "float32", "file": str(link)}
    assert link.is_symlink() and Path(os.devnull).is_char_device()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "out.bin"]


def test_a_failed_network_output_write_leaves_the_old_file(nets, tmp_path):
    """Under a file-size limit the write fails: one line, and the file as it was."""
    files, folder = nets
    out = tmp_path / "y.npy"
    out.write_bytes(b"old")

    def limit():    # the output's 128-byte header and 80 floats do not fit 200 bytes
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
    process = subprocess.run(
        [sys.executable, "-m", "vdla", "run", str(files["accel"]), "--input",
         f"input={folder / 'x.npy'}", "--output", str(out)], capture_output=True, text=True,
        preexec_fn=limit, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert process.returncode == 1, process.stderr
    assert process.stderr.strip() == f"Error: output 'probs': cannot write {out} (File too large)"
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.npy"]


def test_network_inputs_are_checked_by_name_before_any_is_read(nets, tmp_path):
    files, folder = nets
    # /dev/zero would be read without end: an unknown name is refused first.
    result = invoke(cli, ["run", files["accel"], "--input", f"input={folder / 'x.npy'}",
                          "--input", "extra=/dev/zero"])
    assert result.stderr.strip() == ("Error: unknown input 'extra': the network's inputs are "
                                     "input")
    # A known input is read only as far as its header, when that announces another shape.
    wrong = tmp_path / "wrong.npy"
    with open(wrong, "wb") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "<f4", "fortran_order": False, "shape": (5000, 1, 8, 8)})
    result = invoke(cli, ["run", files["accel"], "--input", f"input={wrong}"])
    assert result.stderr.strip() == (f"Error: input 'input': expected float32 (2, 1, 8, 8), "
                                     f"got float32 (5000, 1, 8, 8) ({wrong})")
    # Any float of the input's shape is taken (the network converts it).
    np.save(tmp_path / "x64.npy", np.load(folder / "x.npy").astype(np.float64))
    result = invoke(cli, ["run", files["accel"], "--input", f"input={tmp_path / 'x64.npy'}",
                          "--output", tmp_path / "y.npy"])
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), _expected(files["accel"], folder))


def test_every_missing_network_input_is_named(tmp_path):
    from vdla.graph.ir import Graph, Tensor
    from vdla.graph.network import Network
    from vdla.graph.network_file import save
    from vdla.hw.config import PRESETS
    graph = Graph({name: Tensor(name, (2, 3), np.float32) for name in "ab"}, [], ["a", "b"],
                  ["a"])
    net = save(Network(graph, {}, {}, PRESETS["tiny"]), tmp_path / "two.vdla")
    result = invoke(cli, ["run", net])
    assert result.stderr.strip() == ("Error: missing inputs 'a' and 'b': expected float32 "
                                     "(2, 3) and float32 (2, 3)")


def test_layer_times_leave_the_build_out(nets, monkeypatch):
    """The cpu layer's C is built before any node is timed, and the build reported apart."""
    from vdla.compiler.cpu import kernel
    files, folder = nets
    build = kernel.CpuKernel.__init__

    def slow_build(self, *args, **options):
        time.sleep(0.5)
        build(self, *args, **options)
    monkeypatch.setattr(kernel.CpuKernel, "__init__", slow_build)
    result = invoke(cli, ["run", files["cpu"], "--input", f"input={folder / 'x.npy'}",
                          "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows = {row["name"]: row for row in report["layers"]}
    assert rows["conv2"]["place"] == "cpu" and rows["conv2"]["seconds"] < 0.5
    assert report["build_seconds"] >= 0.5
    text = invoke(cli, ["run", files["cpu"], "--input", f"input={folder / 'x.npy'}"]).stdout
    assert re.search(r"^built before the run \(not in ms\): \d+\.\d{3} ms$",
                                   text, re.M)
