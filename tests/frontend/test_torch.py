"""PyTorch import: checkpoints refused unread, and modules through the in-memory ONNX export.

The refusal tests always run (no torch needed): a checkpoint given to the ONNX
import or to ``vdla compile``/``vdla quantize`` is refused in one line, by its
suffix or by its first bytes, and never unpickled (the pickles here would make
a folder if they were). The export tests need torch, an optional extra
(skipped without it, as in CI); their reference is the module's own float
output in torch.
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import zipfile

import numpy as np
import pytest

from tests.cli.click_runner import invoke
from vdla.cli.compile import command as compile_command
from vdla.cli.quantize import command as quantize_command
from vdla.frontend import onnx as onnx_frontend
from vdla.graph.errors import GraphError

EXPORT = "export the module with torch.onnx.export or vdla.frontend.torch.load"


class _MakesFolder:
    """Unpickling this makes the folder ``path``: evidence that a file was unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return os.mkdir, (self.path,)


def _pickle(marker) -> bytes:
    return pickle.dumps(_MakesFolder(marker), protocol=2)


def _zip_checkpoint(marker) -> bytes:
    """A checkpoint in torch.save's zip layout, its pickle the folder-making one."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", _pickle(marker))
        archive.writestr("archive/version", "3\n")
    return buffer.getvalue()


@pytest.mark.parametrize("suffix", [".pt", ".pth", ".PT"])
def test_a_checkpoint_named_by_its_suffix_is_refused_unread(tmp_path, suffix):
    marker = tmp_path / "unpickled"
    path = tmp_path / f"model{suffix}"
    path.write_bytes(_zip_checkpoint(marker))
    with pytest.raises(GraphError, match=(
            rf"^{path}: a PyTorch checkpoint \({suffix}\), not an ONNX model; vdla does not "
            rf"unpickle \(it runs code\): {EXPORT}$")):
        onnx_frontend.load(path)
    assert not marker.exists()


@pytest.mark.parametrize("kind, content", [("zip archive", _zip_checkpoint),
                                           ("pickle", _pickle)])
def test_a_checkpoint_under_another_name_is_refused_by_its_first_bytes(tmp_path, kind, content):
    marker = tmp_path / "unpickled"
    path = tmp_path / "model.onnx"
    path.write_bytes(content(marker))
    with pytest.raises(GraphError, match=(
            rf"^{path}: a {kind}, as torch.save writes a checkpoint, not an ONNX model; "
            rf"vdla does not unpickle \(it runs code\): {EXPORT}$")):
        onnx_frontend.load(path)
    with pytest.raises(GraphError, match=rf"^model: a {kind}, as torch.save writes"):
        onnx_frontend.from_bytes(content(marker))
    assert not marker.exists()


def test_a_model_whose_bytes_only_resemble_a_pickle_is_not_called_one():
    # 0x80 followed by a byte that is no pickle protocol: a protobuf that does not parse
    with pytest.raises(GraphError, match=r"^model: not a readable ONNX model"):
        onnx_frontend.from_bytes(b"\x80\x09garbage")


@pytest.mark.parametrize("command, extra", [
    (compile_command, ["-o", "net.vdla"]),
    (quantize_command, ["--calibration", "samples.npy", "-o", "model.q.onnx"])])
def test_the_cli_refuses_a_checkpoint_in_one_line(tmp_path, command, extra):
    marker = tmp_path / "unpickled"
    path = tmp_path / "resnet.pth"
    path.write_bytes(_pickle(marker))
    result = invoke(command, [path, *[tmp_path / a if "." in a else a for a in extra]])
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr == (f"Error: {path}: a PyTorch checkpoint (.pth), not an ONNX model; "
                             f"vdla does not unpickle (it runs code): {EXPORT}\n")
    assert not marker.exists()


def test_without_torch_the_import_names_the_extra_to_install(monkeypatch):
    from vdla.frontend import torch as torch_frontend
    monkeypatch.setitem(sys.modules, "torch", None)   # an import of torch fails
    with pytest.raises(GraphError, match=(r"^importing a PyTorch module needs torch: "
                                          r"pip install 'vdla\[torch\]'$")):
        torch_frontend.load(object(), np.zeros((1, 3, 8, 8), np.float32))


# -- with torch ----------------------------------------------------------------------------


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _small_cnn(torch):
    """A conv, BatchNorm with running statistics away from the identity, pooling and a
    classifier; seeded."""
    nn = torch.nn
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                           nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                           nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    batchnorm = module[1]
    batchnorm.running_mean.uniform_(-0.2, 0.2)
    batchnorm.running_var.uniform_(0.5, 1.5)
    return module.train()   # the export must trace eval mode whatever the module's mode


def _cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_a_module_compiles_and_runs_close_to_torch(torch):
    from vdla.frontend.torch import load
    from vdla.graph.network import compile_network
    from vdla.hw.config import PRESETS
    module = _small_cnn(torch)
    rng = np.random.default_rng(0)
    calibration = rng.standard_normal((16, 3, 16, 16)).astype(np.float32)
    samples = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    graph = load(module, torch.from_numpy(samples), input_names=["image"],
                 output_names=["logits"])
    assert (graph.inputs, graph.outputs) == (["image"], ["logits"])
    assert [node.op for node in graph.nodes] == ["conv", "relu", "maxpool", "conv", "relu",
                                                 "global_avgpool", "flatten", "dense"]
    assert module.training   # left in the mode it was given in
    network = compile_network(graph, PRESETS["default"], {"image": calibration},
                              per_channel=True)
    got = network.run({"image": samples}, sim="fsim").outputs["logits"]
    with torch.no_grad():
        expected = module.eval()(torch.from_numpy(samples)).numpy()
    assert got.shape == expected.shape == (4, 10)
    assert _cosine(got, expected) > 0.98


def test_the_graph_is_the_one_the_exported_file_gives(torch, tmp_path):
    from vdla.frontend.torch import export, load
    module = _small_cnn(torch).eval()
    example = torch.zeros(2, 3, 16, 16)
    path = tmp_path / "model.onnx"
    path.write_bytes(export(module, example))
    from_file, in_memory = onnx_frontend.load(path), load(module, example.numpy())
    assert [(n.op, n.inputs, n.outputs) for n in in_memory.nodes] == \
        [(n.op, n.inputs, n.outputs) for n in from_file.nodes]
    for name, tensor in from_file.tensors.items():
        assert in_memory.tensors[name].shape == tensor.shape
        if tensor.value is not None:
            np.testing.assert_array_equal(in_memory.tensors[name].value, tensor.value)


def test_bad_arguments_and_export_failures_are_one_line(torch, capfd):
    from vdla.frontend.torch import load

    class Eigenvalues(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.eigh(x)[0]   # no ONNX operator computes it

    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return torch.nonzero(x)   # exports, to an operator vdla does not import

    example = torch.zeros(1, 3, 8, 8)
    with pytest.raises(GraphError, match=r"^opset 5: vdla reads opsets 9-21$"):
        load(_small_cnn(torch), example, opset=5)
    with pytest.raises(GraphError, match=r"^module: expected a torch.nn.Module, got function$"):
        load(lambda x: x, example)
    with pytest.raises(GraphError, match=r"^example_inputs\[0\]: expected a tensor or an "
                                         r"array, got str$"):
        load(_small_cnn(torch), "image")
    with pytest.raises(GraphError, match=(
            r"^torch.onnx.export of Eigenvalues failed: UnsupportedOperatorError: Exporting the "
            r"operator 'aten::linalg_eigh' to ONNX opset version 17 is not supported$")):
        load(Eigenvalues(), torch.zeros(1, 4, 4))
    with pytest.raises(GraphError, match=r"^node '/NonZero' \(NonZero\): operator NonZero is "
                                         r"not supported"):
        load(DataDependent(), example)
    # the exporter's own log of the failing graph is not printed beside the error
    assert capfd.readouterr() == ("", "")
