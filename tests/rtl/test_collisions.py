"""Read-during-write collisions of the "don't care" block RAMs, made visible.

With ``ram_collision_dont_care`` (``ulx3s``, ``ecpix5``, ``icebreaker``) a block
RAM read of the entry written in the same cycle is undefined
(`hw.generate.mark_collision_dont_care`): the Verilog reads all-x, which the RTL
tier's Verilator (``--x-assign fast``) turns into some value. That value must
never reach a result. Here the model is built with every such read returning
the complement of the entry's old data -- never the value a defined read gives
-- and random programs must still give fsim's images: a collision whose data
were used would change them. The poison is live: racy programs (overlap forced
where the checker forbids it) do collide and use the value, and they diverge.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from vdla.hw.config import PRESETS
from vdla.hw.generate import cached_verilog
from vdla.sim.backends import get_backend
from vdla.testing.illegal import mutate
from vdla.testing.programs import GeneratorOptions, generate
from vdla.sim.rtl.backend import RtlSimulator

pytestmark = pytest.mark.rtl

# Yosys's Verilog of a collision-don't-care read port: the read, then x when the
# write port writes the same address in the same cycle.
_X_ON_COLLISION = re.compile(
    r"^(?P<indent> +)(?P<data>\S+) <= (?P<read>\S+\[[^\]]*\]);\n"
    r"(?P<check> +if \([^\n]*\)\n) +(?P=data) <= \d+'hx+;$", re.MULTILINE)
FEATURES = dict(requant=True, overlap=True, overwrite=True)
CONCURRENT = GeneratorOptions(**FEATURES, actions=(30, 50), max_uops_per_insn=256,
                              overlap_probability=1.0, burst_probability=0.9)
_models: dict[tuple, RtlSimulator] = {}


def poisoned_verilog(config) -> str:
    """The RTL tier's Verilog of ``config`` with every collision reading ``~old data``."""
    text, count = _X_ON_COLLISION.subn(
        lambda match: (f"{match['indent']}{match['data']} <= {match['read']};\n{match['check']}"
                       f"{match['indent']}  {match['data']} <= ~{match['read']};"),
        cached_verilog(config))
    # inp, wgt, uop and out: one read port each; acc: each unit's reads, per bank.
    assert count >= 4 + config.acc_banks, f"{count} collision-x read ports found"
    return text


def _model(name: str, poisoned: bool, **options) -> RtlSimulator:
    key = (name, poisoned, tuple(sorted(options.items())))
    if key not in _models:
        config = PRESETS[name]
        verilog = poisoned_verilog(config) if poisoned else None
        _models[key] = RtlSimulator(config, verilog=verilog, **options)
    return _models[key]


@pytest.mark.parametrize("name", ["icebreaker", "ulx3s"])
@pytest.mark.parametrize("seed", range(500, 508))
def test_no_collision_reaches_a_result(name, seed):
    config = PRESETS[name]
    options = CONCURRENT if seed % 2 else GeneratorOptions(**FEATURES)
    program = generate(config, seed, options)
    expected, _ = program.run(get_backend("fsim", config))
    actual, _ = program.run(_model(name, True, backpressure=30 if seed % 4 == 3 else 0))
    assert np.array_equal(expected, actual), program.describe_difference(expected, actual)


def test_the_poison_is_live():
    """Made racy (overlap on every GEMM / ALU, `testing.illegal`), some program reads an acc
    entry as it is written and uses it: the poisoned model departs from the plain one."""
    config = PRESETS["icebreaker"]
    differ = 0
    for seed in range(600, 612):
        mutant = mutate(generate(config, seed, CONCURRENT), np.random.default_rng(seed),
                        "overlap_everywhere")
        plain, poisoned = mutant.dram.copy(), mutant.dram.copy()
        _model("icebreaker", False, check=False).run(plain, mutant.insn_offset, mutant.insn_count)
        _model("icebreaker", True, check=False).run(poisoned, mutant.insn_offset,
                                                    mutant.insn_count)
        differ += not np.array_equal(plain, poisoned)
    assert differ >= 1, "no racy program used a colliding read"
