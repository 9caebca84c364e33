"""Fixed-point requantisation: a real scale as an integer multiplier and shifts on the ALU.

A layer whose scale ``S = s_x * s_w / s_y`` is not a power of two (a model
another tool quantised) requantises its int32 sum ``v = acc + bias`` by a
pre-shift p, a clamp to ``CLAMP``, a multiplier M and a rounding shift q,
with the ALU ops the accelerator has. The exact sequence, how `fixed_point`
chooses M, p and q, and the error bound against exact rounding (the result
is exact unless ``v * S`` lies within 0.012 of ``k + 1/2``, and then within
one step) are documented once, in `hw.isa.REQUANTISATION` (docs/isa.md,
"Requantisation"). `requantize` is that arithmetic in numpy, which the
compiler's reference (`compiler.ops.Epilogue`), the ALU program
(`compiler.accel.passes.epilogue`) and the cpu target's C compute bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["CLAMP", "MAX_SHIFT", "fixed_point", "fixed_point_per_channel", "requantize",
           "check_fixed_point", "extra_alu_passes"]

# The ALU's immediate is a signed 16-bit field: the clamp bound and the largest multiplier.
CLAMP = (1 << 15) - 1
# Shifts use the operand's low 5 bits.
MAX_SHIFT = 31
# An output beyond this many steps saturates whatever the rounding (127 + 1/2, rounded up).
_SATURATED = 129


def fixed_point(scale: float) -> tuple[int, int, int]:
    """``(multiplier, pre_shift, shift)`` that requantise by ``scale`` (see the module).

    Parameters
    ----------
    scale : float
        The real factor from the int32 sum to output steps, finite and > 0.

    Raises
    ------
    ValueError
        For a scale that is not a finite positive number.
    """
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"requantisation scale must be finite and > 0, got {scale!r}")
    pre_shift = min(max(0, math.ceil(math.log2(_SATURATED / (CLAMP * scale)))), MAX_SHIFT)
    while pre_shift > 0 and CLAMP * scale * 2.0 ** (pre_shift - 1) >= _SATURATED:
        pre_shift -= 1  # log2's rounding: the least p that still saturates
    shift = MAX_SHIFT
    while shift > 0 and round(scale * 2.0 ** (pre_shift + shift)) > CLAMP:
        shift -= 1
    multiplier = min(max(1, round(scale * 2.0 ** (pre_shift + shift))), CLAMP)
    return multiplier, pre_shift, shift


def fixed_point_per_channel(scales: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``(multipliers, pre_shift, shift)`` for one scale per channel, sharing both shifts.

    The pre-shift is the largest any channel needs (the clamp must not touch an
    unsaturated output of the smallest scale), the shift the largest that keeps
    the largest multiplier within ``CLAMP``: channels with smaller scales get
    smaller multipliers, so the error bound of `fixed_point` grows with the
    spread of the scales (``max / min``), for both its terms.

    Raises
    ------
    ValueError
        For a scale that is not finite and > 0.
    """
    scales = np.asarray(scales, np.float64).reshape(-1)
    pre_shift = max(fixed_point(float(s))[1] for s in scales)
    largest = float(scales.max())
    shift = MAX_SHIFT
    while shift > 0 and round(largest * 2.0 ** (pre_shift + shift)) > CLAMP:
        shift -= 1
    multipliers = np.clip(np.round(scales * 2.0 ** (pre_shift + shift)), 1, CLAMP)
    return multipliers.astype(np.int64), pre_shift, shift


def check_fixed_point(multiplier: int, pre_shift: int, shift: int) -> None:
    """Raise ValueError unless the three fit the ALU's immediates (1..T, 0..31, 0..31)."""
    for name, value, low, high in (("multiplier", multiplier, 1, CLAMP),
                                   ("pre_shift", pre_shift, 0, MAX_SHIFT),
                                   ("shift", shift, 0, MAX_SHIFT)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) \
                or not low <= value <= high:
            raise ValueError(f"{name}: expected an integer in {low}..{high} for a fixed-point "
                             f"multiplier, got {value!r}")


def requantize(value: np.ndarray, multiplier: int, pre_shift: int, shift: int) -> np.ndarray:
    """The module's arithmetic on int32 sums ``value`` (int64 out, before the int8 clip)."""
    t = np.clip(np.asarray(value, np.int64) >> pre_shift, -CLAMP, CLAMP) * multiplier
    if shift == 0:
        return t
    return ((t >> (shift - 1)) + 1) >> 1


def extra_alu_passes(pre_shift: int, shift: int) -> int:
    """Immediate ALU passes a fixed-point epilogue adds to a plain REQUANT's one pass.

    The bias ADD takes REQUANT's place as the pass that reads ``acc[src]``;
    the clamp (2), MUL and final REQUANT always run, the pre-shift, the
    rounding SHR and the ADD 1 when their shifts are not 0.
    """
    return 4 + (pre_shift > 0) + (shift > 1) + (shift > 0)
