"""Differential test: random legal programs on fsim and on the Verilator RTL.

Each program (`vdla.testing.programs.generate`) runs on the functional simulator, the
bit-exact reference, and on the "rtl" backend; the final DRAM images must be
byte-equal. The programs end by dumping the whole out buffer and all four
bytes of every accumulator, so the comparison covers the final SRAM state
too. Micro-op counts from the RTL's counters (where it has them) must match
fsim's. Part of the runs use the C++ DRAM model's random backpressure, and an
extra config (wide bus with sub-beat elements, batch 2, queues of depth 2)
checks that nothing depends on the presets' shapes. The board presets run with the timing and area
switches they ship with (`SHIPPED`: their variants of the ALU, the units, the
sequencers, the load walk, the DRAM arbiter, fetch and dispatch);
``benchmarks/differential.py --configs ...`` runs the same on thousands.

The programs use every generator feature the RTL implements (`FEATURES`):
ALU REQUANT and ``overlap`` on GEMM/ALU, both in the RTL since the commit
"hw: ALU REQUANT; compute as two units (GEMM, ALU) issuing in order with
overlap". fsim checks each program is race-free, so the RTL running GEMM and
ALU instructions side by side must still give fsim's image.
"""

from __future__ import annotations

import numpy as np
import pytest

from vdla.hw.config import PRESETS, HwConfig
from vdla.hw.counters import rtl_counters
from vdla.sim.backends import get_backend
from vdla.testing.programs import GeneratorOptions, generate

pytestmark = pytest.mark.rtl

ODD = PRESETS["odd"]
CONFIGS = {"tiny": PRESETS["tiny"], "default": PRESETS["default"], "odd": ODD}
# The board presets, each with the switches it sets. ``ecpix5`` is ``ulx3s``'s
# hardware (one model): its seeds continue ``ulx3s``'s rather than repeat them.
# ``ecpix5-256`` is VTA-size (a slower model, as ``default``'s): fewer programs.
SHIPPED = {"ulx3s": range(300, 350), "ecpix5": range(350, 370), "icebreaker": range(300, 350),
           "ecpix5-256": range(300, 310)}

# What the RTL supports of what the generator can emit; a feature the RTL
# lacks is switched off here (never skipped), so the rest keeps running.
FEATURES = dict(requant=True, overlap=True, overwrite=True)
BASE = GeneratorOptions(**FEATURES)
# Bigger loads and loops than the defaults: long bursts, deep loop nests.
STRESS = BASE.replace(actions=(30, 50), max_uops_per_insn=512, max_load_elements=200,
                      eager_token_probability=0.4, max_pending_tokens=12)
# Mostly compute bursts with overlap wherever legal: the two units side by side.
CONCURRENT = BASE.replace(actions=(30, 50), max_uops_per_insn=256, overlap_probability=1.0,
                          burst_probability=0.9)

_backends: dict[tuple, object] = {}


def _backend(name: str, config: HwConfig, **options):
    key = (name, config.hash, tuple(sorted(options.items())))
    if key not in _backends:
        _backends[key] = get_backend(name, config, **options)
    return _backends[key]


def _check(config: HwConfig, seed: int, options: GeneratorOptions | None = None,
           backpressure: int = 0):
    program = generate(config, seed, options or BASE)
    expected, reference = program.run(_backend("fsim", config))
    actual, result = program.run(_backend("rtl", config, backpressure=backpressure,
                                          seed=seed + 1))
    assert np.array_equal(expected, actual), (
        f"{config.name} seed {seed} (backpressure {backpressure}%): fsim and rtl differ\n"
        + program.describe_difference(expected, actual))
    for name in set(rtl_counters(config)) & {"gemm_uops", "alu_uops"}:   # (icebreaker: none)
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


@pytest.mark.parametrize("seed", range(200, 212))
def test_tiny_concurrent(seed):
    _check(CONFIGS["tiny"], seed, CONCURRENT, backpressure=40 if seed % 3 == 0 else 0)


@pytest.mark.parametrize("seed", range(8))
def test_default(seed):
    _check(CONFIGS["default"], seed, backpressure=25 if seed % 2 else 0)


@pytest.mark.parametrize("seed", range(12))
def test_odd_shape(seed):
    _check(CONFIGS["odd"], seed, (STRESS, CONCURRENT, None)[seed % 3],
           backpressure=40 if seed % 3 == 1 else 0)


@pytest.mark.parametrize("preset, seed", [(preset, seed) for preset, seeds in SHIPPED.items()
                                          for seed in seeds])
def test_shipped_preset(preset, seed):
    """Base, concurrent and stress programs, a third under 30 % backpressure."""
    _check(PRESETS[preset], seed, (BASE, CONCURRENT, BASE, STRESS)[seed % 4],
           backpressure=30 if seed % 3 == 2 else 0)


def test_shipped_presets_set_their_switches():
    """The board presets really run switched hardware here (else the tests above
    would repeat the switch-free ones), and ecpix5 is ulx3s's."""
    from vdla.hw.config import _SWITCHES
    switched = {name: sum(getattr(PRESETS[name], s) for s in _SWITCHES
                          if s != "event_counters") for name in SHIPPED}
    assert switched == {"ulx3s": 10, "ecpix5": 10, "icebreaker": 7, "ecpix5-256": 10}
    assert PRESETS["ecpix5"].same_hardware(PRESETS["ulx3s"])


def test_programs_use_the_features():
    """The differential programs really hold REQUANT, GEMM_OVERWRITE and instructions
    that run beside the other unit (else the comparison would not cover them)."""
    from vdla.hw.isa import Alu, AluOp, Gemm
    requants = concurrent = overwrites = 0
    for seed in range(200, 212):
        program = generate(CONFIGS["tiny"], seed, CONCURRENT)
        requants += sum(isinstance(i, Alu) and i.alu_op == AluOp.REQUANT
                        for i in program.instructions)
        overwrites += sum(isinstance(i, Gemm) and i.overwrite for i in program.instructions)
        concurrent += program.summary["concurrent_overlaps"]
    assert requants >= 10 * FEATURES["requant"] and concurrent >= 20 * FEATURES["overlap"]
    assert overwrites >= 10 * FEATURES["overwrite"]


def test_differential_can_fail():
    """A one-instruction change in the image the RTL runs (not fsim's) must be caught:
    the first dump shift by 0 becomes a shift by 1."""
    from vdla.hw import isa
    from vdla.hw.isa import Alu, AluOp
    config = CONFIGS["tiny"]
    program = generate(config, 7, BASE)
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


def test_rtl_runs_overlapped_instructions_side_by_side():
    """With overlap forced onto every GEMM/ALU (racy, as fsim reports), the RTL's
    results depart from in-order execution for some programs: the units really run
    together, so the equality above covers concurrent execution."""
    import dataclasses
    from vdla.hw import isa
    from vdla.hw.isa import Alu, Gemm
    from vdla.sim.errors import RaceError
    config = CONFIGS["tiny"]
    in_order = _backend("fsim", config, check_races=False)
    differ = 0
    for seed in range(300, 308):
        program = generate(config, seed, CONCURRENT)
        mutated = [insn.replace(overlap=True) if isinstance(insn, (Gemm, Alu)) else insn
                   for insn in program.instructions]
        image = program.dram.copy()
        image[program.insn_offset:program.insn_offset + len(mutated) * isa.INSN_BYTES] = \
            isa.encode_program(mutated, config)
        racy = dataclasses.replace(program, dram=image, instructions=mutated)
        with pytest.raises(RaceError):
            racy.run(_backend("fsim", config))
        expected, _ = racy.run(in_order)
        actual, _ = racy.run(_backend("rtl", config, backpressure=0, seed=seed,  # the racy run itself
                                          check=False))
        differ += not np.array_equal(expected, actual)
    assert differ >= 1


def _benchmark():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "differential.py"
    spec = importlib.util.spec_from_file_location("differential_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_takes_any_presets():
    """``--configs``: each preset with its count; ecpix5 after ulx3s (one hardware)
    takes the seeds after ulx3s's; bad input is one clear line."""
    bench = _benchmark()
    plan = bench.parse_configs("tiny=3,ulx3s,ecpix5,icebreaker=0", 50)
    assert [(config.name, count) for config, count in plan] == [
        ("tiny", 3), ("ulx3s", 50), ("ecpix5", 50), ("icebreaker", 0)]
    assert [(config.name, count, seed) for config, count, seed in bench.seed_plan(plan, 7)] == [
        ("tiny", 3, 7), ("ulx3s", 50, 7), ("ecpix5", 50, 57), ("icebreaker", 0, 7)]
    for text, message in (("vta", r"^--configs: no preset 'vta' \(presets: default, tiny, "),
                          ("tiny=-1", r"^--configs: 'tiny=-1': expected NAME=COUNT with a count"),
                          ("odd,odd", r"^--configs: odd named twice$")):
        with pytest.raises(ValueError, match=message):
            bench.parse_configs(text, 1)
