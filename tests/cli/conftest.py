"""Fixtures of the CLI tests.

``layer``: a saved dense program with its inputs as .npy files and the
expected output, for ``vdla run`` and ``vdla inspect``. The session-wide RTL
builds of `tests.rtl.conftest` are imported for ``vdla hw model`` (the build
cache makes the second import of a build a cache hit).
"""

import numpy as np
import pytest

from vdla.hw.config import PRESETS
from vdla.runtime.program_file import save
from tests.rtl.conftest import chip_build, tiny  # noqa: F401  (pytest fixtures)
from tests.runtime.programs import dense_inputs, dense_program, dense_reference


@pytest.fixture
def layer(tmp_path):
    """A saved dense program, its inputs as .npy files, and the expected output."""
    program = dense_program(PRESETS["tiny"], 3, 8, 4)
    path = save(program, tmp_path / "dense.vdla")
    inputs = dense_inputs(np.random.default_rng(5), 3, 8, 4)
    args = []
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    return path, args, dense_reference(inputs), tmp_path
