"""Module activity recorded by the RTL harness, the timeline drawn from it, ``--timeline``.

The chip's own counters (counted in hardware from the ``activity_<module>``
outputs) are the reference for the harness's record: per module, the cycles
of each state in the record must equal the counters exactly, whether the
record is exact or coarsened into bins. The binned record is also checked
against the exact one bin by bin, a windowed record against the full one, and
the overlap between modules against the compiler's latency hiding (present
with it, absent when every module is serialised).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from vdla.cli.run import command as run_command
from vdla.compiler.accel.driver import compile_op
from vdla.compiler.ops import Conv2d
from vdla.hw.counters import ACTIVITY_STATES, RTL_ACTIVITY
from vdla.runtime.runner import AccelRunner
from vdla.bench.plots import timeline
from vdla.runtime.program_file import save
from vdla.sim.rtl import RtlSimulator
from vdla.testing.programs.handbuilt import PROGRAMS

pytestmark = pytest.mark.rtl

STATES = ("busy", "wait_token", "wait_mem")
LAYER = Conv2d(batch=1, in_channels=16, out_channels=16, height=8, width=8, kernel=3, stride=1,
               padding=1, bias=True, shift=8, relu=True)


def _totals(rows) -> dict[str, int]:
    return {state: sum(end - start for start, end, kind in rows if kind == state)
            for state in STATES}


def _check_consistent(result, max_segments: int | None = None) -> None:
    """Record vs the hardware counters; ordered, disjoint, inside the run."""
    activity = result.details["activity"]
    assert set(activity) == set(RTL_ACTIVITY)
    for module, rows in activity.items():
        totals = _totals(rows)
        counters = result.counters
        # The busy counter counts executing cycles, memory stalls included.
        assert totals["busy"] + totals["wait_mem"] == counters[f"{module}_busy"], module
        assert totals["wait_token"] == counters[f"{module}_wait_token"], module
        assert totals["wait_mem"] == counters[f"{module}_wait_mem"], module
        previous_end = 0
        for start, end, state in rows:
            assert state in STATES
            assert isinstance(start, int) and isinstance(end, int)
            assert previous_end <= start < end <= result.cycles, (module, start, end)
            previous_end = end
        if max_segments is not None:
            assert len(rows) <= max_segments


def _run(config, build, program, **options):
    simulator = RtlSimulator(config, build=build, **options)
    try:
        return simulator.run(program.dram.copy(), program.insn_offset, program.insn_count)
    finally:
        simulator.close()


def _per_cycle(rows, length: int) -> np.ndarray:
    """State index per cycle (0: idle) from a record."""
    states = np.zeros(length, dtype=np.int8)
    for start, end, state in rows:
        states[start:end] = ACTIVITY_STATES.index(state)
    return states


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_exact_record_matches_counters(tiny, chip_build, name):
    result = _run(tiny, chip_build, PROGRAMS[name](tiny), activity=True)
    _check_consistent(result)
    assert result.details["activity_bin_cycles"] == {module: 1 for module in RTL_ACTIVITY}
    assert any(result.details["activity"].values())  # something was recorded
    assert result.details["activity"]["compute"]  # every program computes


@pytest.mark.parametrize("max_segments", [8, 12, 32])
def test_binned_record_keeps_totals_and_matches_exact_per_bin(tiny, chip_build, max_segments):
    program = PROGRAMS["double_buffer"](tiny)
    exact = _run(tiny, chip_build, program, activity=True)
    binned = _run(tiny, chip_build, program, activity=True, activity_segments=max_segments)
    assert binned.cycles == exact.cycles and binned.counters == exact.counters
    _check_consistent(binned, max_segments)
    widths = binned.details["activity_bin_cycles"]
    assert max(widths.values()) > 1  # the short limit forced bins
    for module in RTL_ACTIVITY:
        width = widths[module]
        rows = exact.details["activity"][module]
        if width == 1:
            assert binned.details["activity"][module] == rows
            continue
        assert width & (width - 1) == 0  # a power of two
        # Bins are aligned to cycle 0 (no window).
        length = exact.cycles + width
        expected = _per_cycle(rows, length)
        got = _per_cycle(binned.details["activity"][module], length)
        for begin in range(0, exact.cycles, width):
            window = slice(begin, begin + width)
            for code in range(1, len(ACTIVITY_STATES)):
                assert (np.count_nonzero(expected[window] == code)
                        == np.count_nonzero(got[window] == code)), (module, begin, code)


def test_window_records_only_its_cycles(tiny, chip_build):
    program = PROGRAMS["double_buffer"](tiny)
    full = _run(tiny, chip_build, program, activity=True)
    begin, end = full.cycles // 3, 2 * full.cycles // 3
    part = _run(tiny, chip_build, program, activity_window=(begin, end))
    coarse = _run(tiny, chip_build, program, activity_window=(begin, end), activity_segments=8)
    assert max(coarse.details["activity_bin_cycles"].values()) > 1
    for module in RTL_ACTIVITY:
        clipped = [(max(a, begin), min(b, end), state)
                   for a, b, state in full.details["activity"][module] if a < end and b > begin]
        assert part.details["activity"][module] == clipped
        # Coarsened, the window keeps its totals and its bounds.
        rows = coarse.details["activity"][module]
        assert _totals(rows) == _totals(clipped)
        assert all(begin <= a < b <= end for a, b, _ in rows)


def test_recording_is_off_by_default_and_options_are_checked(tiny, chip_build):
    result = _run(tiny, chip_build, PROGRAMS["gemm"](tiny))
    assert "activity" not in result.details
    simulator = RtlSimulator(tiny, build=chip_build)
    try:
        assert simulator.model.activity() == {module: [] for module in RTL_ACTIVITY}
        with pytest.raises(ValueError, match="max_segments"):
            simulator.model.record_activity(max_segments=2)
        with pytest.raises(ValueError, match="window"):
            simulator.model.record_activity(window=(10, 5))
    finally:
        simulator.close()


def _executing(rows, length: int) -> np.ndarray:
    states = _per_cycle(rows, length)
    return (states == ACTIVITY_STATES.index("busy")) | (states == ACTIVITY_STATES.index("wait_mem"))


@pytest.mark.parametrize("latency_hiding", [True, False])
def test_compiled_layer_overlap_follows_latency_hiding(tiny, chip_build, tmp_path,
                                                       latency_hiding):
    program = compile_op(LAYER, tiny, latency_hiding=latency_hiding)
    inputs = LAYER.random_inputs(np.random.default_rng(3))
    device = AccelRunner(tiny, sim="rtl", build=chip_build, activity=True)
    result = device.run(program, inputs)
    np.testing.assert_array_equal(result.outputs["out"], LAYER.reference(**inputs))
    _check_consistent(result)
    activity = result.details["activity"]
    load = _executing(activity["load"], result.cycles)
    compute = _executing(activity["compute"], result.cycles)
    overlap = int(np.count_nonzero(load & compute))
    if latency_hiding:
        assert overlap > 0.05 * np.count_nonzero(load)  # loads hidden behind compute
    else:
        assert overlap == 0  # every module serialised: nothing runs at once
    drawn = timeline(activity, tmp_path / "timeline.png", cycles=result.cycles)
    assert (tmp_path / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for module in RTL_ACTIVITY:
        assert {state: drawn[module][state] for state in STATES} == _totals(activity[module])


@pytest.fixture(scope="module")
def layer_file(tmp_path_factory, tiny):
    directory = tmp_path_factory.mktemp("layer")
    path = save(compile_op(LAYER, tiny), directory / "layer.vdla")
    args = []
    for name, array in LAYER.random_inputs(np.random.default_rng(4)).items():
        np.save(directory / f"{name}.npy", array)
        args += ["--input", f"{name}={directory / f'{name}.npy'}"]
    return path, args, directory


def _invoke(args):
    return CliRunner().invoke(run_command, [str(a) for a in args])


def test_cli_timeline_writes_png(layer_file, chip_build):
    path, args, directory = layer_file
    png = directory / "timeline.png"
    result = _invoke([path, *args, "--sim", "rtl", "--timeline", png])
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"timeline, exact: {png}" in result.stdout


def test_cli_timeline_window_json(layer_file, chip_build):
    path, args, directory = layer_file
    png = directory / "window.png"
    result = _invoke([path, *args, "--sim", "rtl", "--timeline", png,
                      "--timeline-window", "1000:3000", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["timeline"] == {"file": str(png), "window": [1000, 3000],
                                  "resolution": "exact"}
    assert "activity" not in report["details"]  # segment counts only
    assert set(report["details"]["activity_segments"]) == set(RTL_ACTIVITY)
    assert png.exists()


@pytest.mark.parametrize("extra, message", [
    (["--sim", "fsim", "--timeline", "t.png"],
     "Error: --timeline does not apply to --sim fsim (it applies to --sim rtl)"),
    (["--sim", "rtl", "--timeline-window", "0:10"],
     "Error: --timeline-window needs --timeline FILE.png"),
    (["--sim", "rtl", "--timeline", "t.png", "--timeline-window", "20:10"],
     "Error: --timeline-window '20:10': expected START:END cycles with 0 <= START < END"),
    (["--sim", "rtl", "--timeline", "t.png", "--timeline-window", "9000000:9000001"],
     "Error: --timeline-window 9000000:9000001: the run took only"),
])
def test_cli_timeline_errors_in_one_line(layer_file, chip_build, extra, message):
    path, args, directory = layer_file
    extra = [str(directory / e) if e == "t.png" else e for e in extra]
    result = _invoke([path, *args, *extra])
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr
    assert not (directory / "t.png").exists()
