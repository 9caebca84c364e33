"""Checks the test extras are installed, marks the Verilator and cocotb suites by their folders,
and skips tests marked ``gpu`` where no CUDA device can be used."""

from pathlib import Path

import pytest

# Every test in these folders builds or runs a Verilator model: the fast profile
# (``-m "not slow and not rtl and not cocotb"``) leaves them out whether or not a module
# remembers its ``pytestmark``.
FOLDER_MARKS = {"rtl": ("rtl",), "cocotb": ("cocotb", "rtl")}
TESTS = Path(__file__).resolve().parent

# What pyproject.toml's addopts need: without pytest-xdist, pytest would stop at ``-n auto`` with
# "unrecognized arguments", which does not say what to install.
INSTALL_HINT = "pip install -c constraints.txt -e '.[test]'"


def pytest_addoption(parser, pluginmanager):
    if not pluginmanager.hasplugin("xdist"):
        raise pytest.UsageError("pytest-xdist is missing, and pyproject.toml's addopts run the tests with "
                                f"-n auto: install the test extras with {INSTALL_HINT}")


@pytest.hookimpl(tryfirst=True)   # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(item.path).resolve()
        folder = path.relative_to(TESTS).parts[0] if path.parent != TESTS and \
            path.is_relative_to(TESTS) else ""
        for mark in FOLDER_MARKS.get(folder, ()):
            item.add_marker(mark)


@pytest.fixture(autouse=True)
def _skip_without_gpu(request):
    if request.node.get_closest_marker("gpu") is not None:
        from vdla.compiler.gpu.kernel import gpu_unavailable_reason
        reason = gpu_unavailable_reason()
        if reason is not None:
            pytest.skip(f"gpu test: {reason}")
