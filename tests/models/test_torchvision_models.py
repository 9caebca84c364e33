"""`benchmarks/torchvision_models.py`: a family's record through `models_status`' runner."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from benchmarks import torchvision_models  # noqa: E402

OPTIONS = {"samples": 2, "seed": 0, "config": "default", "size": 8, "max_gmacs": 1e-9,
           "calibration_method": "minmax"}


def _tiny_family(monkeypatch):
    def build(name, side, seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(),
                                   torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                   torch.nn.Linear(8, 4)).eval()
    monkeypatch.setitem(torchvision_models.MODELS, "tiny", ("tiny", {}, None))
    monkeypatch.setattr(torchvision_models, "build", build)


def test_a_family_compiles_per_channel_with_the_calibration_method_asked(monkeypatch):
    _tiny_family(monkeypatch)
    record = torchvision_models.model_record("tiny", OPTIONS)
    assert (record["model"], record["source"], record["input"]) == ("tiny", "torch export",
                                                                    [3, 8, 8])
    assert (record["compiles"], record["refusal"]) == (True, None)
    assert (record["per_channel"], record["calibration_method"]) == (True, "minmax")
    # Conv 6x6x8 outputs of 27 MACs, Linear 8 -> 4
    assert record["macs"] == 6 * 6 * 8 * 27 + 8 * 4 and record["batch"] == 1
    assert record["accel_mac_share"] == 1.0 and record["estimated_cycles"] > 0
    assert record["run"].startswith("not run:")


def test_a_family_that_fails_to_build_records_the_stage(monkeypatch):
    _tiny_family(monkeypatch)

    def broken(name, side, seed):
        raise RuntimeError("no such weights")
    monkeypatch.setattr(torchvision_models, "build", broken)
    record = torchvision_models.model_record("tiny", OPTIONS)
    assert (record["compiles"], record["stage"], record["crash"]) == (
        False, "build", "RuntimeError: no such weights")


def test_the_runners_task_reports_each_stage(monkeypatch):
    """`_task`, what `models_status._bounded` runs in its process (not forked here: torch,
    imported, does not survive a fork, which is why `main` never imports it)."""
    _tiny_family(monkeypatch)
    stages = []
    record = torchvision_models._task(("tiny", torchvision_models.SOURCE, OPTIONS),
                                      stages.append)
    assert stages == ["build", "export", "import", "compile"]
    assert (record["model"], record["compiles"], record["per_channel"]) == ("tiny", True, True)
