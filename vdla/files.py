"""Reading and writing the files users hand to vdla, safely.

Every layer reads files a user names (configs, schedules, tuning and DSE
logs, design spaces) and writes files a user asks for (outputs, reports).
Two rules hold for all of them, written once here:

- a read never takes more than a stated number of bytes (`read_bounded`,
  `bounded_lines`), so ``/dev/zero`` or a huge file is refused in one line
  instead of filling memory;
- a write goes to a temporary file beside the target and is renamed over it
  only once complete (`write_atomic`), so a failed write (a full disk, a file
  size limit, a kill) leaves an existing file as it was;
- text a file holds (a name, a key) reaches the terminal through `printable`,
  so a crafted file cannot move the cursor, retitle the window or forge lines.

This module imports nothing from vdla, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Callable, Iterator

__all__ = ["read_bounded", "bounded_lines", "open_for_reading", "write_atomic", "printable"]


def _cannot_read(error: type[Exception], what: str, path, problem: OSError) -> Exception:
    if isinstance(problem, IsADirectoryError):
        return error(f"cannot read {what} {path}: it is a directory")
    return error(f"cannot read {what} {path}: {problem.strerror or problem}")


def read_bounded(path: str | Path, limit: int, what: str,
                 error: type[Exception] = ValueError) -> bytes:
    """The bytes of ``path``, never reading more than ``limit`` (+1 to know it is more).

    Parameters
    ----------
    path : str or pathlib.Path
    limit : int
        The most bytes a valid ``what`` file holds.
    what : str
        What the file is, for messages (``"tuning log"``, ``"config"``).
    error : exception class
        Raised for every failure, with a one-line message naming the file.

    Raises
    ------
    error
        If the file cannot be read or holds more than ``limit`` bytes (special
        files such as ``/dev/zero`` included).
    """
    try:
        with open_for_reading(path) as handle:
            if os.fstat(handle.fileno()).st_size > limit:   # a regular file, known at once
                raise error(f"{what} {path}: larger than {limit} bytes, not a {what} file")
            data = handle.read(limit + 1)
    except OSError as problem:
        raise _cannot_read(error, what, path, problem) from None
    if len(data) > limit:
        raise error(f"{what} {path}: larger than {limit} bytes, not a {what} file")
    return data


def open_for_reading(path: str | Path) -> IO[bytes]:
    """``path`` opened for blocking reads, without blocking in the open itself.

    A plain open of a FIFO waits for a writer, possibly forever; opened
    non-blocking it returns at once (a FIFO nobody writes reads as empty).
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


# Bytes read at a time by `bounded_lines`.
_BLOCK = 1 << 20


def bounded_lines(path: str | Path, limit: int, line_limit: int, what: str,
                  error: type[Exception] = ValueError) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number, line)`` of ``path`` (without its newline), reading at most
    ``limit`` bytes in all and ``line_limit`` per line; a missing file yields nothing.

    Memory stays bounded by the longest line, whatever the file is. A last line
    without a newline (a writer killed mid-line) is yielded like the others.

    Raises
    ------
    error
        If the file cannot be read, a line is longer than ``line_limit`` or the
        file longer than ``limit`` bytes.
    """
    try:
        handle = open_for_reading(path)
    except FileNotFoundError:
        return
    except OSError as problem:
        raise _cannot_read(error, what, path, problem) from None

    def check_line(number: int, line: bytes) -> None:
        if len(line) > line_limit:
            raise error(f"{what} {path}:{number}: a line longer than {line_limit} bytes, "
                        f"not a {what} file")

    with handle:
        if os.fstat(handle.fileno()).st_size > limit:       # a regular file, known at once
            raise error(f"{what} {path}: larger than {limit} bytes, not a {what} file")
        pending, number, total = b"", 0, 0
        while True:
            try:
                block = handle.read(_BLOCK)
            except OSError as problem:
                raise _cannot_read(error, what, path, problem) from None
            total += len(block)
            if total > limit:
                raise error(f"{what} {path}: larger than {limit} bytes, not a {what} file")
            if not block:
                if pending:
                    yield number + 1, pending
                return
            lines = (pending + block).split(b"\n")
            pending = lines.pop()
            check_line(number + len(lines) + 1, pending)
            for line in lines:
                number += 1
                check_line(number, line)
                yield number, line


def _mode_for(path: Path) -> int:
    """An existing file's permissions, else what a plain ``open(path, "w")`` would give
    (a temporary file is created private)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomic(path: str | Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``path`` through ``write(handle)`` on a temporary file, then rename it over.

    The temporary file sits in the target's folder (a rename within one file
    system is atomic) and is removed if anything fails, so ``path`` holds
    either its old contents or the complete new ones. A special file
    (``/dev/null``, ``/dev/stdout``, a FIFO) is written in place.

    Raises
    ------
    OSError
        As the write raised it (the caller names the file in its own words).
    """
    path = Path(path)
    if path.is_symlink():           # write the file it names; keep the link
        path = path.resolve()
    if path.exists() and not path.is_file() and not path.is_dir():
        # /dev/null, /dev/stdout, a FIFO: written in place, never renamed over.
        with open(path, "wb") as handle:
            write(handle)
        return
    handle = tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp", delete=False)
    try:
        with handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(handle.name, _mode_for(path))
        os.replace(handle.name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
        raise


def printable(text: object) -> str:
    """``text`` (made a string) with every character Python calls unprintable escaped.

    Control characters (escape sequences, bells, newlines, tabs), format characters
    (bidirectional overrides, zero-width ones) and separators other than the
    space are written as their escape (``\\x1b``, ``\\n``, ``\\u202e``), so what a
    file holds is shown, never obeyed by the terminal, and stays on its line.
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
                   for char in text)
