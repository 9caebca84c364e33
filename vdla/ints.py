"""Integer arithmetic every layer uses: counts of tiles, words and entries.

This module imports nothing, so every layer may use it.
"""

from __future__ import annotations

__all__ = ["ceil_div", "round_up"]


def ceil_div(a: int, b: int) -> int:
    """``a / b`` rounded up (``b > 0``): the tiles, words or entries that hold ``a``
    items ``b`` at a time.

    >>> ceil_div(10, 4), ceil_div(8, 4), ceil_div(0, 4)
    (3, 2, 0)
    """
    return -(-a // b)


def round_up(value: int, alignment: int) -> int:
    """The smallest multiple of ``alignment`` (``> 0``) that is at least ``value``.

    >>> round_up(10, 8), round_up(16, 8)
    (16, 16)
    """
    return ceil_div(value, alignment) * alignment
