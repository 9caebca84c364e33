"""The GPU kernel's index arithmetic, written once and evaluated two ways.

`Tiling` holds every index formula of the implicit-GEMM kernel: which block
tile and register tile a thread owns (`thread_row`, `thread_col`), which
shared-memory word each thread stages in a K step (`a_stage`, `b_stage`),
where in global memory that word comes from (`a_source`, `b_source`,
including the convolution's padding and stride), and where an output goes
(`out_target`). The formulas are plain Python arithmetic on their arguments,
so they run on two kinds of value:

- `Sym`, a C expression: `compiler.gpu.codegen` calls the formulas with
  symbols (``threadIdx.x``, ``k0`` ...) and pastes the resulting text into
  the CUDA C;
- numpy integer arrays: `compiler.gpu.model` calls the same formulas with
  every block's and thread's indices at once and executes the kernel's data
  movement and K loop in numpy, which tests compare bit-exactly with
  `compiler.ops` references.

So the C's indexing is the indexing the model checks, not a second copy of
it. C's ``/`` and ``%`` equal Python's ``//`` and ``%`` only for non-negative
operands: every divided quantity here is (the padded input coordinates,
which can be negative, are only compared).
"""

from __future__ import annotations

import numpy as np

from vdla.compiler.cpu.schedule import CpuProblem
from vdla.compiler.gpu.schedule import GROUP, WARP, GpuSchedule, gemm_rows, reduction_words
from vdla.ints import ceil_div, round_up

__all__ = ["Sym", "Tiling", "select"]


def _text(value) -> str:
    if isinstance(value, Sym):
        return value.text
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    return str(int(value))


class Sym:
    """A C expression of type ``int`` that Python arithmetic extends.

    ``//`` prints as ``/``; ``&`` is only ever applied to conditions (0 or 1)
    here, and prints as C's ``&``, which evaluates both sides: ``&&`` would
    compile to a branch per operand, and the kernel's loads must not wait on
    branches; literals fold where both sides are Python ints.
    """

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"Sym({self.text!r})"

    def _binary(self, other, operator: str, swapped: bool = False) -> "Sym":
        left, right = (_text(other), self.text) if swapped else (self.text, _text(other))
        return Sym(f"({left} {operator} {right})")

    def __add__(self, other):
        return self if isinstance(other, int) and other == 0 else self._binary(other, "+")

    def __radd__(self, other):
        return self if isinstance(other, int) and other == 0 else self._binary(other, "+", True)

    def __sub__(self, other):
        return self if isinstance(other, int) and other == 0 else self._binary(other, "-")

    def __rsub__(self, other):
        return self._binary(other, "-", True)

    def __mul__(self, other):
        if isinstance(other, int) and other in (0, 1):
            return self if other == 1 else 0
        return self._binary(other, "*")

    def __rmul__(self, other):
        if isinstance(other, int) and other in (0, 1):
            return self if other == 1 else 0
        return self._binary(other, "*", True)

    def __floordiv__(self, other):
        return self if isinstance(other, int) and other == 1 else self._binary(other, "/")

    def __mod__(self, other):
        return 0 if isinstance(other, int) and other == 1 else self._binary(other, "%")

    def __lt__(self, other):
        return self._binary(other, "<")

    def __le__(self, other):
        return self._binary(other, "<=")

    def __gt__(self, other):
        return self._binary(other, ">")

    def __ge__(self, other):
        return self._binary(other, ">=")

    def __and__(self, other):
        if other is True:
            return self
        return self._binary(other, "&")

    def __rand__(self, other):
        return self if other is True else self._binary(other, "&", True)


def select(condition, if_true, if_false):
    """``condition ? if_true : if_false`` for `Sym`, `numpy.where` for arrays."""
    if any(isinstance(value, Sym) for value in (condition, if_true, if_false)):
        return Sym(f"({_text(condition)} ? {_text(if_true)} : {_text(if_false)})")
    return np.where(condition, if_true, if_false)


class Tiling:
    """Index formulas of one kernel: ``problem`` tiled by ``schedule`` in ``mode``.

    Attributes are the kernel's compile-time constants (``rows`` = M,
    ``channels_out`` = N, ``words`` = R, ...). Methods take block indices,
    thread indices, the K loop's ``k0`` and register-tile indices as `Sym` or
    numpy arrays and return the same kind.
    """

    def __init__(self, problem: CpuProblem, schedule: GpuSchedule, mode: str):
        self.problem, self.schedule, self.mode = problem, schedule, mode
        self.group = GROUP[mode]
        self.rows = gemm_rows(problem)
        # A grouped convolution's GEMM columns are its groups side by side, each
        # padded to whole block tiles so that a block's columns share one
        # group, hence one A tile: the group's input channels.
        self.group_out = problem.group_out
        self.group_columns = (problem.out_channels if problem.groups == 1
                              else round_up(problem.group_out, schedule.block_n))
        self.channels_out = problem.groups * self.group_columns
        self.words = reduction_words(problem, mode)
        self.channel_words = ceil_div(problem.group_in, self.group)
        self.pixels = problem.out_height * problem.out_width
        self.grid = (ceil_div(self.rows, schedule.block_m),
                     ceil_div(self.channels_out, schedule.block_n))
        self.threads = schedule.threads
        self.a_tile_words = schedule.block_m * schedule.block_k
        self.b_tile_words = schedule.block_n * schedule.block_k
        self.a_slots = ceil_div(self.a_tile_words, self.threads)
        self.b_slots = ceil_div(self.b_tile_words, self.threads)

    # -- which outputs a thread owns ------------------------------------------------
    def thread_row(self, tid, i):
        """Row of the block tile (pixel offset) of register-tile row ``i`` of thread ``tid``."""
        s = self.schedule
        warp, lane = tid // WARP, tid % WARP
        return (warp % s.warps_m) * s.warp_m + i * s.lanes_m + lane % s.lanes_m

    def thread_col(self, tid, j):
        """Column of the block tile (channel offset) of register-tile column ``j``."""
        s = self.schedule
        warp, lane = tid // WARP, tid % WARP
        return (warp // s.warps_m) * s.warp_n + j * s.lanes_n + lane // s.lanes_m

    # -- what a thread stages in shared memory --------------------------------------
    def a_stage(self, tid, slot: int):
        """(word ``kk``, row ``mm``, in the tile?) of the A word thread ``tid`` stages in ``slot``.

        Shared index ``kk * block_m + mm``: consecutive threads take consecutive
        pixels, so their global reads are consecutive and their writes hit
        consecutive banks.
        """
        element = tid + slot * self.threads
        return (element // self.schedule.block_m, element % self.schedule.block_m,
                element < self.a_tile_words)

    def b_stage(self, tid, slot: int):
        """(word ``kk``, column ``nn``, in the tile?) of the B word thread ``tid`` stages."""
        element = tid + slot * self.threads
        return (element // self.schedule.block_n, element % self.schedule.block_n,
                element < self.b_tile_words)

    def a_shared(self, kk, mm):
        return kk * self.schedule.block_m + mm

    def b_shared(self, kk, nn):
        return kk * self.schedule.block_n + nn

    # -- where staged words come from ------------------------------------------------
    def pixel(self, m):
        """(image, output row, output column) of GEMM row ``m``."""
        p = self.problem
        return m // self.pixels, (m % self.pixels) // p.out_width, m % p.out_width

    def column_group(self, n):
        """The convolution group of GEMM column ``n`` (0 without groups)."""
        return 0 if self.problem.groups == 1 else n // self.group_columns

    def a_source(self, m, r, n0=0):
        """Per channel of A word (``m``, ``r``): a list of (valid, element offset in data).

        Reduction word ``r`` is tap ``r // channel_words`` (row-major over the
        kernel, its rows ``dilation`` apart) and channels ``group * (r %
        channel_words) + q`` of the group of the block's first column ``n0``;
        taps that fall in the zero padding, channels past the group's, rows
        past ``M`` and words past ``R`` are not valid (they stage zeros).
        """
        p = self.problem
        tap, word = r // self.channel_words, r % self.channel_words
        image, out_row, out_col = self.pixel(m)
        in_row = out_row * p.stride[0] - p.padding[0] + tap // p.kernel[1] * p.dilation[0]
        in_col = out_col * p.stride[1] - p.padding[1] + tap % p.kernel[1] * p.dilation[1]
        inside = ((m < self.rows) & (r < self.words) & (in_row >= 0) & (in_row < p.height)
                  & (in_col >= 0) & (in_col < p.width))
        base = (image * p.data_strides[0] + in_row * p.data_strides[2]
                + in_col * p.data_strides[3]
                + self.column_group(n0) * (p.group_in * p.data_strides[1]))
        sources = []
        for q in range(self.group):
            channel = word * self.group + q
            sources.append((inside & (channel < p.group_in),
                            base + channel * p.data_strides[1]))
        return sources

    def b_source(self, r, n):
        """(valid, word offset) of B word (``r``, ``n``) in the packed weights (`pack_weight`)."""
        return (r < self.words) & (n < self.channels_out), r * self.channels_out + n

    def out_target(self, m, n):
        """(valid, element offset in out) of output (``m``, ``n``)."""
        p = self.problem
        image, out_row, out_col = self.pixel(m)
        valid = (m < self.rows) & (n < self.channels_out)
        channel = n
        if p.groups > 1:        # skip the columns that pad each group
            column = n % self.group_columns
            valid = valid & (column < self.group_out)
            channel = self.column_group(n) * self.group_out + column
        offset = (image * p.out_strides[0] + channel * p.out_strides[1]
                  + out_row * p.out_strides[2] + out_col * p.out_strides[3])
        return valid, offset

    # -- the host side of the contract -----------------------------------------------
    def pack_weight(self, weight: np.ndarray) -> np.ndarray:
        """KCHW (dense: ``(N, K)``) weights as the kernel's ``R x N`` words.

        Word (``r``, ``n``) holds channels ``group * (r % channel_words) + q``
        of tap ``r // channel_words`` of output channel ``n``; int8 words pack
        4 channels little-endian (byte ``q`` = channel ``q``), zero past ``C``.
        """
        weight = np.asarray(weight)
        if weight.ndim == 2:
            weight = weight[:, :, None, None]
        weight = self._columns(weight)
        k, c, kh, kw = weight.shape
        padded = np.zeros((k, self.channel_words * self.group, kh, kw), dtype=weight.dtype)
        padded[:, :c] = weight
        # (n, word, q, dy, dx) -> (dy, dx, word, n, q): r = (dy*kw + dx)*words + word
        grouped = padded.reshape(k, self.channel_words, self.group, kh, kw)
        words = np.ascontiguousarray(grouped.transpose(3, 4, 1, 0, 2))
        if self.mode == "int8":
            return words.astype(np.int8).view(np.int32).reshape(self.words, k)
        return words.reshape(self.words, k)

    def pack_bias(self, bias: np.ndarray) -> np.ndarray:
        """The bias per GEMM column (zeros in the columns that pad a group)."""
        return self._columns(np.asarray(bias))

    def _columns(self, per_channel: np.ndarray) -> np.ndarray:
        """Rows per output channel laid out per GEMM column: each group padded with zeros."""
        if self.problem.groups == 1:
            return per_channel
        grouped = per_channel.reshape(self.problem.groups, self.group_out, *per_channel.shape[1:])
        columns = np.zeros((self.problem.groups, self.group_columns, *per_channel.shape[1:]),
                           per_channel.dtype)
        columns[:, :self.group_out] = grouped
        return columns.reshape(self.channels_out, *per_channel.shape[1:])
