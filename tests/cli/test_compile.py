"""``vdla compile``: files, summaries and one-line errors."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.cli.main import cli
from vdla.compiler import Conv2d
from vdla.runtime.runner import AccelRunner
from vdla.runtime.program_file import load


def invoke(*args):
    return CliRunner().invoke(cli, ["compile", *map(str, args)])


def test_conv2d_writes_a_runnable_program(tmp_path):
    out = tmp_path / "layer.vdla"
    result = invoke("conv2d", "--batch", 2, "--in-channels", 5, "--out-channels", 7, "--height", 9,
                    "--width", 8, "--kernel", "3x1", "--stride", 2, "--pad", 0, "--bias",
                    "--shift", 3, "--relu", "--config", "tiny", "-o", out)
    assert result.exit_code == 0, result.output
    assert "instructions:" in result.output and "uops:" in result.output
    program = load(out)
    op = Conv2d(2, 5, 7, 9, 8, kernel=(3, 1), stride=2, bias=True, shift=3, relu=True)
    inputs = op.random_inputs(np.random.default_rng(0))
    outputs = AccelRunner(program.config).run(program, inputs).outputs
    assert np.array_equal(outputs["out"], op.reference(**inputs))


def test_groups_dilation_and_asymmetric_padding_options(tmp_path):
    out = tmp_path / "general.vdla"
    result = invoke("conv2d", "--in-channels", 8, "--out-channels", 16, "--height", 9, "--width",
                    8, "--kernel", "3x2", "--stride", "1x2", "--pad", "0,1,2,0", "--dilation",
                    "2x1", "--groups", 2, "--bias", "--shift", 4, "--config", "tiny", "-o", out)
    assert result.exit_code == 0, result.output
    program = load(out)
    op = Conv2d(1, 8, 16, 9, 8, kernel=(3, 2), stride=(1, 2), padding=(0, 1, 2, 0),
                dilation=(2, 1), groups=2, bias=True, shift=4)
    assert program.metadata["op"] == op.to_dict()
    inputs = op.random_inputs(np.random.default_rng(1))
    outputs = AccelRunner(program.config).run(program, inputs).outputs
    assert np.array_equal(outputs["out"], op.reference(**inputs))


def test_dense_json_summary_and_dump(tmp_path):
    result = invoke("dense", "--batch", 4, "--in-features", 30, "--out-features", 9, "--json",
                    "--config", "tiny", "--dump", tmp_path / "d.txt", "-o", tmp_path / "d.vdla")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["instructions"] == sum(summary["per_module"].values())
    assert (tmp_path / "d.txt").read_text().count("FINISH") == 1


def test_options_reach_the_compiler(tmp_path):
    args = ["conv2d", "--in-channels", 16, "--out-channels", 16, "--height", 14, "--width", 14,
            "--pad", 1, "--json", "-o", tmp_path / "x.vdla"]
    three = json.loads(invoke(*args, "--virtual-threads", 3).output)
    serial = json.loads(invoke(*args, "--no-latency-hiding").output)
    assert three["schedule"]["virtual_threads"] == 3
    assert serial["schedule"]["virtual_threads"] == 1
    assert serial["schedule"]["latency_hiding"] is False


def test_schedule_and_config_files(tmp_path):
    schedule = tmp_path / "s.json"
    schedule.write_text(json.dumps({"tile_h": 2, "tile_w": 4, "tile_k": 1, "tile_c": 1,
                                    "virtual_threads": 2, "loop_order": "kbhw"}))
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"batch": 1, "block_in": 8, "block_out": 8,
                                  "inp_buffer_bytes": 4096, "wgt_buffer_bytes": 8192,
                                  "acc_buffer_bytes": 8192, "name": "mine"}))
    result = invoke("conv2d", "--in-channels", 8, "--out-channels", 8, "--height", 6, "--width", 6,
                    "--pad", 1, "--schedule", schedule, "--config", config, "--json",
                    "-o", tmp_path / "x.vdla")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["config"] == "mine" and summary["schedule"]["loop_order"] == "kbhw"


@pytest.mark.parametrize("args, message", [
    (["conv2d", "--in-channels", 4, "--out-channels", 4, "--height", 4, "--width", 4,
      "--kernel", 7], "more than the padded input height 4 + 0 + 0"),
    (["conv2d", "--in-channels", 4, "--out-channels", 4, "--height", 40, "--width", 40,
      "--kernel", 33, "--pad", 16], "pad fields (at most 15); use --target cpu"),
    (["conv2d", "--in-channels", 4, "--out-channels", 4, "--height", 4, "--width", 4,
      "--kernel", "3y3"], "--kernel '3y3': expected N or HxW (e.g. 3 or 3x1)"),
    (["conv2d", "--in-channels", 4, "--out-channels", 4, "--height", 4, "--width", 4,
      "--pad", "1,2"], "--pad '1,2': expected P, PHxPW or T,L,B,R with integers >= 0"),
    (["conv2d", "--in-channels", 4, "--out-channels", 4, "--height", 4, "--width", 4,
      "--dilation", "0"], "--dilation '0': expected values >= 1"),
    (["conv2d", "--in-channels", 4, "--out-channels", 4, "--height", 4, "--width", 4,
      "--stride", "2x"], "--stride '2x': expected N or HxW (e.g. 2 or 2x1)"),
    (["conv2d", "--in-channels", 6, "--out-channels", 4, "--height", 4, "--width", 4,
      "--groups", 4], "groups 4 must divide in_channels 6 and out_channels 4"),
    (["dense", "--in-features", 4, "--out-features", 4, "--config", "nope"], "no such preset"),
    (["conv2d", "--in-channels", 64, "--out-channels", 64, "--height", 56, "--width", 56,
      "--pad", 1, "--schedule", "SCHEDULE"], "does not fit the inp buffer"),
    (["dense", "--in-features", 4, "--out-features", 4, "--schedule", "MISSING"],
     "cannot read schedule"),
])
def test_errors_are_one_line(tmp_path, args, message):
    schedule = tmp_path / "big.json"
    schedule.write_text(json.dumps({"tile_h": 56, "tile_w": 56, "tile_c": 4}))
    args = [str(schedule) if a == "SCHEDULE" else str(tmp_path / "no.json") if a == "MISSING"
            else a for a in args]
    result = invoke(*args, "-o", tmp_path / "x.vdla")
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "x.vdla").exists()


def test_a_conv_with_a_residual_from_the_command_line(tmp_path):
    result = CliRunner().invoke(cli, [
        "compile", "conv2d", "--in-channels", "8", "--out-channels", "8", "--height", "6",
        "--width", "6", "--pad", "1", "--bias", "--shift", "9", "--residual-shift", "8",
        "--config", "tiny", "-o", str(tmp_path / "r.vdla")])
    assert result.exit_code == 0, result.output
    assert "+bias +res<<8 >>9" in result.output
    program = load(tmp_path / "r.vdla")
    assert [t.name for t in program.inputs] == ["data", "weight", "bias", "residual"]
    result = CliRunner().invoke(cli, [
        "compile", "conv2d", "--in-channels", "8", "--out-channels", "8", "--height", "6",
        "--width", "6", "--residual-shift", "25", "-o", str(tmp_path / "bad.vdla")])
    assert result.exit_code == 2 and "25 is not in the range 0<=x<=24" in result.output


# -- a model: hostile files are refused in one line, outputs are written whole -------------

def _hostile_models(folder):
    """Models that crashed, hung or compiled wrongly before, by name, and their calibration."""
    import onnx
    from onnx import TensorProto, helper

    from tests.graph.models import initializer, model_bytes
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)

    def conv(name, w, bias=None):
        inputs = ["x", "w"] + ([] if bias is None else ["b"])
        inits = [initializer("w", w)] + ([] if bias is None else [initializer("b", bias)])
        (folder / name).write_bytes(model_bytes(
            [helper.make_node("Conv", inputs, ["y"], name="conv")],
            [("x", TensorProto.FLOAT, [1, 2, 6, 6])], [("y", TensorProto.FLOAT, None)], inits))

    conv("m.onnx", weight)
    conv("nan.onnx", weight, np.array([0, np.nan, 0], np.float32))
    conv("huge.onnx", weight * 1e30)
    external = onnx.load_from_string((folder / "m.onnx").read_bytes())
    proto = external.graph.initializer[0]
    proto.ClearField("raw_data")
    proto.data_location = TensorProto.EXTERNAL
    proto.external_data.add(key="location", value="w\0.bin")
    (folder / "nul.onnx").write_bytes(external.SerializeToString())
    proto.external_data[0].value = "w.bin"
    proto.external_data.add(key="offset", value=str(2 ** 63))
    (folder / "offset.onnx").write_bytes(external.SerializeToString())
    (folder / "w.bin").write_bytes(weight.tobytes())
    np.save(folder / "cal.npy", rng.standard_normal((4, 2, 6, 6)).astype(np.float32))
    np.save(folder / "zero.npy", np.zeros((4, 2, 6, 6), np.float32))


@pytest.mark.filterwarnings("error")    # a numpy RuntimeWarning would be an exit 70 here
@pytest.mark.parametrize("model, args, message", [
    ("nan.onnx", [], "node 'conv' (Conv): its constant input 'b' holds NaN values; vdla needs "
                     "finite weights, biases and bounds"),
    ("huge.onnx", [], "tensor 'y': its largest magnitude "),
    ("m.onnx", ["--calibration", "zero.npy"], "graph input 'x' is zero in every calibration "
                                              "sample"),
    ("nul.onnx", [], "initializer 'w': external data location 'w\\x00.bin' holds a NUL byte"),
    ("offset.onnx", [], "initializer 'w': external data file 'w.bin' is truncated (216 bytes; "
                        "216 needed at offset 9223372036854775808)"),
    ("m.onnx", ["--batch", 2 ** 63], "batch 9223372036854775808: more than vdla's limit of "
                                     "268,435,456"),
])
@pytest.mark.parametrize("command", ["compile", "quantize"])
def test_hostile_models_are_refused_in_one_line(tmp_path, command, model, args, message):
    from tests.cli.click_runner import invoke as invoke_cli
    _hostile_models(tmp_path)
    if "--calibration" not in args:
        args = [*args, "--calibration", "cal.npy"]
    args = [tmp_path / a if str(a).endswith((".npy", ".onnx")) else a for a in args]
    result = invoke_cli(cli, [command, tmp_path / model, *args, "-o", tmp_path / "out.bin"])
    assert result.exit_code == 1, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: "), result.stderr
    assert message in result.stderr
    assert not (tmp_path / "out.bin").exists()


@pytest.mark.parametrize("command, message", [
    ("compile", "Error: {out}: cannot write (File too large)"),
    ("quantize", "Error: -o: cannot write {out} (File too large)"),
])
def test_a_failed_model_output_write_keeps_the_old_file(tmp_path, command, message):
    """Under a file-size limit the network (or QDQ model) does not fit: one line naming the
    file, which keeps its old contents, and no temporary file left beside it."""
    import os
    import resource
    import subprocess
    import sys
    _hostile_models(tmp_path)
    out = tmp_path / "old.out"
    out.write_bytes(b"old")

    def limit():    # both outputs are larger than 300 bytes
        resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))
    process = subprocess.run(
        [sys.executable, "-m", "vdla", command, str(tmp_path / "m.onnx"), "--calibration",
         str(tmp_path / "cal.npy"), "-o", str(out)], capture_output=True, text=True,
        preexec_fn=limit, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, timeout=300)
    assert process.returncode == 1, process.stderr
    assert process.stderr.strip() == message.format(out=out)
    assert out.read_bytes() == b"old"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".old.out")]
