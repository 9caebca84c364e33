"""Execute the GPU kernel's tiling in numpy: every block and thread at once.

`run_model` calls the `compiler.gpu.tiling.Tiling` formulas the CUDA C is
generated from with numpy index arrays (blocks x threads), and performs what
the kernel does with them: each K step, every thread stages its A and B words
in a per-block shared tile; after the barrier, every thread reads its register
tile's operands from the shared tiles and accumulates (``__dp4a`` in int8:
four signed byte products added to an int32, wrapping); finally every thread
writes its outputs through the REQUANT epilogue.

It also checks what the GPU would not report: that no two threads of a block
stage the same shared word in a step, that every shared word a thread reads
was staged in that step, and that every output is written exactly once.

What this verifies is the index arithmetic (tiles, shared-memory staging,
padding, stride, the K loop, the output mapping) and the weight packing. It
does not execute the CUDA C: the kernel's text is run on the CPU by
`compiler.gpu.host_emulation` (int8 and fp32), compiled for sm_90a by nvcc,
and run on a GPU only where one exists (``tests/compiler/gpu``).
"""

from __future__ import annotations

import numpy as np

from vdla.compiler.ops import Epilogue
from vdla.compiler.gpu.tiling import Tiling
from vdla.errors import VdlaError

__all__ = ["run_model", "TilingError", "dp4a"]


class TilingError(VdlaError):
    """The tiling stages a shared word twice, reads one it did not stage, or misses an output."""


def dp4a(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sum of the four signed byte products of int32 words ``a`` and ``b`` (``__dp4a``'s term)."""
    a_bytes = np.asarray(a, np.int32)[..., None].view(np.int8)
    b_bytes = np.asarray(b, np.int32)[..., None].view(np.int8)
    return (a_bytes.astype(np.int64) * b_bytes).sum(axis=-1)


def _stage(tiling: Tiling, shared, written, block_m, block_n, tid, k0, data, weight):
    """Every thread stages its A and B words of the K step at ``k0``."""
    s = tiling.schedule
    for slot in range(tiling.a_slots):
        kk, mm, in_tile = tiling.a_stage(tid, slot)
        m, r = block_m * s.block_m + mm, k0 + kk
        sources = tiling.a_source(m, r, block_n * s.block_n)
        values = [np.where(valid, data[np.where(valid, offset, 0)], 0) for valid, offset in sources]
        if tiling.mode == "int8":
            word = np.stack(values, axis=-1).astype(np.int8).view(np.int32)[..., 0]
        else:
            word = values[0]
        _write(shared["a"], written["a"], tiling.a_shared(kk, mm), word, in_tile)
    for slot in range(tiling.b_slots):
        kk, nn, in_tile = tiling.b_stage(tid, slot)
        valid, offset = tiling.b_source(k0 + kk, block_n * s.block_n + nn)
        word = np.where(valid, weight[np.where(valid, offset, 0)], 0)
        _write(shared["b"], written["b"], tiling.b_shared(kk, nn), word, in_tile)


def _write(tile, written, index, word, in_tile):
    """Scatter the staged words of all blocks into their block's shared tile."""
    index, word, in_tile = np.broadcast_arrays(index, word, in_tile)
    blocks = np.broadcast_to(np.arange(tile.shape[0])[:, None], index.shape)
    blocks, index, word = blocks[in_tile], index[in_tile], word[in_tile]
    if index.size and (index.min() < 0 or index.max() >= tile.shape[1]):
        raise TilingError("a thread stages a word outside its shared tile")
    np.add.at(written, (blocks, index), 1)
    tile[blocks, index] = word


def run_model(tiling: Tiling, data: np.ndarray, weight: np.ndarray,
              bias: np.ndarray | None, shift: int, relu: bool) -> np.ndarray:
    """The kernel's output on ``data`` (NCHW or dense ``(M, K)``) with ``weight``, executed in numpy.

    Parameters
    ----------
    tiling : Tiling
    data, weight : numpy.ndarray
        The layer's logical inputs (int8, or float for fp16/fp32).
    bias : numpy.ndarray or None
    shift, relu
        The epilogue (`compiler.ops.Epilogue`): int8 through its reference
        semantics; floats as ``relu((acc + bias) * 2**-shift)``.

    Returns
    -------
    numpy.ndarray
        int8 (int8 mode) or float64, of the output's logical shape.

    Raises
    ------
    TilingError
        When the staging or the output mapping is inconsistent (see the module docstring).
    """
    s, p = tiling.schedule, tiling.problem
    integer = tiling.mode == "int8"
    flat_data = np.ascontiguousarray(data).reshape(-1)
    if not integer:
        flat_data = flat_data.astype(np.float64)
    packed = tiling.pack_weight(weight).reshape(-1)
    if not integer:
        packed = packed.astype(np.float64)
    grid_m, grid_n = tiling.grid
    blocks = grid_m * grid_n
    # One row per block: (block_m, block_n) flattened; threads along the last axis.
    block_m = (np.arange(blocks) // grid_n)[:, None]
    block_n = (np.arange(blocks) % grid_n)[:, None]
    tid = np.arange(tiling.threads)[None, :]
    tile_dtype = np.int32 if integer else np.float64
    accumulators = np.zeros((s.thread_m, s.thread_n, blocks, tiling.threads),
                            np.int64 if integer else np.float64)
    rows = [tiling.thread_row(tid, i) for i in range(s.thread_m)]
    cols = [tiling.thread_col(tid, j) for j in range(s.thread_n)]
    for k0 in range(0, tiling.words, s.block_k):
        shared = {"a": np.zeros((blocks, tiling.a_tile_words), tile_dtype),
                  "b": np.zeros((blocks, tiling.b_tile_words), tile_dtype)}
        written = {name: np.zeros(tile.shape, np.int64) for name, tile in shared.items()}
        _stage(tiling, shared, written, block_m, block_n, tid, k0, flat_data, packed)
        for name, counts in written.items():
            if counts.max() > 1:
                raise TilingError(f"two threads stage the same {name.upper()} word in one step")
        for kk in range(s.block_k):
            a_index = [np.broadcast_to(tiling.a_shared(kk, row), (blocks, tiling.threads))
                       for row in rows]
            b_index = [np.broadcast_to(tiling.b_shared(kk, col), (blocks, tiling.threads))
                       for col in cols]
            for name, indices in (("a", a_index), ("b", b_index)):
                for index in indices:
                    if index.min() < 0 or index.max() >= written[name].shape[1]:
                        raise TilingError(f"a thread reads an {name.upper()} word outside "
                                          f"its shared tile (step k0={k0}, kk={kk})")
                    if not np.take_along_axis(written[name], index, axis=1).all():
                        raise TilingError(f"a thread reads an {name.upper()} word nobody "
                                          f"staged (step k0={k0}, kk={kk})")
            a = [np.take_along_axis(shared["a"], index, axis=1) for index in a_index]
            b = [np.take_along_axis(shared["b"], index, axis=1) for index in b_index]
            for i in range(s.thread_m):
                for j in range(s.thread_n):
                    accumulators[i, j] += dp4a(a[i], b[j]) if integer else a[i] * b[j]
    shape = (p.batch if p.out_strides[0] else 1, p.out_channels, p.out_height, p.out_width)
    size = int(np.prod(shape))
    out = np.zeros(size, np.int8 if integer else np.float64)
    stores = np.zeros(size, np.int64)
    bias = np.zeros(tiling.channels_out) if bias is None else tiling.pack_bias(bias)
    for i in range(s.thread_m):
        for j in range(s.thread_n):
            m = block_m * s.block_m + rows[i]
            n = block_n * s.block_n + cols[j]
            valid, offset = tiling.out_target(m, n)
            valid = np.broadcast_to(valid, accumulators[i, j].shape)
            offset = np.broadcast_to(offset, valid.shape)[valid]
            channel = np.broadcast_to(n, valid.shape)[valid]
            acc = accumulators[i, j][valid]
            if integer:
                value = acc + bias.astype(np.int64)[channel]
                result = Epilogue(False, shift, relu).apply(value, None, channel_axis=0)
            else:
                result = (acc + bias.astype(np.float64)[channel]) * 2.0 ** -min(shift, 31)
                result = np.maximum(result, 0) if relu else result
            np.add.at(stores, offset, 1)
            out[offset] = result
    if not (stores == 1).all():
        raise TilingError(f"{int((stores == 0).sum())} outputs never written, "
                          f"{int((stores > 1).sum())} written more than once")
    return out.reshape(_logical_shape(p, shape))


def _logical_shape(problem, shape):
    """NCHW for a convolution; ``(M, N)`` for a dense layer (normalised as 1 x N x 1 x M)."""
    if problem.out_strides[0] == 0:  # dense: data_strides (0, 1, 0, K), out (0, 1, 0, N)
        return (problem.width, problem.out_channels)
    return shape
