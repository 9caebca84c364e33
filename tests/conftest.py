"""Checks the test extras are installed, and skips tests marked ``gpu`` where no CUDA device can be used."""

import pytest

# What pyproject.toml's addopts need: without pytest-xdist, pytest would stop at ``-n auto`` with
# "unrecognized arguments", which does not say what to install.
INSTALL_HINT = "pip install -c constraints.txt -e '.[test]'"


def pytest_addoption(parser, pluginmanager):
    if not pluginmanager.hasplugin("xdist"):
        raise pytest.UsageError("pytest-xdist is missing, and pyproject.toml's addopts run the tests with "
                                f"-n auto: install the test extras with {INSTALL_HINT}")


@pytest.fixture(autouse=True)
def _skip_without_gpu(request):
    if request.node.get_closest_marker("gpu") is not None:
        from vdla.compiler.gpu.kernel import gpu_unavailable_reason
        reason = gpu_unavailable_reason()
        if reason is not None:
            pytest.skip(f"gpu test: {reason}")
