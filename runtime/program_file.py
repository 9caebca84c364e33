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
parsed.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np

from vdla.hw import isa
from vdla.hw.config import ConfigError, HwConfig
from vdla.runtime.program import FORMAT_VERSION, TARGETS, Program, TensorRegion

__all__ = ["save", "load", "dumps", "loads", "ProgramFileError", "MAGIC", "FORMAT_VERSION"]

MAGIC = b"VDLAPROG"
_PREAMBLE = struct.Struct("<8sII")  # magic, version, header length
_DIGEST_BYTES = 32


class ProgramFileError(ValueError):
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
    """
    path = Path(path)
    path.write_bytes(dumps(program))
    return path


def loads(data: bytes, config: HwConfig | None = None, source: str = "program file") -> Program:
    """Parse the bytes of a ``.vdla`` file; see `load`."""
    if len(data) < _PREAMBLE.size or data[:len(MAGIC)] != MAGIC:
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
    try:
        header = json.loads(body[_PREAMBLE.size:_PREAMBLE.size + header_length])
        file_config = HwConfig.from_dict(header["config"])
        insn_count, uop_count = int(header["insn_count"]), int(header["uop_count"])
        tensors = [TensorRegion(name=t["name"], role=t["role"], layout=t["layout"],
                                shape=tuple(int(n) for n in t["shape"]),
                                dram_offset=int(t["dram_offset"])) for t in header["tensors"]]
        offsets = {key: int(header[key]) for key in ("insn_offset", "uop_offset", "dram_bytes")}
        metadata = header["metadata"]
        target = header.get("target", "accel")
    except (ValueError, KeyError, TypeError, ConfigError) as error:
        raise ProgramFileError(f"{source}: malformed header ({type(error).__name__}: "
                               f"{error})") from None
    if config is not None and not config.same_hardware(file_config):
        raise ProgramFileError(
            f"{source}: compiled for hardware {file_config.name!r} (config hash "
            f"{file_config.hash}), not for {config.name!r} (config hash {config.hash}); "
            "recompile it for this config")
    if target not in TARGETS:
        raise ProgramFileError(f"{source}: unknown target {target!r} (known: "
                               f"{', '.join(TARGETS)})")
    start = _PREAMBLE.size + header_length
    code_end = start + insn_count * isa.INSN_BYTES
    uop_end = code_end + uop_count * isa.UOP_BYTES
    if uop_end != len(body):
        raise ProgramFileError(f"{source}: the header announces {insn_count} instructions and "
                               f"{uop_count} micro-ops, which do not match the file's size")
    try:
        instructions = isa.decode_program(body[start:code_end], file_config)
    except isa.IsaError as error:
        raise ProgramFileError(f"{source}: {error}") from None
    words = np.frombuffer(body[code_end:uop_end], dtype="<u4")
    dst, src, wgt = isa.decode_uops(words, file_config)
    uops = [isa.Uop(int(d), int(s), int(w)) for d, s, w in zip(dst, src, wgt)]
    return Program(config=file_config, instructions=instructions, uops=uops, tensors=tensors,
                   metadata=metadata, target=target, **offsets)


def load(path: str | Path, config: HwConfig | None = None) -> Program:
    """Read a ``.vdla`` file.

    Parameters
    ----------
    path : str or pathlib.Path
    config : HwConfig, optional
        When given, the file must have been compiled for the same hardware
        (same `HwConfig.hash`; the name may differ).

    Raises
    ------
    ProgramFileError
        Missing, damaged or truncated file, wrong magic, unsupported format
        version, malformed header, or a program for other hardware.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ProgramFileError(f"{path}: cannot read ({error.strerror or error})") from None
    return loads(data, config, source=str(path))
