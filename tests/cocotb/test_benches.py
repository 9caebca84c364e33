"""pytest entry points of the cocotb benches (Verilator through cocotb's runner).

Each model is built once per content hash (testing/cocotb/harness.py: cached
across sessions, shared by xdist workers) and each bench runs all its test
cases in one simulator process; the wrapper then checks that every expected
test case ran and passed, so a bench that silently runs nothing fails too.
"""

from __future__ import annotations

import pytest

from vdla.hw.config import PRESETS
from vdla.testing.cocotb import harness
from vdla.testing.cocotb.blocks import BLOCKS_CONFIG, TOP as BLOCKS_TOP, blocks_verilog

pytestmark = [pytest.mark.cocotb, pytest.mark.rtl]

BLOCK_TESTS = ["token_queues", "token_queue_reset_clears", "alu_ops", "gemm_core",
               "load_module", "load_module_backpressure", "load_waits_for_token",
               "store_module", "store_module_backpressure", "store_waits_for_token"]
# bench_chip's `speed` case only measures (benchmarks/cocotb_speed.py) and
# returns at once without VDLA_SPEED_JSON, so the tests leave it out.
CHIP_TESTS = ["random_programs", "random_programs_backpressure", "restart_after_done",
              "compiled_layer"]


def _assert_passed(results: harness.BenchResults, expected_tests: int):
    assert results.failed == 0, "\n".join(results.failures)
    assert results.tests == expected_tests, \
        f"{results.tests} test cases ran, expected {expected_tests} ({results.xml})"


@pytest.fixture(scope="session")
def blocks_model():
    return harness.build(BLOCKS_TOP, blocks_verilog())


def _chip_model(config):
    from vdla.hw.generate import TOP_NAME, verilog
    return harness.build(TOP_NAME, verilog(config))


@pytest.fixture(scope="session")
def chip_tiny():
    return _chip_model(PRESETS["tiny"])


@pytest.fixture(scope="session")
def chip_default():
    return _chip_model(PRESETS["default"])


def test_blocks(blocks_model, tmp_path):
    """Token queues, ALU, GEMM core, load and store modules against numpy models."""
    results = harness.run("bench_blocks", blocks_model, env=harness.config_env(BLOCKS_CONFIG),
                          work_dir=tmp_path)
    _assert_passed(results, len(BLOCK_TESTS))


def test_chip_tiny(chip_tiny, tmp_path):
    """Random programs (with and without backpressure), a restart and a compiled
    conv2d on the whole chip at ``tiny``, against fsim."""
    env = harness.config_env(PRESETS["tiny"])
    env["VDLA_BENCH_SEEDS"] = ",".join(str(s) for s in range(8))
    results = harness.run("bench_chip", chip_tiny, env=env, work_dir=tmp_path,
                          testcases=CHIP_TESTS)
    _assert_passed(results, len(CHIP_TESTS))


def test_chip_default(chip_default, tmp_path):
    """A few random programs and the compiled conv2d on the chip at ``default``."""
    env = harness.config_env(PRESETS["default"])
    env["VDLA_BENCH_SEEDS"] = "0,1"
    results = harness.run("bench_chip", chip_default, env=env, work_dir=tmp_path,
                          testcases=["random_programs", "random_programs_backpressure",
                                     "compiled_layer"])
    _assert_passed(results, 3)


def test_chip_bench_reports_a_wrong_reference(chip_tiny, tmp_path):
    """The chip bench can fail: with one reference byte flipped it must report it."""
    env = harness.config_env(PRESETS["tiny"])
    env.update(VDLA_BENCH_SEEDS="3", VDLA_BENCH_CORRUPT_REFERENCE="1")
    results = harness.run("bench_chip", chip_tiny, env=env, work_dir=tmp_path,
                          testcases=["random_programs"])
    assert results.tests == 1 and results.failed == 1, results.failures
    assert "seed 3" in results.failures[0] and "dump" in results.failures[0]
