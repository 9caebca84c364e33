"""Verilog generation for the accelerator top.

Amaranth writes an explicit all-zero initial value for every memory (a
``$meminit_v2`` cell in RTLIL), which Yosys turns into one ``initial``
assignment per word: for the default config that was ~5 s of the ~7 s
conversion and thousands of Verilog lines. No memory in the design relies on
its initial contents (SRAMs are written by loads before they are read; FIFO
storage is only read after being written), and simulators start arrays at
zero anyway (Verilator's default), so `verilog` leaves the all-zero init out:
while converting, Amaranth's RTLIL emitter skips a memory's init cell when
every row is zero (a scoped patch of the private
``amaranth.back.rtlil.ModuleEmitter.emit_memory`` of the pinned Amaranth
0.5.10; should that method ever be missing, the cells are removed from the
RTLIL text instead, slower but the same result). Pass
``keep_memory_init=True`` to get Amaranth's unmodified output.

`cached_verilog` memoises the text in the one build cache (`vdla.cache`,
kind ``verilog``), which verifies it before every read: a truncated or
edited file is generated again, never handed to Verilator.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
from pathlib import Path

from amaranth.back import rtlil
from amaranth.back.verilog import _convert_rtlil_text

from vdla.hw.accelerator import Accelerator
from vdla.hw.banked_memory import NO_RW_CHECK
from vdla import cache
from vdla.cache import tool_cache_environment
from vdla.hw.config import HwConfig

__all__ = ["verilog", "cached_verilog", "hw_source_digest", "verilog_digest", "TOP_NAME",
           "mark_collision_dont_care", "strip_zero_memory_init", "without_zero_memory_init"]

TOP_NAME = "vdla_accelerator"
VERILOG_FILE = f"{TOP_NAME}.v"

# One `$meminit_v2` cell block of Amaranth's RTLIL output.
_MEMINIT = re.compile(r"^(?:  attribute [^\n]*\n)*  cell \$meminit_v2 [^\n]*\n(?:    [^\n]*\n)*?  end\n",
                      re.MULTILINE)
_DATA = re.compile(r"^    connect \\DATA \d+'([01xz]*)$", re.MULTILINE)


def strip_zero_memory_init(text: str) -> str:
    """``text`` (RTLIL) without its all-zero memory initialisations, where
    `without_zero_memory_init` could not keep Amaranth from writing them."""
    def drop_if_zero(match: re.Match) -> str:
        data = _DATA.search(match.group(0))
        if data is not None and set(data.group(1)) <= {"0"}:
            return ""
        return match.group(0)
    return _MEMINIT.sub(drop_if_zero, text)


@contextlib.contextmanager
def without_zero_memory_init():
    """While open, Amaranth's RTLIL back end writes no all-zero memory initialisation;
    yields False where this Amaranth has no hook for it (then `strip_zero_memory_init`)."""
    emitter = getattr(rtlil, "ModuleEmitter", None)
    original = getattr(emitter, "emit_memory", None)
    if original is None:
        yield False
        return

    def emit_memory(self, cell_idx, cell):
        if any(cell.init):
            original(self, cell_idx, cell)

    emitter.emit_memory = emit_memory
    try:
        yield True
    finally:
        emitter.emit_memory = original


_MODULE = re.compile(r"^module .*?^end$", re.MULTILINE | re.DOTALL)
_MARKED_MEMORY = re.compile(r"^ *attribute \\%s 1\n(?: *attribute [^\n]*\n)* *memory [^\n]* \\(\S+)$"
                            % NO_RW_CHECK, re.MULTILINE)
_MEMRD = re.compile(r"^( *cell \$memrd_v2 [^\n]*\n(?: {4}[^\n]*\n)*? *end)$", re.MULTILINE)


def mark_collision_dont_care(text: str) -> str:
    """RTLIL ``text`` with the read ports of every memory carrying `hw.banked_memory.NO_RW_CHECK`
    marked "undefined on a read/write collision" (``COLLISION_X_MASK`` all ones).

    Amaranth writes each read port as a ``$memrd_v2`` cell that must return the
    old data when its entry is written in the same cycle (``transparent_for=()``);
    iCE40 block RAMs leave that undefined, so Yosys adds flip-flops and
    comparators to give it. Yosys's ``no_rw_check`` attribute waives that only
    for memories it infers itself, hence this rewrite. The Verilog Yosys writes
    from it reads all-x on a collision; the RTL tier and the board simulation
    build that Verilog (Verilator picks a value for x, not necessarily the old
    data), and the board test runs the ``icebreaker`` preset bit-exactly. It is
    sound because no buffer is read and written at one entry in one cycle:

    * inp, wgt and out: the writer (load; compute) and the reader (compute;
      store) are other modules, and every program is checked (`sim.checker`)
      to order each write of an entry after every other component's access and
      each read after its write by dependency tokens, which the hardware
      honours before it starts an instruction;
    * uop: uop LOADs run alone, after both compute units have drained
      (`hw.compute`), and the units read micro-ops only while they issue them;
    * acc: acc LOADs run alone too, and within a unit a read that meets the
      S6 write of its row is replaced, the cycle after, by the result S7 holds
      for that row (`hw.unit_pipeline`'s forwarding), so its data is never used.

    ``tests/rtl/test_collisions.py`` checks it: a model whose colliding reads
    return the complement of the old data still runs random programs to fsim's
    images.
    """
    def module(match: re.Match) -> str:
        body = match.group(0)
        marked = {name for name in _MARKED_MEMORY.findall(body)}
        if not marked:
            return body

        def port(cell: re.Match) -> str:
            block = cell.group(1)
            memid = re.search(r'parameter \\MEMID "\\\\([^"]+)"', block)
            if memid is None or memid.group(1) not in marked:
                return block
            return re.sub(r"(parameter \\COLLISION_X_MASK )(\d+)'([01]+)",
                          lambda p: f"{p.group(1)}{p.group(2)}'{'1' * int(p.group(2))}", block)
        return _MEMRD.sub(port, body)
    return _MODULE.sub(module, text)


def rtlil_text(config: HwConfig, *, name: str = TOP_NAME, keep_memory_init: bool = True) -> str:
    """The RTLIL of the top for ``config`` (Amaranth's, unmodified by default)."""
    if keep_memory_init:
        text = rtlil.convert(Accelerator(config), name=name, emit_src=False)
    else:
        with without_zero_memory_init() as skipped:
            text = rtlil.convert(Accelerator(config), name=name, emit_src=False)
        text = text if skipped else strip_zero_memory_init(text)
    return mark_collision_dont_care(text) if config.ram_collision_dont_care else text


def verilog(config: HwConfig, *, name: str = TOP_NAME, keep_memory_init: bool = False) -> str:
    """Verilog of the accelerator top for ``config``.

    Parameters
    ----------
    config : HwConfig
    name : str
        Name of the top Verilog module.
    keep_memory_init : bool
        Keep Amaranth's all-zero memory initialisation (slow, large).

    Returns
    -------
    str
        The Verilog source; ports as documented in `hw.accelerator`.
    """
    text = rtlil_text(config, name=name, keep_memory_init=keep_memory_init)
    with tool_cache_environment():   # Yosys's wasm cache follows VDLA_CACHE_DIR
        return _convert_rtlil_text(text, strip_internal_attrs=True)


@functools.lru_cache(maxsize=1)
def hw_source_digest() -> str:
    """Digest of the ``hw`` package's sources and Amaranth's version: what the Verilog depends on."""
    import amaranth
    digest = hashlib.sha256(f"amaranth {amaranth.__version__}".encode())
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=64)
def _verilog_digest(sources: str, config: HwConfig) -> str:
    return hashlib.sha256(cached_verilog(config).encode()).hexdigest()[:16]


def verilog_digest(config: HwConfig) -> str:
    """Digest of the Verilog of ``config``: the design a cycle count was measured on.

    Narrower than `hw_source_digest`: an edit to ``hw`` that leaves this
    config's Verilog as it was (a synthesis flow, a board top, a feature of
    other configs) keeps it, so measurements on it stay valid.
    """
    return _verilog_digest(hw_source_digest(), config)


def cached_verilog(config: HwConfig) -> str:
    """`verilog` of ``config``, generated once per design and config.

    A `vdla.cache` entry keyed by the config hash and `hw_source_digest`, so
    an edited design is never served stale, and checked against its
    recorded size and SHA-256 on every read.
    """
    def build(work: Path) -> dict:
        (work / VERILOG_FILE).write_text(verilog(config))
        return {"config": config.name, "config_hash": config.hash}
    key = f"{config.hash}-{cache.key_of(hw_source_digest(), length=16)}"
    entry = cache.get_or_build("verilog", key, build, [VERILOG_FILE], what="Verilog")
    return (entry.directory / VERILOG_FILE).read_text()
