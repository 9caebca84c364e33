"""The ``.vdla`` program file: a compiled `Program` on disk, versioned and checked.

Layout (all integers little-endian)::

    magic            8 bytes   b"VDLAPROG"
    format version   uint32    runtime.program.FORMAT_VERSION
    header length    uint32    bytes of the JSON header that follows
    header           JSON      config, config hash, tensors, offsets, dram_bytes,
                               metadata, instruction and micro-op counts,
                               target ("accel", "cpu" or "gpu"; absent means "accel")
    instructions     insn_count x INSN_BYTES, exactly as DRAM holds them
    micro-ops        uop_count x UOP_BYTES (uint32 words)
    digest           32 bytes  SHA-256 of everything before it

The instructions and micro-ops are stored encoded, the form every backend
consumes, so a file is also a check that the program encodes for its config.
Any damage (a flipped bit, truncation) fails the digest before anything is
parsed. A file whose digest holds may still have been written by hand, so
`load` also bounds what it reads, checks the header field by field (types,
``config_hash`` against the config) and verifies the DRAM plan
(`runtime.verify.verify_plan`) or, for a ``cpu`` or ``gpu`` program, every
header field against its op (`compiler.host.host_spec`: such a file holds
no code) before a `Program` comes back.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Callable

import numpy as np

from vdla.errors import VdlaError
from vdla.hw import isa
from vdla.hw.config import ConfigError, HwConfig
from vdla.files import write_atomic
from vdla.records import parse_json
from vdla.runtime.errors import ProgramError
from vdla.runtime.program import FORMAT_VERSION, PROGRAM_TARGETS, Program, TensorRegion
from vdla.runtime.verify import MAX_DRAM_BYTES, verify_plan

__all__ = ["save", "load", "dumps", "loads", "verify_program_header", "register_header_check",
           "ProgramFileError", "MAGIC", "FORMAT_VERSION", "MAX_HEADER_BYTES", "max_file_bytes"]

MAGIC = b"VDLAPROG"
_PREAMBLE = struct.Struct("<8sII")  # magic, version, header length
_DIGEST_BYTES = 32
# The header holds the config, the DRAM plan and the compiler's metadata: a few
# kilobytes; 16 MiB leaves room for any metadata while bounding what is read.
MAX_HEADER_BYTES = 1 << 24


class ProgramFileError(VdlaError, ValueError):
    """A program file that is damaged, of another version, or for other hardware."""


def dumps(program: Program) -> bytes:
    """Serialise a program to the bytes of a ``.vdla`` file.

    Raises
    ------
    ProgramFileError
        If the metadata is not JSON-serialisable or an instruction or
        micro-op does not encode for the program's config.
    """
    config = program.config
    try:
        code = isa.encode_program(program.instructions, config).tobytes()
        uops = isa.encode_uops(program.uops, config).astype("<u4").tobytes()
    except isa.IsaError as error:
        raise ProgramFileError(f"cannot save program: {error}") from None
    header = {
        "config": config.to_dict(),
        "config_hash": config.hash,
        "tensors": [{"name": t.name, "role": t.role, "layout": t.layout,
                     "shape": [int(n) for n in t.shape], "dram_offset": int(t.dram_offset)}
                    for t in program.tensors],
        "insn_offset": int(program.insn_offset),
        "uop_offset": int(program.uop_offset),
        "dram_bytes": int(program.dram_bytes),
        "insn_count": len(program.instructions),
        "uop_count": len(program.uops),
        "metadata": program.metadata,
        "target": program.target,
    }
    try:
        text = json.dumps(header, sort_keys=True).encode()
    except (TypeError, ValueError) as error:
        raise ProgramFileError(f"cannot save program: metadata is not JSON-serialisable "
                               f"({error})") from None
    body = _PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(text)) + text + code + uops
    return body + hashlib.sha256(body).digest()


def save(program: Program, path: str | Path) -> Path:
    """Write ``program`` to ``path`` (conventionally ``*.vdla``).

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    ProgramFileError
        If the program cannot be serialised or the file cannot be written.
    """
    path = Path(path)
    data = dumps(program)
    try:
        # Aside and renamed: a failed write leaves an existing file as it was.
        write_atomic(path, lambda handle: handle.write(data))
    except OSError as error:
        raise ProgramFileError(f"{path}: cannot write ({error.strerror or error})") from None
    return path


def _integer(value, what: str) -> int:
    """A JSON integer (not a float, bool or string) or a `ProgramFileError`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProgramFileError(f"{what} must be an integer, got {value!r:.60}")
    return value


def _header(text: bytes, source: str) -> dict:
    """The parsed header object, or one `ProgramFileError` naming what is wrong."""
    header = parse_json(text, ProgramFileError, f"{source}: header")
    if not isinstance(header, dict):
        raise ProgramFileError(f"{source}: malformed header (a JSON object is needed, got "
                               f"{type(header).__name__})")
    return header


def loads(data: bytes, config: HwConfig | None = None, source: str = "program file", *,
          verify: bool = True) -> Program:
    """Parse the bytes of a ``.vdla`` file; see `load`.

    ``verify=False`` skips `verify_program_header` (for tools that show a
    broken file; the runners verify again before a run).
    """
    if len(data) < _PREAMBLE.size:
        if not data or not MAGIC.startswith(data[:len(MAGIC)]):
            raise ProgramFileError(f"{source}: not a vdla program file (it does not start "
                                   f"with {MAGIC!r})")
        raise ProgramFileError(f"{source}: truncated ({len(data)} bytes; a program file "
                               f"starts with a {_PREAMBLE.size}-byte preamble)")
    if data[:len(MAGIC)] != MAGIC:
        raise ProgramFileError(f"{source}: not a vdla program file (bad magic "
                               f"{data[:len(MAGIC)]!r}, expected {MAGIC!r})")
    _, version, header_length = _PREAMBLE.unpack_from(data)
    if version != FORMAT_VERSION:
        raise ProgramFileError(f"{source}: format version {version} is not supported "
                               f"(this vdla reads version {FORMAT_VERSION}); recompile it")
    if len(data) < _PREAMBLE.size + header_length + _DIGEST_BYTES:
        raise ProgramFileError(f"{source}: truncated ({len(data)} bytes, the header alone "
                               f"needs {_PREAMBLE.size + header_length + _DIGEST_BYTES})")
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise ProgramFileError(f"{source}: damaged or truncated (SHA-256 integrity check "
                               "failed)")
    header = _header(body[_PREAMBLE.size:_PREAMBLE.size + header_length], source)
    try:
        file_config = HwConfig.from_dict(header["config"])
        if header["config_hash"] != file_config.hash:
            raise ProgramFileError(f"config_hash {header['config_hash']!r:.40} does not match "
                                   f"its config (hash {file_config.hash})")
        insn_count = _integer(header["insn_count"], "insn_count")
        uop_count = _integer(header["uop_count"], "uop_count")
        if not isinstance(header["tensors"], list) or not all(
                isinstance(t, dict) for t in header["tensors"]):
            raise ProgramFileError("tensors must be a list of objects")
        tensors = [TensorRegion(name=t["name"], role=t["role"], layout=t["layout"],
                                shape=tuple(_integer(n, f"tensor {t['name']!r:.40}'s shape")
                                            for n in t["shape"]),
                                dram_offset=_integer(t["dram_offset"], "dram_offset"))
                   for t in header["tensors"]]
        offsets = {key: _integer(header[key], key)
                   for key in ("insn_offset", "uop_offset", "dram_bytes")}
        metadata = header["metadata"]
        target = header.get("target", "accel")
        if not isinstance(metadata, dict):
            raise ProgramFileError(f"metadata must be a JSON object, got "
                                   f"{type(metadata).__name__}")
    except (ProgramFileError, KeyError, TypeError, ConfigError) as error:
        what = str(error) if isinstance(error, (ProgramFileError, ConfigError)) \
            else f"{type(error).__name__}: {error}"
        raise ProgramFileError(f"{source}: malformed header ({what})") from None
    if config is not None and not config.same_hardware(file_config):
        raise ProgramFileError(
            f"{source}: compiled for hardware {file_config.name!r} (config hash "
            f"{file_config.hash}), not for {config.name!r} (config hash {config.hash}); "
            "recompile it for this config")
    if target not in PROGRAM_TARGETS:
        raise ProgramFileError(f"{source}: unknown target {target!r} (known: "
                               f"{', '.join(PROGRAM_TARGETS)})")
    start = _PREAMBLE.size + header_length
    code_end = start + insn_count * isa.INSN_BYTES
    uop_end = code_end + uop_count * isa.UOP_BYTES
    if insn_count < 0 or uop_count < 0 or uop_end != len(body):
        raise ProgramFileError(f"{source}: the header announces {insn_count} instructions and "
                               f"{uop_count} micro-ops, which do not match the file's size")
    try:
        instructions = isa.decode_program(body[start:code_end], file_config)
    except isa.IsaError as error:
        raise ProgramFileError(f"{source}: {error}") from None
    words = np.frombuffer(body[code_end:uop_end], dtype="<u4")
    dst, src, wgt = isa.decode_uops(words, file_config)
    uops = [isa.Uop(int(d), int(s), int(w)) for d, s, w in zip(dst, src, wgt)]
    program = Program(config=file_config, instructions=instructions, uops=uops, tensors=tensors,
                      metadata=metadata, target=target, **offsets)
    if verify:
        try:
            verify_program_header(program)
        except ProgramError as error:
            raise ProgramFileError(f"{source}: {error}") from None
    return program


# The header checks of the host targets' programs (``cpu``, ``gpu``), by target.
# Checking one means regenerating its code from its op, which only the compiler
# (the layer above) can do: `compiler.host` registers `host_spec` here on import.
_HOST_HEADER_CHECKS: dict[str, Callable[[Program], object]] = {}


def register_header_check(target: str, check: Callable[[Program], object]) -> None:
    """Make `verify_program_header` check ``target``'s programs with ``check``.

    ``check(program)`` raises `ProgramError` naming the first problem.
    """
    _HOST_HEADER_CHECKS[target] = check


def verify_program_header(program: Program) -> None:
    """What `loads` verifies of a program.

    An accelerator program's DRAM plan (`runtime.verify.verify_plan`); a
    host program's header against its op (`compiler.host.host_spec`, through
    `register_header_check`).

    Raises
    ------
    ProgramError
        Naming the first problem found; for a host program whose check is not
        registered (the compiler not imported), saying so rather than passing it.
    """
    if program.target == "accel":
        verify_plan(program)
        return
    check = _HOST_HEADER_CHECKS.get(program.target)
    if check is None:
        raise ProgramError(f"cannot verify a {program.target} program here: its header check "
                           "comes with the compiler (import vdla.compiler first)")
    check(program)


def max_file_bytes(header_length: int) -> int:
    """The most bytes a valid file with this header length can have.

    Its instructions and micro-ops live in the program's DRAM image, which
    `runtime.verify.MAX_DRAM_BYTES` bounds.
    """
    return _PREAMBLE.size + header_length + MAX_DRAM_BYTES + _DIGEST_BYTES


def load(path: str | Path, config: HwConfig | None = None, *, verify: bool = True) -> Program:
    """Read a ``.vdla`` file, verifying its header and DRAM plan (`runtime.verify`).

    Reading stops as soon as the file is known not to be a valid one: a
    wrong preamble after 16 bytes, a header longer than `MAX_HEADER_BYTES`,
    or more bytes than `max_file_bytes` (so special files such as
    ``/dev/zero`` end in an error, not in memory exhaustion).

    Parameters
    ----------
    path : str or pathlib.Path
    config : HwConfig, optional
        When given, the file must have been compiled for the same hardware
        (same `HwConfig.hash`; the name may differ).
    verify : bool
        As for `loads`.

    Raises
    ------
    ProgramFileError
        Missing, damaged or truncated file, wrong magic, unsupported format
        version, malformed header, a DRAM plan `runtime.verify.verify_plan`
        rejects, a host program header `compiler.host.host_spec` rejects, or
        a program for other hardware.
    """
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(_PREAMBLE.size)
            if len(data) == _PREAMBLE.size and data.startswith(MAGIC):
                header_length = _PREAMBLE.unpack_from(data)[2]
                if header_length > MAX_HEADER_BYTES:
                    raise ProgramFileError(f"{path}: header of {header_length} bytes announced, "
                                           f"more than any program file has "
                                           f"({MAX_HEADER_BYTES})")
                limit = max_file_bytes(header_length)
                data += handle.read(limit - len(data) + 1)
                if len(data) > limit:
                    raise ProgramFileError(f"{path}: larger than any valid program file "
                                           f"({limit} bytes)")
    except OSError as error:
        raise ProgramFileError(f"{path}: cannot read ({error.strerror or error})") from None
    return loads(data, config, source=str(path), verify=verify)
