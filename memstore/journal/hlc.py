"""Hybrid logical clocks: versions ordered by time, even when the wall clock is not.

A journal stamps every version with an :class:`Hlc` (MemoryProtocol 0.1:
``{wall_ms, counter, node_id}``). ``wall_ms`` follows the wall clock while it
moves forward; when it stands still or steps backwards, ``counter`` counts on
from the last stamp instead, so stamps only ever increase. An :class:`Lsn` is
the ``(wall_ms, counter)`` pair alone: the position in the log a reader asks
for ("the state as of this Lsn").

>>> clock = HybridClock(node_id=7, wall=lambda: 1_000)
>>> clock.tick(), clock.tick()
(Hlc(wall_ms=1000, counter=0, node_id=7), Hlc(wall_ms=1000, counter=1, node_id=7))
>>> Lsn.parse("1745251800123.5")
Lsn(wall_ms=1745251800123, counter=5)
>>> str(Lsn(1745251800123, 5))
'1745251800123.5'
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from collections.abc import Callable
from typing import Final, NamedTuple

import regex

from memstore.errors import JournalError, MemstoreError

__all__ = [
    "COUNTER_BITS",
    "LAST_LSN",
    "LATEST_WALL_MS",
    "MAX_COUNTER",
    "AsOf",
    "Hlc",
    "HybridClock",
    "InvalidLsnError",
    "Lsn",
    "read_as_of",
    "to_lsn",
    "wall_clock_ms",
]

COUNTER_BITS: Final = 20
"""Bits of the counter inside a packed Lsn (:meth:`Lsn.packed`)."""
MAX_COUNTER: Final = (1 << COUNTER_BITS) - 1
_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MILLISECOND: Final = _dt.timedelta(milliseconds=1)
"""The largest counter; a clock that reaches it moves ``wall_ms`` on by one."""
MAX_NODE_ID: Final = 0xFFFF
"""Node ids are 16-bit (MemoryProtocol's ``u16``)."""
_MAX_WALL_MS: Final = (1 << (63 - COUNTER_BITS)) - 1
_LAST_MOMENT: Final = "2248-09-26T15:10:22.207Z"
"""The last millisecond a position can name (``_MAX_WALL_MS`` after the epoch)."""
LATEST_WALL_MS: Final = (_dt.datetime(2200, 1, 1, tzinfo=_dt.UTC) - _EPOCH) // _MILLISECOND
"""The year 2200: a wall clock reading this or later is broken, and stamps nothing.

Stamps only increase, and every process sharing a journal moves its clock
past the newest stamp it sees; one stamp from a clock set a century ahead
would date every later write of every process after it (``as_of(now)`` would
see none of them), and past ``Lsn``'s range (the year 2248) no write could be
stamped at all. :meth:`HybridClock.tick` refuses such a reading, and an
import refuses such stamps.
"""

_LSN_TEXT = regex.compile(r"(\d{1,16})\.(\d{1,10})(?:\.(\d{1,5}))?")


class InvalidLsnError(MemstoreError, ValueError):
    """A text, number or mapping that is not an Lsn (``wall_ms.counter[.node_id]``)."""


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch, from the system clock."""
    return time.time_ns() // 1_000_000


class Lsn(NamedTuple):
    """A log position: ``(wall_ms, counter)``, ordered as a tuple."""

    wall_ms: int
    counter: int

    def __str__(self) -> str:
        return f"{self.wall_ms}.{self.counter}"

    def packed(self) -> int:
        """One integer with the same order, as the journal stores it."""
        return (self.wall_ms << COUNTER_BITS) | self.counter

    @classmethod
    def unpack(cls, value: int) -> Lsn:
        """The inverse of :meth:`packed`."""
        return cls(value >> COUNTER_BITS, value & MAX_COUNTER)

    def to_json(self) -> dict[str, int]:
        """The wire shape: ``{"wall_ms": ..., "counter": ...}``."""
        return {"wall_ms": self.wall_ms, "counter": self.counter}

    @classmethod
    def of(cls, wall_ms: int, counter: int) -> Lsn:
        """A checked Lsn: both parts in range, or :class:`InvalidLsnError`."""
        if not 0 <= wall_ms <= _MAX_WALL_MS:
            raise InvalidLsnError(
                f"wall_ms {wall_ms} is out of range 0..{_MAX_WALL_MS} "
                f"(milliseconds since 1970, up to {_LAST_MOMENT})"
            )
        if not 0 <= counter <= MAX_COUNTER:
            raise InvalidLsnError(f"counter {counter} is out of range 0..{MAX_COUNTER}")
        return cls(wall_ms, counter)

    @classmethod
    def parse(cls, text: str) -> Lsn:
        """Read ``wall_ms.counter`` or ``wall_ms.counter.node_id`` (the node is dropped)."""
        m = _LSN_TEXT.fullmatch(text)
        if m is None:
            raise InvalidLsnError(
                f"{text[:64]!r} is not an Lsn: expected wall_ms.counter[.node_id] in decimal"
            )
        if m.group(3) is not None and int(m.group(3)) > MAX_NODE_ID:
            raise InvalidLsnError(f"node_id {m.group(3)} is out of range 0..{MAX_NODE_ID}")
        return cls.of(int(m.group(1)), int(m.group(2)))

    @classmethod
    def from_datetime(cls, when: _dt.datetime) -> Lsn:
        """The last Lsn of ``when``'s millisecond: "as of" that moment includes it.

        Any aware moment names a state: one before 1970 the state before
        every write (``0.0``), one after the last millisecond a position can
        name (2248-09-26T15:10:22.207Z) the state after every write
        (:data:`LAST_LSN`), as no write is ever stamped later.

        >>> Lsn.from_datetime(_dt.datetime(3000, 1, 1, tzinfo=_dt.UTC)) == LAST_LSN
        True
        """
        if when.utcoffset() is None:
            raise InvalidLsnError("a datetime for an Lsn must carry a timezone")
        # In integers: a float timestamp times 1000 lands a millisecond off on some dates.
        ms = (when - _EPOCH) // _MILLISECOND
        if ms < 0:
            return cls(0, 0)
        return cls(min(ms, _MAX_WALL_MS), MAX_COUNTER)

    def to_datetime(self) -> _dt.datetime:
        """The wall time of this position (UTC, millisecond precision)."""
        return _EPOCH + _dt.timedelta(milliseconds=self.wall_ms)


LAST_LSN: Final = Lsn(_MAX_WALL_MS, MAX_COUNTER)
"""The last position: the state "as of" it is the state after every write."""


def read_as_of(text: str) -> Lsn:
    """An "as of" written as text: a log position or an RFC 3339 time with a zone.

    The one reading of a moment typed by a person or a model (the MCP
    ``recall`` tool's ``as_of``, the inspector's): ``wall_ms.counter`` as
    :meth:`~Memory.history` shows positions, or a time such as
    ``2025-01-31T12:00:00Z`` (any time: see :meth:`Lsn.from_datetime`). A
    position out of range or any other text raises :class:`InvalidLsnError`
    naming ``as_of`` and what it takes.

    >>> read_as_of("1700000000000.3")
    Lsn(wall_ms=1700000000000, counter=3)
    >>> read_as_of("2023-11-14T22:13:20Z").wall_ms
    1700000000000
    >>> read_as_of("yesterday")
    Traceback (most recent call last):
    ...
    memstore.journal.hlc.InvalidLsnError: as_of 'yesterday' is neither a log position ...
    """
    text = text.strip()
    if _LSN_TEXT.fullmatch(text) or regex.fullmatch(r"\d+\.\d+", text):
        try:
            return Lsn.parse(text)
        except InvalidLsnError as e:
            raise InvalidLsnError(f"as_of {text[:40]!r}: {e}") from None
    try:
        when = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidLsnError(
            f"as_of {text[:40]!r} is neither a log position (wall_ms.counter) "
            "nor an RFC 3339 time (2026-12-01T09:30:00Z)"
        ) from None
    if when.utcoffset() is None:
        raise InvalidLsnError(f"as_of {text[:40]!r}: a time needs a time zone (Z or +hh:mm)")
    return Lsn.from_datetime(when)


class Hlc(NamedTuple):
    """A version stamp: ``(wall_ms, counter, node_id)``, totally ordered."""

    wall_ms: int
    counter: int
    node_id: int = 0

    def __str__(self) -> str:
        return f"{self.wall_ms}.{self.counter}.{self.node_id}"

    @property
    def lsn(self) -> Lsn:
        """The log position of this stamp (the node dropped)."""
        return Lsn(self.wall_ms, self.counter)

    def to_json(self) -> dict[str, int]:
        """The wire shape: ``{"wall_ms": ..., "counter": ..., "node_id": ...}``."""
        return {"wall_ms": self.wall_ms, "counter": self.counter, "node_id": self.node_id}

    @classmethod
    def from_json(cls, value: object) -> Hlc:
        """Read the wire shape back, checking every part."""
        if not isinstance(value, dict):
            raise InvalidLsnError(f"an Hlc is an object with wall_ms and counter, not {value!r}")
        try:
            wall, counter = value["wall_ms"], value["counter"]
            node = value.get("node_id", 0)
        except KeyError as e:
            raise InvalidLsnError(f"an Hlc needs {e.args[0]}") from None
        for part in (wall, counter, node):
            if not isinstance(part, int) or isinstance(part, bool):
                raise InvalidLsnError(f"Hlc parts are integers, got {part!r}")
        if not 0 <= node <= MAX_NODE_ID:
            raise InvalidLsnError(f"node_id {node} is out of range 0..{MAX_NODE_ID}")
        lsn = Lsn.of(wall, counter)
        return cls(lsn.wall_ms, lsn.counter, node)


class HybridClock:
    """Issues strictly increasing :class:`Hlc` stamps for one node.

    ``wall`` returns the time in milliseconds (injectable for tests);
    ``last`` is the newest stamp already issued (a journal passes the newest
    stamp it holds, so that stamps keep increasing across restarts even if the
    wall clock went backwards in between). Thread-safe.
    """

    def __init__(
        self,
        node_id: int = 0,
        *,
        wall: Callable[[], int] = wall_clock_ms,
        last: Lsn | None = None,
    ) -> None:
        if not 0 <= node_id <= MAX_NODE_ID:
            raise ValueError(f"node_id must be in 0..{MAX_NODE_ID}, got {node_id}")
        self.node_id = node_id
        self._wall = wall
        self._last = last if last is not None else Lsn(0, 0)
        self._lock = threading.Lock()

    @property
    def last(self) -> Lsn:
        """The newest position issued or observed."""
        return self._last

    def tick(self) -> Hlc:
        """A new stamp, greater than every stamp issued or observed before.

        Raises :class:`~memstore.errors.JournalError` (nothing issued) when
        the wall clock reads :data:`LATEST_WALL_MS` (the year 2200) or later.
        """
        with self._lock:
            now = self._wall()
            if now >= LATEST_WALL_MS:
                try:
                    when = f"{_EPOCH + now * _MILLISECOND:%Y-%m-%d %H:%M} UTC"
                except OverflowError:
                    when = "a time after the year 9999"
                raise JournalError(
                    f"the system clock reads {when}, past 2200-01-01: a "
                    "stamp that far ahead would date every later write of this journal (and "
                    "of every process sharing it) after it; set the clock right and write "
                    "again (nothing was written)"
                )
            last = self._last
            if now > last.wall_ms:
                nxt = Lsn(now, 0)
            elif last.counter < MAX_COUNTER:
                nxt = Lsn(last.wall_ms, last.counter + 1)
            else:  # the counter is spent: borrow the next millisecond
                nxt = Lsn(last.wall_ms + 1, 0)
            self._last = nxt
            return Hlc(nxt.wall_ms, nxt.counter, self.node_id)

    def observe(self, seen: Lsn) -> None:
        """Take note of a stamp from elsewhere: later ticks will be greater than it."""
        with self._lock:
            if seen > self._last:
                self._last = Lsn(seen.wall_ms, seen.counter)


AsOf = Lsn | Hlc | _dt.datetime | str
"""What an "as of" may be given as (:func:`to_lsn` reads it)."""


def to_lsn(at: AsOf, name: str = "as_of") -> Lsn:
    """Read an "as of" position: an Lsn, an Hlc, an aware datetime or ``wall_ms.counter``.

    Any aware datetime is a moment (:meth:`Lsn.from_datetime`: past 2248 is
    after every write). A position is checked whatever its form: an ``Lsn``
    or ``Hlc`` built by hand with a part out of range (``Lsn(2**70, 0)``) or
    not a whole number raises :class:`InvalidLsnError` naming ``name``, as
    the same position written as text does, rather than reach the database
    (SQLite overflows on it, PostgreSQL answers as of the end of time).
    """
    try:
        if isinstance(at, Hlc | Lsn):
            return _checked(at.lsn if isinstance(at, Hlc) else at)
        if isinstance(at, _dt.datetime):
            return Lsn.from_datetime(at)  # any moment: past the range is after every write
        if isinstance(at, str):
            return Lsn.parse(at)
    except InvalidLsnError as e:
        raise InvalidLsnError(f"{name} {str(at)[:40]!r}: {e}") from None
    raise InvalidLsnError(
        f"as of what? expected an Lsn, Hlc, aware datetime or 'wall_ms.counter', got {at!r:.60}"
    )


def _checked(at: Lsn) -> Lsn:
    """``at`` if both its parts are whole numbers in range, else :class:`InvalidLsnError`."""
    wall_ms, counter = at
    if type(wall_ms) is not int or type(counter) is not int:
        raise InvalidLsnError(f"an Lsn's parts are whole numbers, got {at!r:.60}")
    return Lsn.of(wall_ms, counter)
