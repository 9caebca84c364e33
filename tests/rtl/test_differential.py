"""Differential test: random legal programs on fsim and on the Verilator RTL.

Each program (sim/random_program.py) runs on the functional simulator, the
bit-exact reference, and on the "rtl" backend; the final DRAM images must be
byte-equal. The programs end by dumping the whole out buffer and all four
bytes of every accumulator, so the comparison covers the final SRAM state
too. Micro-op counts from the RTL's counters must match fsim's. Part of the
runs use the C++ DRAM model's random backpressure, and an extra config (wide
bus with sub-beat elements, batch 2, queues of depth 2) checks that nothing
depends on the presets' shapes.
"""

from __future__ import annotations

import numpy as np
import pytest

from hw.config import PRESETS, HwConfig
from sim.backend import get_backend
from sim.random_program import GeneratorOptions, generate

pytestmark = pytest.mark.rtl

ODD = HwConfig(batch=2, block_in=8, block_out=4, uop_buffer_bytes=1024, inp_buffer_bytes=1024,
               wgt_buffer_bytes=1024, acc_buffer_bytes=2048, dram_bus_bits=128,
               dram_read_latency=3, cmd_queue_depth=2, token_queue_depth=2, name="odd")
CONFIGS = {"tiny": PRESETS["tiny"], "default": PRESETS["default"], "odd": ODD}

# Bigger loads and loops than the defaults: long bursts, deep loop nests.
STRESS = GeneratorOptions(actions=(30, 50), max_uops_per_insn=512, max_load_elements=200,
                          eager_token_probability=0.4, max_pending_tokens=12)

_backends: dict[tuple, object] = {}


def _backend(name: str, config: HwConfig, **options):
    key = (name, config.hash, tuple(sorted(options.items())))
    if key not in _backends:
        _backends[key] = get_backend(name, config, **options)
    return _backends[key]


def _check(config: HwConfig, seed: int, options: GeneratorOptions | None = None,
           backpressure: int = 0):
    program = generate(config, seed, options)
    expected, reference = program.run(_backend("fsim", config))
    actual, result = program.run(_backend("rtl", config, backpressure=backpressure,
                                          seed=seed + 1))
    assert np.array_equal(expected, actual), (
        f"{config.name} seed {seed} (backpressure {backpressure}%): fsim and rtl differ\n"
        + program.describe_difference(expected, actual))
    for name in ("gemm_uops", "alu_uops"):
        assert result.counters[name] == reference.counters[name], \
            f"{config.name} seed {seed}: {name} rtl {result.counters[name]} " \
            f"!= fsim {reference.counters[name]}"
    assert result.cycles and result.cycles > 0


@pytest.mark.parametrize("seed", range(40))
def test_tiny(seed):
    # every third program under 30 % random backpressure on every DRAM stream
    _check(CONFIGS["tiny"], seed, backpressure=30 if seed % 3 == 2 else 0)


@pytest.mark.parametrize("seed", range(100, 110))
def test_tiny_stress(seed):
    _check(CONFIGS["tiny"], seed, STRESS, backpressure=50 if seed % 2 else 0)


@pytest.mark.parametrize("seed", range(8))
def test_default(seed):
    _check(CONFIGS["default"], seed, backpressure=25 if seed % 2 else 0)


@pytest.mark.parametrize("seed", range(12))
def test_odd_shape(seed):
    _check(CONFIGS["odd"], seed, STRESS if seed % 2 else None,
           backpressure=40 if seed % 3 == 1 else 0)


def test_differential_can_fail():
    """A one-instruction change in the image the RTL runs (not fsim's) must be caught:
    the first dump shift by 0 becomes a shift by 1."""
    from hw import isa
    from hw.isa import Alu, AluOp
    config = CONFIGS["tiny"]
    program = generate(config, 7)
    expected, _ = program.run(_backend("fsim", config))
    mutated = list(program.instructions)
    index = next(i for i, insn in enumerate(mutated) if isinstance(insn, Alu)
                 and insn.alu_op == AluOp.SHR and insn.use_imm and insn.imm == 0
                 and insn.iter_out > 1)
    mutated[index] = mutated[index].replace(imm=1)
    image = program.dram.copy()
    image[program.insn_offset:program.insn_offset + len(mutated) * isa.INSN_BYTES] = \
        isa.encode_program(mutated, config)
    _backend("rtl", config, backpressure=0, seed=8).run(image, program.insn_offset,
                                                        program.insn_count)
    differ = np.flatnonzero(expected != image)
    dump_offset, dump_size = program.regions["dump"]
    insn_offset, insn_size = program.regions["insn"]
    assert any(dump_offset <= d < dump_offset + dump_size for d in differ)
