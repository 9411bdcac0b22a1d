"""The exception hierarchy: one root, each class also a built-in.

Every error memstore raises on purpose derives from :class:`MemstoreError`, and
each concrete class also derives from the built-in a caller would naturally
catch (``ValueError`` for bad input, ``KeyError`` for a missing id), so both
``except MemstoreError`` and ``except ValueError`` work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from memstore.journal.hlc import Lsn

__all__ = [
    "OUT_OF_RANGE",
    "InvalidItemError",
    "ItemNotFoundError",
    "JournalClosedError",
    "JournalCorruptError",
    "JournalError",
    "JournalFullError",
    "JournalLockedError",
    "JournalSchemaError",
    "MemstoreError",
    "OutOfRangeError",
    "ReadOnlyError",
    "WriteConflictError",
]


class MemstoreError(Exception):
    """Root of every error memstore raises on purpose."""


class ReadOnlyError(MemstoreError, PermissionError):
    """A write to a memory opened read-only (``Memory(folder, readonly=True)``); nothing changed."""


class InvalidItemError(MemstoreError, ValueError):
    """A write was refused by validation; nothing was changed.

    ``reason`` is the human-readable rule the item broke, e.g.
    ``"kind stable_fact needs confidence high, got 'low'"``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __repr__(self) -> str:
        return f"InvalidItemError({self.reason!r})"


OUT_OF_RANGE: Final = "arguments.out_of_range"
"""The code every adapter answers a number out of its range with."""


def _shown_number(value: int) -> str:
    """A whole number as a message echoes it: whole up to 20 digits, else its start and length.

    A ``limit`` of ``1e300`` is a whole number of 301 digits; a refusal quoting
    all of them buries what it says (and past 4,300 digits Python will not turn
    one into text at all), so a long one is shown as its first ten digits and
    how many there are, as :func:`memstore.arguments.describe` cuts other values.

    >>> _shown_number(-42), _shown_number(10**300), _shown_number(-(10**5000))
    ('-42', '1000000000... (301 digits)', '-1000000000... (5001 digits)')
    """
    size = abs(value)
    if size < 10**20:
        return str(value)
    digits = int(math.log10(size)) + 1
    if 10 ** (digits - 1) > size:  # log10 rounded up just below a power of ten
        digits -= 1
    elif 10**digits <= size:
        digits += 1
    sign = "-" if value < 0 else ""
    return f"{sign}{size // 10 ** (digits - 10)}... ({digits} digits)"


class OutOfRangeError(InvalidItemError):
    """A whole number outside its bounds (an :class:`InvalidItemError`, so a ``ValueError``).

    Raised by :func:`memstore.arguments.count`, the one check of a caller's
    number against its bounds, for the engine and every adapter alike.
    ``name``, ``value``, ``low`` and ``high`` (``None``: no upper bound) say
    which argument, what was given and what was allowed; ``code`` is
    :data:`OUT_OF_RANGE`. Nothing was changed.

    >>> OutOfRangeError("limit", 0, 1, 100).details()
    {'argument': 'limit', 'value': 0, 'min': 1, 'max': 100}
    """

    code: Final = OUT_OF_RANGE

    def __init__(self, name: str, value: int, low: int, high: int | None) -> None:
        allowed = f"at least {low}" if high is None else f"between {low} and {high}"
        super().__init__(f"{name} must be {allowed}, got {_shown_number(value)}")
        self.name = name
        self.value = value
        self.low = low
        self.high = high

    def __repr__(self) -> str:
        return f"OutOfRangeError({self.name!r}, {self.value!r}, {self.low!r}, {self.high!r})"

    def details(self) -> dict[str, object]:
        """The fields of the error as JSON-ready values (for an adapter's error body)."""
        return {"argument": self.name, "value": self.value, "min": self.low, "max": self.high}


class ItemNotFoundError(MemstoreError, KeyError):
    """An operation named an item id the store does not hold."""

    def __init__(self, item_id: str) -> None:
        super().__init__(item_id)
        self.item_id = item_id

    def __str__(self) -> str:
        return f"no item with id {self.item_id!r}"


class JournalError(MemstoreError, OSError):
    """The journal could not open, read or write its record; the store is unchanged.

    A write that fails with a journal error was rolled back in the store too:
    the store and the journal never disagree.
    """


class JournalCorruptError(JournalError):
    """The journal is damaged (a file that is not a journal, or a row that cannot be read).

    It was left untouched: memstore never drops a damaged record to carry on.
    When one stored version is unreadable, ``table`` names where it lives
    (``"versions"``), ``item_id`` its id and ``position`` its stamp
    (``"wall_ms.counter@node"``); all three are ``None`` for damage to the file
    itself. ``docs/journal.md`` ("A damaged row") says how to recover.
    """

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        item_id: str | None = None,
        position: str | None = None,
    ) -> None:
        super().__init__(message)
        self.table = table
        self.item_id = item_id
        self.position = position


class JournalSchemaError(JournalError):
    """The journal file was written by a newer memstore (or an unknown format)."""


class JournalLockedError(JournalError):
    """Another process (or another journal object) already has the file open for writing."""


class JournalFullError(JournalError):
    """The disk, or the journal's size cap, is full; the write was rolled back."""


class WriteConflictError(JournalError):
    """Another process wrote an item this write was computed from; nothing was written.

    Raised by a PostgreSQL journal shared by several processes, for a write
    group made under :meth:`memstore.Memory.atomically` (every read-then-write
    method of :class:`~memstore.Memory` is one): this process had not yet
    taken in another process's newer version of ``ids`` when it read them, so
    the group was undone rather than overwrite (or resurrect) what it never
    saw. ``position`` is that newer commit's Lsn: once this process's follower
    has applied it, running the operation again acts on the current state
    (:meth:`~memstore.Memory.atomically` does so by itself, up to 16 times).
    """

    def __init__(self, message: str, *, ids: Sequence[str], position: Lsn) -> None:
        super().__init__(message)
        self.ids = list(ids)
        self.position = position


class JournalClosedError(JournalError):
    """The journal was closed (or is not attached) and cannot serve this call."""
