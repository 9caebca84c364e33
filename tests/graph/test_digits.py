"""The trained digits model (benchmarks/models) end to end: 360 held-out images, every tier.

Every intermediate tensor equals the integer reference (`graph.kernels.execute`)
on fsim and the cpu target for all 360 images, and on the tiny RTL for 16;
the int8 accuracy stays within 0.5 points of the float model's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vdla.frontend.onnx import load
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network
from vdla.hw.config import PRESETS

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models"


@pytest.fixture(scope="module")
def digits():
    return dict(np.load(MODELS / "digits_data.npz"))


def _compiled(digits, batch, config):
    graph = load(MODELS / "digits.onnx", batch=batch)
    return compile_network(graph, PRESETS[config], {graph.inputs[0]: digits["calibration"]})


def _check(network, images, **options):
    name = network.graph.inputs[0]
    reference = execute(network.graph, {name: images}, keep=True)
    result = network.run({name: images}, keep=True, **options)
    for tensor, array in result.tensors.items():
        np.testing.assert_array_equal(array, reference[tensor], err_msg=tensor)
    return result.outputs[network.graph.outputs[0]], result.repacks


@pytest.mark.slow
def test_all_held_out_images_bit_exact_on_fsim_and_cpu_and_accurate(digits):
    network = _compiled(digits, 360, "default")
    logits, repacks = _check(network, digits["images"], sim="fsim")
    # Packed for conv1, unpacked for the dense (its input flattens a 2x2 image, which
    # reorders the features), packed for it, and the logits unpacked.
    assert repacks == 4
    np.testing.assert_array_equal(_check(network, digits["images"], target="cpu")[0], logits)
    accuracy = (logits.argmax(1) == digits["labels"]).mean()
    assert accuracy >= float(digits["float_accuracy"]) - 0.005
    assert (logits.argmax(1) == digits["float_logits"].argmax(1)).mean() >= 0.99


@pytest.mark.rtl
@pytest.mark.parametrize("config", ["tiny", "default"])
def test_sixteen_images_bit_exact_on_the_rtl(digits, config):
    network = _compiled(digits, 16, config)
    assert _check(network, digits["images"][:16], sim="rtl")[1] == 4
    assert network.graph.outputs == ["logits"]
