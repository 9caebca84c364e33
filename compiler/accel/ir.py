"""The loop-level IR between a schedule and an instruction stream.

Small on purpose. A lowered layer is a `Function`: named `Buffer`s with memory
scopes, and a list of `Tile`s, each made of `Stage`s (load / compute / store).
A stage body is a list of statements:

* `Loop` -- a counted loop over a named variable;
* `Copy` -- a logical DMA between a box of a DRAM tensor's blocked element grid
  and an SRAM buffer (the box may reach outside the tensor: zero padding);
* `Mac` -- one scalar multiply-accumulate on element lanes, what a convolution
  is before tensorization;
* `Gemm` / `Alu` -- the accelerator's intrinsics on whole SRAM entries;
* `Epilogue` -- the fused bias / shift / clip of an accumulator tile;
* `Insn` -- a finished instruction (after DMA injection and uop folding).

Indices are `Affine` expressions over loop variables, so passes can reason
about strides (loop fusion, folding into an instruction's factors) without
enumerating iterations.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator, Union

import numpy as np

from vdla.hw import isa

__all__ = ["Affine", "Buffer", "Loop", "Copy", "Access", "Mac", "Gemm", "Alu", "Epilogue",
           "Insn", "Stage", "Tile", "Function", "SCOPES", "walk", "loop_nest", "enumerate_affine",
           "nest"]

# Memory scopes: DRAM, the four data SRAMs (out mirrors acc row for row) and uop.
SCOPES = ("dram", "inp", "wgt", "acc", "out", "uop")


class Affine:
    """An integer affine expression ``sum(coef * var) + const`` (immutable)."""

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict[str, int] | None = None, const: int = 0):
        self.terms = {var: int(c) for var, c in terms.items() if c} if terms else {}
        self.const = int(const)

    @classmethod
    def _make(cls, terms: dict[str, int], const: int) -> "Affine":
        # Internal fast path: ``terms`` is fresh and already free of zeros.
        expr = object.__new__(cls)
        expr.terms, expr.const = terms, const
        return expr

    @staticmethod
    def var(name: str) -> "Affine":
        return Affine._make({name: 1}, 0)

    def __add__(self, other: Union["Affine", int]) -> "Affine":
        if not isinstance(other, Affine):
            return Affine._make(dict(self.terms), self.const + int(other))
        terms = dict(self.terms)
        for var, coef in other.terms.items():
            total = terms.get(var, 0) + coef
            if total:
                terms[var] = total
            else:
                terms.pop(var, None)
        return Affine._make(terms, self.const + other.const)

    __radd__ = __add__

    def __mul__(self, factor: int) -> "Affine":
        if isinstance(factor, Affine):
            if factor.terms:
                raise TypeError("an affine expression can only be scaled by a constant")
            factor = factor.const
        factor = int(factor)
        if not factor:
            return Affine._make({}, 0)
        return Affine._make({v: c * factor for v, c in self.terms.items()}, self.const * factor)

    __rmul__ = __mul__

    def coef(self, var: str) -> int:
        return self.terms.get(var, 0)

    def evaluate(self, env: dict[str, int]) -> int:
        return self.const + sum(coef * env[var] for var, coef in self.terms.items())

    def __eq__(self, other) -> bool:
        return isinstance(other, Affine) and self.terms == other.terms and self.const == other.const

    def __hash__(self) -> int:
        return hash((frozenset(self.terms.items()), self.const))

    def __repr__(self) -> str:
        parts = [(f"{c}*{v}" if c != 1 else v) for v, c in self.terms.items()]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


@dataclasses.dataclass(eq=False)
class Buffer:
    """A named array of SRAM entries (or a DRAM tensor, scope ``dram``).

    ``base`` is the first entry in its SRAM; passes assign it (virtual
    threads replicate a buffer into per-thread slots at different bases).
    """

    name: str
    scope: str
    entries: int
    base: int = 0

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise ValueError(f"buffer {self.name}: unknown scope {self.scope!r}")

    def __repr__(self) -> str:
        return f"{self.scope}:{self.name}[{self.base}:{self.base + self.entries}]"


@dataclasses.dataclass(eq=False)
class Loop:
    """``for var in range(extent): body``."""

    var: str
    extent: int
    body: list


@dataclasses.dataclass(eq=False)
class Copy:
    """A logical DMA of a box of a DRAM tensor's element grid to or from SRAM.

    Parameters
    ----------
    direction : str
        ``"load"`` (DRAM to SRAM) or ``"store"``.
    tensor : str
        DRAM tensor name (``data``, ``weight``, ``bias``, ``out``).
    grid : tuple of int
        Shape of the tensor's blocked element grid, outer to inner.
    start, extent : tuple of int
        The box. Starts may be negative and boxes may end past the grid: those
        elements are zero padding (loads only, and only on the last two axes).
    memory : str
        SRAM scope of the copy (``inp``, ``wgt``, ``acc``, ``out``).
    buffer : Buffer
        SRAM buffer the box lands in (row-major over ``extent``) or comes from.
    offset : int
        Entry offset within the buffer.
    strides : tuple of int, optional
        DRAM elements between neighbours along each axis; row-major over
        ``grid`` when omitted. Explicit strides describe a strided view of a
        tensor (e.g. only the columns a strided 1x1 convolution reads); such a
        view's ``grid`` bounds each axis and may not be padded.
    """

    direction: str
    tensor: str
    grid: tuple[int, ...]
    start: tuple[int, ...]
    extent: tuple[int, ...]
    memory: str
    buffer: Buffer
    offset: int = 0
    strides: tuple[int, ...] | None = None


@dataclasses.dataclass(eq=False)
class Access:
    """An SRAM entry ``buffer[index]``, and for scalar code the element lanes used."""

    buffer: Buffer
    index: Affine
    lanes: tuple[str, ...] = ()


@dataclasses.dataclass(eq=False)
class Mac:
    """Scalar ``acc[lanes] += inp[lanes] * wgt[lanes]`` (int8 x int8 -> int32)."""

    acc: Access
    inp: Access
    wgt: Access


@dataclasses.dataclass(eq=False)
class Gemm:
    """``acc[dst] += inp[src] @ wgt[wgt].T`` on whole entries, or ``acc[dst] = 0``;
    with ``overwrite`` ``acc[dst] = inp[src] @ wgt[wgt].T`` (GEMM_OVERWRITE)."""

    dst: Access
    src: Access | None = None
    wgt: Access | None = None
    reset: bool = False
    overwrite: bool = False


@dataclasses.dataclass(eq=False)
class Alu:
    """``acc[dst] = op(acc[dst], imm or acc[src])`` on whole entries, or ``acc[dst] = 0``.

    The operand is ``acc[src]`` when ``src`` is given, else ``imm``; REQUANT
    also takes its shift and relu flag from ``imm`` alongside ``src``.
    """

    op: isa.AluOp
    dst: Access
    src: Access | None = None
    imm: int | None = None
    reset: bool = False


@dataclasses.dataclass(eq=False)
class Epilogue:
    """Bias add, shift and clip of an accumulator tile, before the ALU pass expands it.

    ``acc`` holds ``batch_blocks x channel_blocks x positions`` entries;
    output-channel block ``k`` of the tile is channel block
    ``first_channel_block + k`` of the layer.
    """

    acc: Buffer
    batch_blocks: int
    channel_blocks: int
    positions: int
    first_channel_block: int


@dataclasses.dataclass(eq=False)
class Insn:
    """A finished instruction.

    ``tensor`` names the DRAM region its ``dram_base`` is relative to (codegen
    adds the region's base); ``kernel`` holds the micro-ops a GEMM/ALU runs
    (absolute ``dst``, ``src``, ``wgt`` arrays) before codegen places them.
    """

    instruction: isa.Instruction
    tensor: str | None = None
    kernel: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    note: str = ""


@dataclasses.dataclass(eq=False)
class Stage:
    """A run of statements for one module: ``load``, ``compute`` or ``store``."""

    kind: str
    tile: int
    body: list
    thread: int = 0
    chunk: int | None = None
    role: str = ""          # compute stages: "reset", "gemm" or "epilogue"


@dataclasses.dataclass(eq=False)
class Tile:
    """One output tile: the reset of its accumulators (compute), per reduction
    chunk a load and a compute stage, then the epilogue (compute) and the store."""

    index: int
    steps: list[tuple[Stage, Stage]]
    epilogue: Stage
    store: Stage
    thread: int = 0
    reset: Stage | None = None


@dataclasses.dataclass(eq=False)
class Function:
    """A lowered layer: buffers, tiles, and (after the thread pass) a stage order."""

    name: str
    config: object              # HwConfig
    plan: object                # schedule.TilePlan (its geometry is the layer)
    buffers: list[Buffer]
    tiles: list[Tile]
    stages: list[Stage] = dataclasses.field(default_factory=list)
    instructions: list[Insn] = dataclasses.field(default_factory=list)
    uop_words: np.ndarray | None = None      # the DRAM micro-op region (uint32)
    stats: dict = dataclasses.field(default_factory=dict)

    def buffer(self, name: str) -> Buffer:
        for buffer in self.buffers:
            if buffer.name == name:
                return buffer
        raise KeyError(f"no buffer {name!r}")

    def all_stages(self) -> Iterator[Stage]:
        """Stages in program order (tile order before the thread pass flattens them)."""
        if self.stages:
            yield from self.stages
            return
        for tile in self.tiles:
            for chunk, (load, compute) in enumerate(tile.steps):
                yield load
                if chunk == 0 and tile.reset is not None:
                    yield tile.reset
                yield compute
            yield tile.epilogue
            yield tile.store


def walk(body: Iterable) -> Iterator:
    """Every statement of a body, loops included, depth first."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, Loop):
            yield from walk(stmt.body)


def loop_nest(stmt) -> tuple[list[Loop], object]:
    """Split a perfect loop nest into its loops (outer first) and its single leaf."""
    loops = []
    while isinstance(stmt, Loop):
        loops.append(stmt)
        if len(stmt.body) != 1:
            raise ValueError(f"loop {stmt.var} is not a perfect nest ({len(stmt.body)} statements)")
        stmt = stmt.body[0]
    return loops, stmt


def enumerate_affine(expr: Affine, loops: list[tuple[str, int]]) -> np.ndarray:
    """Values of ``expr`` over a loop nest (outer first), in iteration order, as int64."""
    values = np.full([extent for _, extent in loops] or [1], expr.const, dtype=np.int64)
    for axis, (var, extent) in enumerate(loops):
        coef = expr.coef(var)
        if coef:
            shape = [1] * len(loops)
            shape[axis] = extent
            values = values + coef * np.arange(extent, dtype=np.int64).reshape(shape)
    return values.reshape(-1)


def nest(loops: list[tuple[str, int]], leaf) -> object:
    """Build a perfect loop nest (outer first) around a leaf statement."""
    stmt = leaf
    for var, extent in reversed(loops):
        stmt = Loop(var, extent, [stmt])
    return stmt
