"""Host-side packing of user tensors into the accelerator's blocked DRAM layouts.

Channels (and the batch) are zero padded up to the GEMM block sizes, so any
channel count works. Each layout turns a logical tensor into an array whose
last axes form one DRAM element of a memory kind (see `HwConfig.element_shape`):

==============  =======================  ==========================================
layout          logical shape            packed shape (element axes last)
==============  =======================  ==========================================
activation      (N, C, H, W) int8        (N/B, C/BI, H, W, B, BI)        inp elements
weight          (K, C, KH, KW) int8      (K/BO, C/BI, KH, KW, BO, BI)    wgt elements
block_diagonal  (K, C/G, KH, KW) int8    (K/BO, 1, KH, KW, BO, BI)       wgt elements:
                                         G groups of C/G dividing BI, each group's
                                         (K/G) x (C/G) taps on a block's diagonal
bias            (K,) int32               (K/BO, B, BO)                   acc elements
output          (N, K, H, W) int8        (N/B, K/BO, H, W, B, BO)        out elements
dense_data      (M, K) int8              activation of (M, K, 1, 1)
dense_weight    (N, K) int8              weight of (N, K, 1, 1)
dense_output    (M, N) int8              output of (M, N, 1, 1)
identity        (S,), a constant         (1, BO, BI)                     one wgt element:
                                         S times the identity (S = 2^j, j <= 6)
grouped:G:S     (K, C/G, KH, KW) int8    weight of (K, S*C/G, KH, KW):  G groups, each
                                         run of S of them one dense group, zero
                                         weights between its members
==============  =======================  ==========================================

A constant layout (`CONSTANT_LAYOUTS`) holds bytes that follow from the
region's layout and logical shape alone: the compiler states the region
(role ``constant``), `constant` makes its bytes, and no caller passes it.
The identity block brings an int8 residual into the accumulator through the
GEMM unit, scaled by ``S`` (`compiler.ops.Epilogue.residual_shift`).

(B, BI, BO are the config's batch, block_in and block_out; divisions round up.)
"""

from __future__ import annotations

import math
import re

import numpy as np

from vdla.errors import VdlaError
from vdla.hw.config import HwConfig
from vdla.ints import ceil_div

__all__ = ["LAYOUTS", "CONSTANT_LAYOUTS", "MAX_IDENTITY_SCALE", "pack", "unpack", "packed_shape",
           "packed_nbytes", "constant", "check_constant", "grouped_layout", "LayoutError"]


class LayoutError(VdlaError, ValueError):
    """A tensor whose dtype or shape does not fit the layout asked for."""


_GROUPED = re.compile(r"grouped:([1-9][0-9]{0,5}):([1-9][0-9]{0,5})")


def grouped_layout(groups: int, merged: int) -> str:
    """The weight layout of ``groups`` groups run ``merged`` at a time as one dense group
    (``grouped:G:S``: groups whose channels do not fill GEMM blocks)."""
    return f"grouped:{groups}:{merged}"


def _grouping(layout) -> tuple[int, int] | None:
    """``(G, S)`` of a ``grouped:G:S`` layout, None for any other."""
    match = _GROUPED.fullmatch(layout) if isinstance(layout, str) else None
    return (int(match[1]), int(match[2])) if match else None


class _Layouts(dict):
    """The layout table, which also holds every ``grouped:G:S`` weight layout."""

    def __contains__(self, layout) -> bool:
        return dict.__contains__(self, layout) or _grouping(layout) is not None

    def __missing__(self, layout):
        if _grouping(layout) is None:
            raise KeyError(layout)
        return self["weight"]


# layout name -> (logical rank, dtype, memory kind of one element)
LAYOUTS = _Layouts({
    "activation": (4, np.int8, "inp"),
    "weight": (4, np.int8, "wgt"),
    "block_diagonal": (4, np.int8, "wgt"),
    "bias": (1, np.int32, "acc"),
    # The biases, then per-channel multipliers (`compiler.ops.Epilogue.per_channel`): each
    # half packed as "bias", the multipliers' blocks after the biases'.
    "bias_pair": (1, np.int32, "acc"),
    "output": (4, np.int8, "out"),
    "dense_data": (2, np.int8, "inp"),
    "dense_weight": (2, np.int8, "wgt"),
    "dense_output": (2, np.int8, "out"),
    "identity": (1, np.int8, "wgt"),
})
CONSTANT_LAYOUTS = ("identity",)
# The largest power of two an int8 weight holds (2**7 does not).
MAX_IDENTITY_SCALE = 1 << 6
_DENSE = {"dense_data": "activation", "dense_weight": "weight", "dense_output": "output"}


def _outer_block(layout: str, config: HwConfig) -> tuple[int, int]:
    """Block sizes of the two blocked axes of a rank-4 layout."""
    return {"activation": (config.batch, config.block_in),
            "weight": (config.block_out, config.block_in),
            "block_diagonal": (config.block_out, config.block_in),
            "output": (config.batch, config.block_out)}[layout]


def _half(shape: tuple[int, ...], name: str) -> int:
    """Channels of a ``bias_pair`` tensor of ``shape`` (an even length)."""
    (length,) = shape
    if length % 2:
        raise LayoutError(f"{name}: a bias with per-channel multipliers has an even length "
                          f"(biases, then multipliers), got {length}")
    return length // 2


def _expanded(layout: str, shape: tuple[int, ...], name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(output channel, lane)`` index arrays, each ``(K, C/G)``, placing a ``grouped:G:S``
    weight's taps in its dense ``(K, S*C/G)`` form: each output channel's group's
    position in its run of S groups picks its lanes."""
    groups, merged = _grouping(layout)
    channels, per_in = shape[0], shape[1]
    if groups % merged or channels % groups:
        raise LayoutError(f"{name}: layout {layout} takes {groups} groups run {merged} at a "
                          f"time (dividing them) of whole output channels, got weights {shape}")
    member = np.arange(channels) // (channels // groups) % merged
    lanes = member[:, None] * per_in + np.arange(per_in)
    return np.broadcast_to(np.arange(channels)[:, None], lanes.shape), lanes


def _dense_shape(layout: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The logical shape a ``grouped:G:S`` weight of ``shape`` packs as ("weight")."""
    return (shape[0], _grouping(layout)[1] * shape[1], *shape[2:])


def packed_shape(layout: str, shape: tuple[int, ...], config: HwConfig) -> tuple[int, ...]:
    """Shape of the packed array for a logical tensor shape."""
    _check_layout(layout)
    if _grouping(layout):
        return packed_shape("weight", _dense_shape(layout, shape), config)
    if layout in _DENSE:
        return packed_shape(_DENSE[layout], (*shape, 1, 1), config)
    if layout == "identity":
        check_constant(layout, shape)
        return (1, config.block_out, config.block_in)
    if layout == "bias":
        (k,) = shape
        return (ceil_div(k, config.block_out), config.batch, config.block_out)
    if layout == "bias_pair":
        blocks, batch, block = packed_shape("bias", (_half(shape, "bias_pair"),), config)
        return (2 * blocks, batch, block)
    a, b, h, w = shape
    block_a, block_b = _outer_block(layout, config)
    return (ceil_div(a, block_a), ceil_div(b, block_b), h, w, block_a, block_b)


def packed_nbytes(layout: str, shape: tuple[int, ...], config: HwConfig) -> int:
    """Bytes the packed tensor occupies in DRAM."""
    # Exact integers: a file's shape may be large enough to wrap numpy's int64 (to 0 bytes).
    return math.prod(int(n) for n in packed_shape(layout, shape, config)) \
        * np.dtype(LAYOUTS[layout][1]).itemsize


def check_constant(layout: str, shape: tuple[int, ...]) -> None:
    """Raise `LayoutError` unless ``shape`` states a constant of ``layout`` (the identity's
    scale: a power of two, 1 .. `MAX_IDENTITY_SCALE`)."""
    if layout not in CONSTANT_LAYOUTS:
        raise LayoutError(f"layout {layout!r} is not a constant layout (those are: "
                          f"{', '.join(CONSTANT_LAYOUTS)})")
    scale = shape[0] if len(shape) == 1 else None
    if not isinstance(scale, (int, np.integer)) or isinstance(scale, bool) or scale <= 0 \
            or scale > MAX_IDENTITY_SCALE or scale & (scale - 1):
        raise LayoutError(f"identity: the shape states its scale, a power of two from 1 to "
                          f"{MAX_IDENTITY_SCALE}, got {tuple(shape)!r:.60}")


def constant(layout: str, shape: tuple[int, ...], config: HwConfig) -> np.ndarray:
    """The packed bytes of a constant region (`CONSTANT_LAYOUTS`) of logical ``shape``."""
    check_constant(layout, shape)
    block = np.zeros((config.block_out, config.block_in), dtype=np.int8)
    np.fill_diagonal(block, shape[0])
    return block.reshape(packed_shape(layout, shape, config))


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise LayoutError(f"unknown layout {layout!r} (known: {', '.join(LAYOUTS)})")


def pack(layout: str, array: np.ndarray, config: HwConfig, name: str = "tensor") -> np.ndarray:
    """Pack a logical tensor into its blocked layout.

    Parameters
    ----------
    layout : str
        One of `LAYOUTS`.
    array : numpy.ndarray
        The logical tensor; its dtype must match the layout exactly.
    config : HwConfig
    name : str
        Used in error messages.

    Returns
    -------
    numpy.ndarray
        The packed tensor, C-contiguous, in the layout's dtype.
    """
    _check_layout(layout)
    if layout in CONSTANT_LAYOUTS:
        raise LayoutError(f"{name}: layout {layout} is a constant (its bytes follow from its "
                          "shape); nothing packs into it")
    rank, dtype, _ = LAYOUTS[layout]
    array = np.asarray(array)
    if array.dtype != dtype:
        raise LayoutError(f"{name}: expected dtype {np.dtype(dtype).name}, got {array.dtype}")
    if array.ndim != rank:
        raise LayoutError(f"{name}: expected {rank} dimensions for layout {layout}, "
                          f"got shape {array.shape}")
    if layout in _DENSE:
        return pack(_DENSE[layout], array[:, :, None, None], config, name)
    if _grouping(layout):
        full = np.zeros(_dense_shape(layout, array.shape), dtype=dtype)
        full[_expanded(layout, array.shape, name)] = array
        return pack("weight", full, config, name)
    if layout == "bias_pair":
        half = _half(array.shape, name)
        return np.concatenate([pack("bias", array[:half], config, name),
                               pack("bias", array[half:], config, name)])
    if layout == "bias":
        blocks = packed_shape(layout, array.shape, config)[0]
        padded = np.zeros(blocks * config.block_out, dtype=np.int32)
        padded[:array.shape[0]] = array
        return np.ascontiguousarray(
            np.broadcast_to(padded.reshape(blocks, 1, config.block_out),
                            (blocks, config.batch, config.block_out)))
    a, b, h, w = array.shape
    outer_a, outer_b, _, _, block_a, block_b = packed_shape(layout, array.shape, config)
    padded = np.zeros((outer_a * block_a, outer_b * block_b, h, w), dtype=dtype)
    if layout == "block_diagonal":
        # Several small groups share a GEMM block: each group's output lanes
        # meet only its own input lanes, zeros elsewhere.
        outputs, lanes = _diagonal_lanes(array.shape, config, name)
        padded = np.zeros((outer_a * block_a, block_b, h, w), dtype=dtype)
        padded[outputs, lanes] = array
    else:
        padded[:a, :b] = array
    blocked = padded.reshape(outer_a, block_a, outer_b, block_b, h, w)
    return np.ascontiguousarray(blocked.transpose(0, 2, 4, 5, 1, 3))


def _diagonal_lanes(shape: tuple[int, ...], config: HwConfig,
                    name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(output channel, input lane)`` index arrays, each ``(K, C/G)``, of the
    block-diagonal layout: a group of ``C/G`` input channels (dividing
    ``block_in``) has ``C/G * block_out / block_in`` output channels."""
    channels, per_in = shape[0], shape[1]
    per_out = per_in * config.block_out // config.block_in
    if config.block_in % per_in or per_out * config.block_in != per_in * config.block_out \
            or channels % per_out:
        raise LayoutError(f"{name}: the block_diagonal layout takes groups of C/G input "
                          f"channels dividing the block's {config.block_in} and C/G x "
                          f"{config.block_out}/{config.block_in} outputs, got weights {shape}")
    outputs = np.arange(channels)[:, None]
    lanes = (outputs // per_out * per_in) % config.block_in + np.arange(per_in)
    return np.broadcast_to(outputs, lanes.shape), lanes


def unpack(layout: str, packed: np.ndarray, shape: tuple[int, ...], config: HwConfig) -> np.ndarray:
    """Inverse of `pack`: the logical tensor of ``shape`` from packed data (any flat form)."""
    _check_layout(layout)
    _, dtype, _ = LAYOUTS[layout]
    if layout in CONSTANT_LAYOUTS:
        check_constant(layout, shape)
        return np.asarray(packed).view(dtype).reshape(config.block_out, config.block_in).copy()
    if layout in _DENSE:
        return unpack(_DENSE[layout], packed, (*shape, 1, 1), config)[:, :, 0, 0]
    if _grouping(layout):
        full = unpack("weight", packed, _dense_shape(layout, shape), config)
        return np.ascontiguousarray(full[_expanded(layout, shape, "packed weights")])
    blocked = np.asarray(packed).view(dtype).reshape(packed_shape(layout, shape, config))
    if layout == "bias_pair":
        half = _half(shape, "packed bias")
        blocks = len(blocked) // 2
        return np.concatenate([unpack("bias", blocked[:blocks], (half,), config),
                               unpack("bias", blocked[blocks:], (half,), config)])
    if layout == "bias":
        return blocked[:, 0, :].reshape(-1)[:shape[0]].copy()
    a, b, h, w = shape
    outer_a, outer_b, _, _, block_a, block_b = blocked.shape
    full = blocked.transpose(0, 4, 1, 5, 2, 3).reshape(outer_a * block_a, outer_b * block_b, h, w)
    if layout == "block_diagonal":
        outputs, lanes = _diagonal_lanes(shape, config, "packed weights")
        return np.ascontiguousarray(full[outputs, lanes])
    return np.ascontiguousarray(full[:a, :b])
