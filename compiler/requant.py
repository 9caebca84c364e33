"""Fixed-point requantisation: a real scale as an integer multiplier and shifts on the ALU.

A layer whose scale ``s = s_x * s_w / s_y`` is not a power of two (a model
another tool quantised) requantises its int32 sum ``v = acc + bias`` with
the ALU ops the accelerator has (`hw.isa.AluOp`), all on int32::

    t = v >> p                     SHR  imm p        (floor; skipped when p = 0)
    t = min(max(t, -T), T)         MIN, MAX imm      (T = 2**15 - 1: no overflow below)
    u = t * M                      MUL  imm M        (1 <= M <= T, so |u| < 2**30)
    y = floor((u + 2**(q-1)) / 2**q)                 SHR imm q-1, ADD imm 1, then
    y = clip(y, lo, 127)                             REQUANT imm 1 (and relu)

``floor(floor(u / 2**(q-1)) + 1) / 2)`` equals ``floor(u / 2**q + 1/2)``
exactly (the dropped low bits are below half a step), so the rounding
constant needs no 32-bit immediate and ``u + 2**(q-1)`` never overflows. With
``q = 0`` the last step is REQUANT with shift 0. `fixed_point` picks ``M``,
``p`` and ``q`` for a scale:

- ``p``, the least pre-shift with ``T * s * 2**p >= 129``: a clamped ``t``
  stands for an output beyond the int8 range, which saturates anyway, so the
  clamp never changes a result;
- ``q``, the largest shift (at most 31) with ``M = round(s * 2**(p+q)) <= T``:
  ``M`` keeps 15 significant bits (``2**14 <= M``) unless the scale is
  extreme.

Error bound against exact rounding, ``y* = floor(v * s + 1/2)`` (clipped):
the floor of the pre-shift moves ``v * s`` by less than ``s * 2**p``, which
is below ``2 * 129 / T < 0.008`` output steps when ``p > 0`` (and nothing when
``p = 0``); rounding ``M`` moves it by at most ``|t| * 2**-(q+1)``, below
``129 / 2**15 < 0.004`` steps for every unsaturated output. So ``y`` is
``y*`` or one step from it, and equals it unless ``v * s`` lies within
``0.012`` of a rounding boundary (``k + 1/2``). `requantize` is the
arithmetic in numpy, which the compiler's reference (`compiler.ops.Epilogue`),
the cpu target's C and the ALU program all compute bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["CLAMP", "MAX_SHIFT", "fixed_point", "requantize", "check_fixed_point",
           "extra_alu_passes"]

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
