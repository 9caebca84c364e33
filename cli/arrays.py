"""The arrays and output files the commands take: ``.npy`` inputs read safely, outputs checked.

`read_npy` reads an array only after its header is checked against what is
expected, so a huge or hostile ``.npy`` costs nothing; `read_inputs` checks
the names of a program's or a network's inputs before it reads any of them;
`output_paths` and `writable` check ``--output``-like paths before anything
runs, and `write_outputs` writes each exactly where it was named, atomically.
"""

from __future__ import annotations

import tokenize
from pathlib import Path

import numpy as np

from vdla.cli.options import fail, write_output
from vdla.files import open_for_reading
from vdla.runtime.runner import describe_array

__all__ = ["read_npy", "read_inputs", "output_paths", "writable", "write_outputs",
           "MAX_NPY_BYTES"]


# What numpy's .npy header parser raises on damaged headers (it tokenizes and
# evaluates a Python literal).
_NPY_HEADER_ERRORS = (ValueError, EOFError, SyntaxError, TypeError, KeyError,
                      tokenize.TokenError)


# The most a ``.npy`` of no expected shape may hold (calibration sets, a
# network's input): the 1 GiB that bounds a program's tensors too.
MAX_NPY_BYTES = 1 << 30


def read_npy(path: str, what: str, expected=None, any_float: bool = False) -> np.ndarray:
    """One ``.npy`` array, its header checked before any data is read.

    ``expected`` (a `TensorRegion`, or anything with its ``dtype`` and
    ``shape``) bounds what is read: an array of another dtype or shape is
    refused from its header, so a file announcing a huge shape (or a special
    file such as ``/dev/zero``) is never read in; with ``any_float``, any
    float dtype of that shape is taken (a network converts its float inputs).
    Without ``expected``, a numeric array of at most `MAX_NPY_BYTES` is read.
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
            else:
                want = (np.dtype(expected.dtype), tuple(expected.shape))
                if (tuple(shape) != want[1]
                        or dtype != want[0] and not (any_float and dtype.kind == "f")):
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


def read_inputs(pairs: dict[str, str], expected: dict, owner: str = "program",
                any_float: bool = False) -> dict[str, np.ndarray]:
    """The arrays of ``pairs`` (input name to ``.npy`` path), each read bounded by its
    ``expected`` entry (anything with ``dtype`` and ``shape``, as for `read_npy`).

    Unknown and missing names are refused, all of them named, before any file is
    read: only a known shape bounds a read. ``owner`` names what takes the inputs.
    """
    unknown = [name for name in pairs if name not in expected]
    if unknown:
        fail(f"unknown input{'s' if len(unknown) > 1 else ''} "
             f"{', '.join(map(repr, unknown))}: the {owner}'s inputs are "
             f"{', '.join(sorted(expected)) or 'none'}")
    missing = [name for name in expected if name not in pairs]
    if missing:
        shapes = [describe_array(expected[name].dtype, expected[name].shape)
                  for name in missing]
        fail(f"missing input{'s' if len(missing) > 1 else ''} "
             f"{' and '.join(map(repr, missing))}: expected {' and '.join(shapes)}")
    return {name: read_npy(path, f"input {name!r}", expected[name], any_float)
            for name, path in pairs.items()}


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


def write_outputs(paths: dict[str, Path], arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """Write each array of ``arrays`` named in ``paths`` to its ``.npy`` file, atomically
    (`cli.options.write_output`), at exactly that path; the paths written, by name."""
    written = {}
    for name, path in paths.items():
        # Through a handle: np.save(path) would append ".npy" to other names.
        write_output(path, lambda handle, array=arrays[name]: np.save(
            handle, array, allow_pickle=False), f"output {name!r}")
        written[name] = str(path)
    return written
