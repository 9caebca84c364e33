"""The DRAM address width sizes registers, not timing: `benchmarks/synth.py` counts the
iCEBreaker preset's ResNet-18 cycles with 32-bit addresses on that ground (a layer's
image does not fit the board's 128 KiB)."""

from vdla.bench.layer_run import run_layer
from vdla.compiler import Conv2d
from vdla.compiler.workloads import Workload
from vdla.hw.config import PRESETS


def test_dram_address_width_changes_no_cycle():
    workload = Workload("small", Conv2d(1, 8, 12, 7, 7, kernel=3, stride=2, padding=1,
                                        bias=True, relu=True), 1)
    narrow = PRESETS["icebreaker"]
    wide = narrow.replace(dram_addr_bits=32)
    layers = [run_layer(workload, config, "rtl") for config in (narrow, wide)]
    assert all(layer.correct for layer in layers), [layer.error for layer in layers]
    assert layers[0].cycles == layers[1].cycles > 0
