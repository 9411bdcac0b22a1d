"""Minting ULIDs fast: the ids the store gives items written without one.

A ULID is 48 bits of Unix time in milliseconds then 80 random bits, written as
26 characters of Crockford's base 32 (the first character is 0-7). The
``python-ulid`` package builds one through several objects and checks (about
10 µs on a loaded machine); every id-less write mints one, so this writes the
same text directly: the 10 characters of the time, computed once per
millisecond, then the 16 of the random part, two characters per table lookup.

>>> u = new_ulid()
>>> len(u), u[0] in "01234567"
(26, True)
>>> from ulid import ULID
>>> str(ULID.from_str(u)) == u
True
"""

from __future__ import annotations

import os
import time

__all__ = ["new_ulid"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
"""Crockford's base 32: no I, L, O or U."""
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
"""The two characters of every 10-bit value."""

_last: tuple[int, str] = (-1, "")
"""The last millisecond seen and its 10 characters (one tuple: replaced atomically)."""


def _time_part(ms: int) -> str:
    """The 48-bit millisecond count as 10 characters (50 bits, two leading zeros)."""
    return "".join([_ALPHABET[(ms >> shift) & 31] for shift in range(45, -1, -5)])


def new_ulid() -> str:
    """A new ULID: the current millisecond, then 80 bits from ``os.urandom``."""
    global _last
    ms = time.time_ns() // 1_000_000
    last = _last
    if last[0] != ms:
        last = _last = (ms, _time_part(ms))
    r = int.from_bytes(os.urandom(10), "big")
    p = _PAIRS
    return (
        last[1]
        + p[r >> 70]
        + p[(r >> 60) & 1023]
        + p[(r >> 50) & 1023]
        + p[(r >> 40) & 1023]
        + p[(r >> 30) & 1023]
        + p[(r >> 20) & 1023]
        + p[(r >> 10) & 1023]
        + p[r & 1023]
    )
