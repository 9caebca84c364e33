"""The arrays and output files the commands take: ``.npy`` inputs read safely, outputs checked.

`read_npy` reads an array only after its header is checked against what is
expected, so a huge or hostile ``.npy`` costs nothing; `output_paths` and
`writable` check ``--output``-like paths before anything runs.
"""

from __future__ import annotations

import tokenize
from pathlib import Path

import numpy as np

from vdla.cli.options import fail
from vdla.files import open_for_reading
from vdla.runtime.runner import describe_array

__all__ = ["read_npy", "output_paths", "writable", "MAX_NPY_BYTES"]


# What numpy's .npy header parser raises on damaged headers (it tokenizes and
# evaluates a Python literal).
_NPY_HEADER_ERRORS = (ValueError, EOFError, SyntaxError, TypeError, KeyError,
                      tokenize.TokenError)


# The most a ``.npy`` of no expected shape may hold (calibration sets, a
# network's input): the 1 GiB that bounds a program's tensors too.
MAX_NPY_BYTES = 1 << 30


def read_npy(path: str, what: str, expected=None) -> np.ndarray:
    """One ``.npy`` array, its header checked before any data is read.

    ``expected`` (a `TensorRegion`) bounds what is read: an array of another
    dtype or shape is refused from its header, so a file announcing a huge
    shape (or a special file such as ``/dev/zero``) is never read in. Without
    it, a numeric array of at most `MAX_NPY_BYTES` is read.
    """
    from numpy.lib import format as npy
    try:
        with open_for_reading(path) as handle:
            try:
                version = npy.read_magic(handle)
                read_header = {(1, 0): npy.read_array_header_1_0,
                               (2, 0): npy.read_array_header_2_0}.get(version)
                if read_header is None:
                    raise ValueError(f".npy format version {version} is not supported")
                shape, _, dtype = read_header(handle)
            except _NPY_HEADER_ERRORS as error:
                fail(f"{what}: cannot read {path} as a .npy array "
                     f"({str(error) or 'empty file'})")
            if dtype.hasobject:
                fail(f"{what}: {path} holds Python objects; give a numeric .npy array")
            if expected is None:
                if dtype.itemsize * int(np.prod(shape, dtype=object)) > MAX_NPY_BYTES:
                    fail(f"{what}: {path} announces {describe_array(dtype, shape)}, more than "
                         f"the {MAX_NPY_BYTES}-byte limit")
            elif ((dtype, tuple(shape))
                  != (want := (np.dtype(expected.dtype), tuple(expected.shape)))):
                fail(f"{what}: expected {describe_array(*want)}, got "
                     f"{describe_array(dtype, shape)} ({path})")
            handle.seek(0)
            array = np.load(handle, allow_pickle=False)
    except FileNotFoundError:
        fail(f"{what}: no such file {path}")
    except IsADirectoryError:
        fail(f"{what}: {path} is a directory")
    except (OSError, ValueError, EOFError) as error:
        fail(f"{what}: cannot read {path} as a .npy array ({error})")
    return array


def output_paths(values, program) -> dict[str, Path]:
    """``--output FILE`` for a single output, or ``--output NAME=FILE`` per output."""
    names = [region.name for region in program.outputs]
    paths = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            if len(names) != 1:
                fail(f"--output {value!r}: the program has outputs {', '.join(names)}; "
                      "use --output NAME=FILE")
            name, path = names[0], value
        if name in paths:
            fail(f"--output {name!r} given twice")
        if not path:
            fail(f"--output {value!r}: expected [NAME=]FILE")
        if name not in names:
            fail(f"--output {name!r}: the program has no such output "
                  f"(outputs: {', '.join(names)})")
        paths[name] = writable(path, f"--output {name}")
    return paths


def writable(path: str, option: str, exists_ok_special: bool = True) -> Path:
    """``path`` if its folder exists (nothing is created); else fail with one line."""
    path = Path(path)
    if path.is_dir():
        fail(f"{option} {path}: is a directory")
    if not path.parent.is_dir():
        fail(f"{option} {path}: the folder {path.parent} does not exist")
    if not exists_ok_special and path.exists() and not path.is_file():
        fail(f"{option} {path}: not a regular file")
    return path
