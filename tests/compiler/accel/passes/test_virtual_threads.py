"""Virtual threads: per-thread SRAM slots and the interleaved, pipelined stage order."""

import dataclasses

import pytest

from vdla.compiler import Conv2d, Schedule
from vdla.compiler.accel import ir
from vdla.compiler.accel.lower import lower
from vdla.compiler.accel.passes.epilogue import lower_epilogues
from vdla.compiler.accel.passes.tensorize import tensorize
from vdla.compiler.accel.passes.virtual_threads import assign_virtual_threads
from vdla.hw.config import PRESETS

TINY = PRESETS["tiny"]


def _function(threads, rows=2, op=None, tile_c=1, config=TINY):
    op = op or Conv2d(1, 8, 4, 8, 8, kernel=3, padding=1, bias=True)
    schedule = Schedule(tile_h=rows, tile_w=8, tile_k=1, tile_c=tile_c, virtual_threads=threads)
    function = lower(schedule.check(op.geometry(), config))
    for run in (tensorize, lower_epilogues, assign_virtual_threads):
        run(function)
    return function


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_slots_are_disjoint_and_fit(threads):
    function = _function(threads)
    for scope in ("inp", "wgt", "acc"):
        spans = sorted((b.base, b.base + b.entries) for b in function.buffers if b.scope == scope)
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert end <= start
        assert spans[-1][1] <= TINY.depth(scope)
    replicated = [b for b in function.buffers if b.name.startswith("inp_tile")]
    assert len(replicated) == threads


@pytest.mark.parametrize("banks, copied", [(4, False), (2, True)])
def test_each_threads_acc_lies_in_banks_of_its_own(banks, copied):
    """Each thread's acc slot starts a bank; the bias gets a bank after them (4 banks)
    or, with no bank left for it (2), a copy per thread after its slot, which the
    thread's epilogues load and read."""
    config = dataclasses.replace(TINY, max_acc_banks=banks, name=f"tiny-{banks}-banks")
    function = _function(2, config=config)
    rows = config.acc_bank_rows
    acc = {b.name: b for b in function.buffers if b.scope == "acc"}
    assert [acc[f"acc_tile.t{t}"].base for t in (0, 1)] == [0, rows]
    biases = sorted(name for name in acc if name.startswith("bias"))
    assert biases == (["bias.t0", "bias.t1"] if copied else ["bias"])
    for t in (0, 1):
        bias = acc["bias.t%d" % t] if copied else acc["bias"]
        assert bias.base // rows == (t if copied else 2)
    for tile in function.tiles:
        for stmt in ir.walk(tile.epilogue.body):
            if isinstance(stmt, ir.Copy) and stmt.memory == "acc":
                assert stmt.buffer.name == (f"bias.t{tile.thread}" if copied else "bias")


def test_tiles_use_their_threads_slot():
    function = _function(2)
    for tile in function.tiles:
        for stage in (s for step in tile.steps for s in step):
            for stmt in ir.walk(stage.body):
                if isinstance(stmt, ir.Copy) and stmt.memory in ("inp", "wgt"):
                    assert stmt.buffer.name.endswith(f".t{tile.thread}")
    assert [t.thread for t in function.tiles[:4]] == [0, 1, 0, 1]


def _pattern(function, count):
    return [(s.kind[0].upper(), s.thread) for s in function.stages
            if s.kind != "store" and s.body and not isinstance(s.body[0], ir.Epilogue)][:count]


def test_two_threads_prefetch_the_other_slot():
    function = _function(2, op=Conv2d(1, 8, 4, 8, 8, kernel=3, padding=1))
    # Loads of thread 1 are issued before thread 0 computes; thereafter each
    # compute is preceded by the next load of the other slot.
    loads_and_computes = [(s.kind, s.thread) for s in function.stages
                          if s.kind in ("load", "compute") and s.chunk is not None]
    assert loads_and_computes[:6] == [("load", 0), ("load", 1), ("compute", 0), ("load", 0),
                                      ("compute", 1), ("load", 1)]


def test_one_thread_does_not_prefetch():
    function = _function(1)
    kinds = [s.kind for s in function.stages if s.chunk is not None]
    assert kinds[:4] == ["load", "compute", "load", "compute"]


@pytest.mark.parametrize("threads, rows, tile_c", [(2, 3, 1), (3, 2, 1), (2, 3, 1), (2, 5, 1)])
def test_no_load_overtakes_compute_on_its_slot(threads, rows, tile_c):
    """Program order is the meaning: a slot is reloaded only after its compute was issued."""
    op = Conv2d(1, 12, 4, 8, 8, kernel=3, padding=1)       # 3 chunks per tile at tile_c=1
    function = _function(threads, rows=rows, op=op, tile_c=tile_c)
    pending = {}        # thread -> loaded but not yet computed
    for stage in function.stages:
        if stage.kind == "load":
            assert not pending.get(stage.thread), "slot overwritten before its compute"
            pending[stage.thread] = True
        elif stage.kind == "compute" and stage.chunk is not None:
            assert pending.get(stage.thread), "compute before its load"
            pending[stage.thread] = False
