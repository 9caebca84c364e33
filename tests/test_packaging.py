"""The distribution is one namespace, ``vdla``, and its sources import only through it.

The parts live in folders at the repository's top (``hw/``, ``sim/``, ...) and
are mapped into ``vdla`` by ``pyproject.toml``. Pytest puts the repository on
``sys.path``, so a bare ``import hw`` would still work here while failing in a
real install: these tests catch that statically and through a built wheel.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import vdla

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PACKAGE_DIRS = PYPROJECT["tool"]["setuptools"]["package-dir"]
# The folder names that are import names only inside the repository.
FOLDERS = {Path(folder).name for folder in PACKAGE_DIRS.values()} - {"vdla"} | {"tests", "benchmarks"}


def _sources():
    for folder in [*PACKAGE_DIRS.values(), "benchmarks"]:
        yield from sorted((REPO / folder).rglob("*.py"))


def _top_level_imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def test_sources_import_the_parts_only_through_vdla():
    bare = [f"{path.relative_to(REPO)}:{line}: import {name}"
            for path in _sources() for line, name in _top_level_imports(path) if name in FOLDERS]
    assert bare == []


def test_every_source_folder_is_a_declared_package():
    declared = set(PYPROJECT["tool"]["setuptools"]["packages"])
    for name, folder in PACKAGE_DIRS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / folder).parts
            assert ".".join((name, *relative)) in declared, init


def test_version_is_the_distributions():
    from importlib.metadata import version
    assert vdla.__version__ == version("vdla")


def test_python_dash_m_vdla_runs_the_cli(tmp_path):
    # From an empty folder: the one above the checkout holds the checkout itself, which git names
    # ``vdla`` by default and which would shadow the installed package as a namespace package.
    result = subprocess.run([sys.executable, "-m", "vdla", "--version"], capture_output=True,
                            text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"vdla, version {vdla.__version__}"


@pytest.mark.slow
def test_wheel_holds_only_vdla_with_its_data(tmp_path):
    """A non-editable build: one top-level name, the C++ harness and the baselines inside."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                    "-q", "-w", str(tmp_path), str(REPO)], check=True)
    (wheel,) = tmp_path.glob("vdla-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"vdla"}
    for needed in ["vdla/sim/rtl/harness.cpp", "vdla/sim/rtl/lz4.h", "vdla/sim/board_uart.cpp",
                   "vdla/sim/ecp5_dp16kd.v",
                   "vdla/bench/baselines/default.json", "vdla/bench/baselines/tiny.json",
                   "vdla/testing/cocotb/bench_chip.py", "vdla/__main__.py", "vdla/compiler/cpu/pool.c",
                   "vdla/cache.py", "vdla/hw/boards/bitstream.py", "vdla/compiler/accel/passes/dma.py"]:
        assert needed in names


def test_pytest_without_xdist_says_what_to_install():
    """pyproject.toml's addopts pass ``-n auto``; without pytest-xdist, pytest names the install command."""
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider",
                             "--collect-only", "-q", "tests/test_packaging.py"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    message = result.stderr.strip()
    assert re.fullmatch(r"ERROR: pytest-xdist is missing, and pyproject\.toml's addopts run the tests with "
                        r"-n auto: install the test extras with "
                        r"pip install -c constraints\.txt -e '\.\[test\]'", message), message


def _requirements(names):
    from packaging.requirements import Requirement
    return [Requirement(text) for text in names]


def test_every_dependency_is_pinned_in_constraints_within_its_range():
    from packaging.utils import canonicalize_name
    from packaging.version import Version
    lines = (REPO / "constraints.txt").read_text().splitlines()
    pins = {canonicalize_name(name): Version(version)
            for name, _, version in (line.partition("==") for line in lines
                                     if line.strip() and not line.startswith("#"))}
    project = PYPROJECT["project"]
    texts = [*project["dependencies"], *(text for extra in project["optional-dependencies"].values()
                                         for text in extra)]
    for requirement in _requirements(texts):
        if requirement.name == "vdla":
            continue
        pin = pins.get(canonicalize_name(requirement.name))
        assert pin is not None and pin in requirement.specifier, (str(requirement), pin)


def test_a_plain_install_brings_onnxruntime():
    """``pip install -e .`` (the README's set-up) runs every column of ``vdla compare`` and the
    model references: onnxruntime is no extra."""
    names = {requirement.name for requirement in _requirements(PYPROJECT["project"]["dependencies"])}
    assert {"onnx", "onnxruntime"} <= names
    assert PYPROJECT["project"]["optional-dependencies"]["compare"] == []



def test_the_fast_profile_leaves_out_every_verilator_and_cocotb_test():
    """README's fast profile: a test in tests/rtl or tests/cocotb is ``rtl`` (and ``cocotb``)
    by its folder, whether or not its module says so."""
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
                             "--collect-only", "-q", "-m", "not slow and not rtl and not cocotb",
                             "tests/rtl", "tests/cocotb"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout[-2000:]
    assert re.search(r"no tests collected \(\d+ deselected\)", result.stdout)
