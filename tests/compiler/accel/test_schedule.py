"""Schedules: JSON, validation against buffers, and the default search."""

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vdla.compiler import Conv2d, Dense, Schedule, ScheduleError, default_schedule, load_schedule
from vdla.compiler.accel.schedule import AccLayout, acc_layout, plan_tiles
from vdla.compiler.accel.space import schedule_space
from vdla.hw.config import PRESETS, ConfigError, HwConfig


def test_json_round_trip(tmp_path):
    schedule = Schedule(tile_b=1, tile_h=4, tile_w=8, tile_k=2, tile_c=3, virtual_threads=2,
                        loop_order="kbhw")
    assert Schedule.from_json(schedule.to_json()) == schedule
    path = tmp_path / "s.json"
    path.write_text(schedule.to_json())
    assert load_schedule(path) == schedule


@pytest.mark.parametrize("data, message", [
    ({"tile_h": 0}, "tile_h"),
    ({"tile_x": 1}, "unknown schedule field"),
    ({"loop_order": "bkh"}, "loop_order"),
    ({"virtual_threads": 1.5}, "virtual_threads"),
    ({"latency_hiding": "yes"}, "latency_hiding"),
    ({"resident_weights": 1}, "resident_weights"),
    ({"resident_input": "no"}, "resident_input"),
])
def test_malformed_schedules(data, message):
    with pytest.raises(ScheduleError, match=message):
        Schedule.from_dict(data)


def test_unreadable_schedule_file(tmp_path):
    with pytest.raises(ScheduleError, match="cannot read"):
        load_schedule(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ScheduleError, match="not valid JSON"):
        load_schedule(tmp_path / "bad.json")


CONV = Conv2d(1, 64, 64, 56, 56, kernel=3, padding=1)


@pytest.mark.parametrize("op, schedule, buffer, knob", [
    (CONV, Schedule(tile_h=56, tile_w=56, tile_c=4, tile_k=1), "inp", "tile_h=56"),
    (CONV, Schedule(tile_h=1, tile_w=1, tile_c=4, tile_k=4, virtual_threads=1), "wgt", "tile_k=4"),
    (Dense(64, 4, 64), Schedule(tile_b=64, tile_k=16), "acc", "tile_b=64"),
])
def test_overflow_names_knob_and_buffer(op, schedule, buffer, knob):
    config = PRESETS["tiny"] if buffer != "inp" else PRESETS["default"]
    with pytest.raises(ScheduleError, match=f"{buffer} buffer.*{knob}"):
        schedule.check(op.geometry(), config)


def test_tiles_clamp_to_the_layer():
    op = Conv2d(1, 8, 8, 5, 5, kernel=3, padding=1)
    plan = plan_tiles(op.geometry(), PRESETS["default"], Schedule(tile_h=100, tile_w=100,
                                                                   tile_k=100, tile_c=100))
    assert plan.tile == {"b": 1, "k": 1, "c": 1, "h": 5, "w": 5}
    assert plan.threads == 1   # one tile: a second thread would stay idle


def _random_ops(rng, count):
    for _ in range(count):
        kernel = int(rng.integers(1, 8))
        pad = int(rng.integers(0, kernel))
        size = int(rng.integers(max(1, kernel - 2 * pad), 40))
        yield Conv2d(int(rng.integers(1, 4)), int(rng.integers(1, 300)), int(rng.integers(1, 300)),
                     size, int(rng.integers(max(1, kernel - 2 * pad), 40)), kernel=kernel,
                     stride=int(rng.integers(1, 4)), padding=pad, bias=bool(rng.integers(2)))
        yield Dense(int(rng.integers(1, 300)), int(rng.integers(1, 3000)),
                    int(rng.integers(1, 3000)), bias=bool(rng.integers(2)))


@pytest.mark.slow
@pytest.mark.parametrize("config_name", ["default", "tiny"])
def test_default_schedule_is_legal_for_any_shape(config_name):
    config = PRESETS[config_name]
    for op in _random_ops(np.random.default_rng(7), 40):
        schedule = default_schedule(op, config)
        plan = schedule.check(op.geometry(), config)
        usage = plan.usage()
        for kind in ("inp", "wgt", "acc"):
            assert usage[kind] <= config.depth(kind), (op, schedule)


def test_default_prefers_latency_hiding_and_hides_dma():
    from vdla.compiler.accel.cost import estimate_cost
    op = Conv2d(1, 64, 64, 56, 56, kernel=3, padding=1)
    config = PRESETS["default"]
    schedule = default_schedule(op, config)
    assert schedule.virtual_threads in (2, 3)
    plan = schedule.check(op.geometry(), config)
    # Full-width rows (no column halos), and the pipelined estimate within 2% of
    # the GEMM cycles: DMA and the epilogue hide behind compute.
    assert plan.tile["w"] == 56
    ideal = 56 * 56 * 4 * 4 * 9
    assert ideal < estimate_cost(plan) < 1.02 * ideal
    # A serial plan of the same tiles costs more than the pipelined one.
    serial = plan_tiles(op.geometry(), config, schedule.replace(virtual_threads=1))
    assert estimate_cost(serial) > estimate_cost(plan)


def test_without_latency_hiding_one_thread():
    op = Conv2d(1, 64, 64, 56, 56, kernel=3, padding=1)
    schedule = default_schedule(op, PRESETS["default"], latency_hiding=False)
    assert schedule.virtual_threads == 1 and not schedule.latency_hiding


def test_impossible_config_errors_clearly():
    config = PRESETS["tiny"].replace(wgt_buffer_bytes=16 * 16, name="cramped")
    with pytest.raises(ScheduleError, match="no schedule fits"):
        default_schedule(Conv2d(1, 4, 4, 9, 9, kernel=7), config)


def test_resident_input_needs_one_spatial_tile():
    schedule = Schedule(tile_h=2, tile_w=56, resident_input=True)
    with pytest.raises(ScheduleError, match="resident_input needs one tile"):
        schedule.check(CONV.geometry(), PRESETS["default"])


def test_resident_weights_count_every_block():
    op = Conv2d(1, 64, 64, 8, 8, kernel=3, padding=1)
    schedule = Schedule(tile_h=8, tile_w=8, tile_k=2, tile_c=2, virtual_threads=2,
                        resident_weights=True)
    plan = schedule.check(op.geometry(), PRESETS["default"])
    # 4 output-channel blocks x 4 channel blocks x 9 taps, whatever the threads.
    assert plan.usage()["wgt"] == 4 * 4 * 9
    small = Conv2d(1, 64, 64, 2, 2, kernel=3, padding=1)
    with pytest.raises(ScheduleError, match=r"wgt buffer: 2304 entries needed \(64 resident"):
        schedule.check(small.geometry(), PRESETS["tiny"])


@pytest.mark.parametrize("name, resident", [("C2", False), ("C3", True), ("C4", True),
                                            ("C10", True)])
def test_search_keeps_weights_resident_where_dram_bound(name, resident):
    """C4's threads all read the same weights (one shared copy, not three); C3
    and C10 are DRAM-bound, so of equal estimates the resident variant wins;
    C2 is compute-bound and keeps per-thread weight slots (fewer uop kernels)."""
    from vdla.compiler.workloads import resnet18_layer
    schedule = default_schedule(resnet18_layer(name).op, PRESETS["default"])
    assert schedule.resident_weights is resident
    assert schedule.resident_input is (name == "C10")


# ------------------------------------------------ legal on every config, not just the common ones
def _assert_legal_or_nothing_fits(op, config):
    """The default schedule passes `Schedule.check`; or, when the search gives up,
    even the smallest schedule (1x1 tile, one block, one thread) does not fit."""
    try:
        schedule = default_schedule(op, config)
    except ScheduleError as error:
        assert "no schedule fits" in str(error)
        with pytest.raises(ScheduleError):
            Schedule().check(op.geometry(), config)
        return
    plan = schedule.check(op.geometry(), config)
    assert plan.threads <= max(1, config.token_queue_depth // 2), (op, config, schedule)


@pytest.mark.slow
@pytest.mark.parametrize("config_name", sorted(PRESETS))
def test_default_schedule_is_legal_on_every_preset(config_name):
    config = PRESETS[config_name]
    for op in _random_ops(np.random.default_rng(3), 15):
        _assert_legal_or_nothing_fits(op, config)


def test_odd_preset_stays_within_its_token_queues():
    # token_queue_depth 2 allows one thread: the search used to propose two or three.
    from vdla.compiler.workloads import resnet18_layer
    config = PRESETS["odd"]
    schedule = default_schedule(resnet18_layer("C5").op, config)
    assert schedule.virtual_threads == 1
    schedule.check(resnet18_layer("C5").op.geometry(), config)


def test_forced_threads_beyond_the_token_queues_error_clearly():
    with pytest.raises(ScheduleError, match=r"virtual_threads=2 exceeds 1, half the "
                                            r"token_queue_depth \(2\) of config 'odd'"):
        default_schedule(CONV, PRESETS["odd"], virtual_threads=2)


_POWERS = st.sampled_from([1 << n for n in range(0, 7)])


@st.composite
def _configs(draw):
    """Random configs; the invalid ones (indices wider than a micro-op...) are discarded."""
    fields = dict(
        batch=draw(st.sampled_from([1, 2, 4])), block_in=draw(st.sampled_from([2, 4, 8, 16])),
        block_out=draw(st.sampled_from([2, 4, 8, 16])),
        uop_buffer_bytes=draw(st.sampled_from([256, 1024, 4096, 32768])),
        inp_buffer_bytes=draw(st.sampled_from([256, 1024, 8192, 32768])),
        wgt_buffer_bytes=draw(st.sampled_from([256, 2048, 16384, 262144])),
        acc_buffer_bytes=draw(st.sampled_from([512, 4096, 32768, 131072])),
        dram_bus_bits=draw(st.sampled_from([8, 32, 64, 128, 512])),
        dram_read_latency=draw(st.integers(1, 200)),
        dram_reads_in_flight=draw(st.integers(1, 16)),
        cmd_queue_depth=draw(_POWERS), token_queue_depth=draw(_POWERS), name="random")
    try:
        return HwConfig(**fields)
    except ConfigError:
        assume(False)


@st.composite
def _ops(draw):
    if draw(st.booleans()):
        return Dense(draw(st.integers(1, 40)), draw(st.integers(1, 300)),
                     draw(st.integers(1, 300)), bias=draw(st.booleans()))
    kernel = draw(st.integers(1, 5))
    pad = draw(st.integers(0, kernel - 1))
    low = max(1, kernel - 2 * pad)
    return Conv2d(draw(st.integers(1, 3)), draw(st.integers(1, 80)), draw(st.integers(1, 80)),
                  draw(st.integers(low, 20)), draw(st.integers(low, 20)), kernel=kernel,
                  stride=draw(st.integers(1, 3)), padding=pad, bias=draw(st.booleans()))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(config=_configs(), op=_ops())
def test_default_schedule_is_legal_on_random_configs(config, op):
    _assert_legal_or_nothing_fits(op, config)


@pytest.mark.parametrize("config_name", ["default", "tiny", "odd"])
def test_default_schedule_lies_in_the_declared_space(config_name):
    """The tuner's space (`schedule_space`) holds the default search's pick."""
    from vdla.compiler.workloads import resnet18_layer
    config = PRESETS[config_name]
    for op in (resnet18_layer("C3").op, Dense(8, 64, 96, bias=True)):
        space = schedule_space(op, config)
        schedule = default_schedule(op, config)
        assert space.schedule(space.point(schedule)) == schedule
        assert space.plan(schedule) is not None


@pytest.mark.parametrize("op, schedule", [
    # A dense layer: the batch rows and channel blocks of a chunk are one 2D LOAD.
    (Dense(16, 512, 256), Schedule(tile_b=16, tile_k=4, tile_c=8)),
    # A strided 1x1 conv (compacted rows), tiles dividing the extents.
    (Conv2d(1, 64, 32, 28, 28, kernel=1, stride=2), Schedule(tile_h=7, tile_w=14, tile_k=1,
                                                             tile_c=2, loop_order="kbhw")),
    # A padded 3x3 conv with odd channels: halos, edge tiles and padding.
    (Conv2d(2, 45, 20, 9, 9, kernel=3, padding=1), Schedule(tile_h=3, tile_w=9, tile_c=1)),
])
def test_chunk_loads_are_the_programs_loads(op, schedule):
    """The LOADs the cost model counts per chunk (`lower.chunk_loads`) are those of the
    compiled program: each of its shapes occurs there once per tile and chunk where
    every tile has that shape, and at least once otherwise."""
    from collections import Counter

    from vdla.compiler import compile_op
    from vdla.compiler.accel.lower import chunk_loads
    from vdla.hw.isa import Load, MemType

    config = PRESETS["default"]
    plan = schedule.check(op.geometry(), config)
    program = compile_op(op, config, schedule)

    def shape(load):
        return (load.y_size, load.x_size, load.y_pad_top, load.y_pad_bottom,
                load.x_pad_left, load.x_pad_right)

    emitted = Counter(shape(insn) for insn in program.instructions
                      if isinstance(insn, Load) and insn.memory_type == MemType.INP)
    counted = Counter(shape(load) for load in chunk_loads(plan)["inp"])
    steps = np.prod([plan.counts[axis] for axis in "bkhwc"])
    uniform = all(plan.blocks[axis] % plan.tile[axis] == 0 for axis in "bkhwc") \
        and op.geometry().padding == (0, 0)
    for key, count in counted.items():
        assert emitted[key] > 0, key
        if uniform:
            assert emitted[key] == count * steps, key


def test_epilogue_stalls_where_acc_banks_are_shared():
    """Three threads' slots cannot each have one of 2 acc banks: the estimate then
    charges the epilogue share on shared banks; two threads take a bank each, each
    with its own copy of the bias (`acc_layout`), and it charges none."""
    from vdla.compiler.accel.cost import estimate_cost
    op = Conv2d(1, 128, 256, 28, 28, kernel=1, stride=2, bias=True, shift=10, relu=True)
    config = dataclasses.replace(PRESETS["default"], max_acc_banks=2, name="two-banks")
    costs = {}
    for threads in (2, 3):
        plan = Schedule(tile_h=14, tile_w=2, tile_k=6, tile_c=2, virtual_threads=threads,
                        loop_order="bkhw", resident_weights=True).check(op.geometry(), config)
        stall = estimate_cost(plan) - estimate_cost(plan, epilogue_stalls=False)
        costs[threads] = (plan.epilogue_overlap(), stall)
    assert costs[2] == (1.0, 0.0)
    overlap, stall = costs[3]
    assert overlap < 1 and stall > 0


@pytest.mark.parametrize("banks, threads, slot, shared, layout", [
    # A bank per slot, the shared buffers in a bank after them.
    (4, 2, 300, 16, AccLayout(512, shared_copied=False)),
    (4, 3, 512, 16, AccLayout(512, shared_copied=False)),
    # A slot over two banks, still a bank left for the shared buffers.
    (8, 3, 300, 16, AccLayout(512, shared_copied=False)),
    # No bank left for them: a copy per thread, after its slot, in its own banks.
    (2, 2, 1000, 16, AccLayout(1024, shared_copied=True)),
    (4, 4, 300, 16, AccLayout(512, shared_copied=True)),
    (4, 2, 600, 16, AccLayout(1024, shared_copied=True)),
    # Neither fits: packed (None).
    (2, 2, 1020, 16, None),
    (2, 3, 100, 0, None),
    (4, 1, 100, 16, None),
])
def test_acc_layout_gives_each_thread_banks_of_its_own(banks, threads, slot, shared, layout):
    config = dataclasses.replace(PRESETS["default"], max_acc_banks=banks, name="banks")
    assert config.depth("acc") == 2048
    assert acc_layout(config, threads, slot, shared) == layout
    if layout is not None:
        rows = config.acc_bank_rows
        spans = [set(range(t * layout.stride // rows,
                           (t * layout.stride + slot + shared * layout.shared_copied - 1) // rows
                           + 1)) for t in range(threads)]
        assert all(not (a & b) for i, a in enumerate(spans) for b in spans[i + 1:])
