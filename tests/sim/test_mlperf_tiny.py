"""An MLPerf Tiny model whole on the simulated iCEBreaker, bit-exact, with its cycles."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.models.zoo import ad_autoencoder, random_inputs
from vdla.frontend.onnx import from_bytes
from vdla.graph.kernels import execute
from vdla.graph.network import compile_network
from vdla.hw.config import PRESETS

pytestmark = [pytest.mark.slow, pytest.mark.rtl]

# The board's cycle counter over the ten dense layers of one inference: a
# changed count is a changed schedule or core, and benchmarks/README.md's
# "MLPerf Tiny" table says what it was.
AUTOENCODER_ICEBREAKER_CYCLES = 144_605


def test_the_autoencoder_runs_on_the_icebreaker_board_bit_exact():
    """ad_autoencoder, every dense layer on the accelerator, over the simulated UART."""
    model = ad_autoencoder(seed=0)
    graph = from_bytes(model.SerializeToString(), batch=1, source="ad_autoencoder")
    network = compile_network(graph, PRESETS["icebreaker"], random_inputs(model, 8, seed=1))
    layers = [name for name, place in network.placement.items() if place != "host"]
    assert len(layers) == 10 and {network.placement[n] for n in layers} == {"accel"}
    x = random_inputs(model, 1, seed=2)["input"]
    board = network.run({"input": x}, sim="board-sim", keep=True)
    fsim = network.run({"input": x}, sim="fsim", keep=True)
    reference = execute(network.graph, {"input": x}, keep=True)
    assert board.tensors.keys() == fsim.tensors.keys()
    for name, array in board.tensors.items():
        np.testing.assert_array_equal(array, fsim.tensors[name], err_msg=name)
        np.testing.assert_array_equal(array, reference[name], err_msg=name)
    rows = [row for row in board.layers if row["place"] == "accel"]
    assert len(rows) == 10 and all(row["cycles"] > 0 for row in rows)
    assert board.accel_cycles == sum(row["cycles"] for row in rows)
    assert board.accel_cycles == AUTOENCODER_ICEBREAKER_CYCLES
