"""Minting ULIDs fast: the ids the store gives items written without one.

A ULID is 48 bits of Unix time in milliseconds then 80 random bits, written as
26 characters of Crockford's base 32 (the first character is 0-7). The
``python-ulid`` package builds one through several objects and checks (about
10 µs on a loaded machine); every id-less write mints one, so this writes the
same text directly: the 10 characters of the time, computed once per
millisecond, then the 16 of the random part, each the low 5 bits of a random
byte mapped through one ``bytes.translate`` table.

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
_FIVE_BITS = bytes.maketrans(bytes(range(256)), _ALPHABET.encode() * 8)
"""A random byte to one character, through its low 5 bits (256 = 8 x 32: still uniform)."""

_last: tuple[int, str] = (-1, "")
"""The last millisecond seen and its 10 characters (one tuple: replaced atomically)."""


_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
"""The last two characters of the time for each value of its low 10 bits."""
_head: tuple[int, str] = (-1, "")
"""The millisecond count shifted right by 10 bits and its first 8 characters."""


def _time_part(ms: int) -> str:
    """The 48-bit millisecond count as 10 characters (50 bits, two leading zeros).

    A writer that mints ids without pause reaches a new millisecond every few
    ids; the first 8 characters change only every 1,024 ms, so they are kept
    and the last two come from a table.
    """
    global _head
    head = _head
    if head[0] != ms >> 10:
        text = "".join([_ALPHABET[(ms >> shift) & 31] for shift in range(45, 9, -5)])
        head = _head = (ms >> 10, text)
    return head[1] + _PAIRS[ms & 1023]


def new_ulid() -> str:
    """A new ULID: the current millisecond, then 16 characters of ``os.urandom`` (80 bits)."""
    global _last
    ms = time.time_ns() // 1_000_000
    last = _last
    if last[0] != ms:
        last = _last = (ms, _time_part(ms))
    return last[1] + os.urandom(16).translate(_FIVE_BITS).decode("ascii")
