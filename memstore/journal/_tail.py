"""The newest versions of one item, with what the rest of its history holds, in one read.

A view that shows at most a hundred versions of an item with ten thousand
should not parse ten thousand: :meth:`HistoryTails.history_tail` reads the
newest ``newest`` versions, and with them (in the same read, so they agree)
how many versions there are in all and a summary of where they lived: the
one partition every version was placed in, if there is one, and whether any
may have been private. A caller that shows only a partition's versions
(the inspector) knows from that summary whether the tail alone will do.

The backends answer it with one bounded statement
(:meth:`HistoryTails._tail_rows`); the fallback here reads every row.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from memstore import arguments as arg
from memstore.journal.version import Row, Version

__all__ = ["PRIVATE_MARK", "HistoryTail", "HistoryTails", "TailRows"]

MAX_TAIL = 100_000
"""The most versions one :meth:`HistoryTails.history_tail` answers."""
PRIVATE_MARK = '"private"'
"""What an upsert row's JSON holds when its item may be private (a superset: a field equal
to ``"private"`` also holds it, which only costs a caller its shortcut, never a wrong answer)."""

TailRows = tuple[Sequence[Row], int, str | None, str | None, bool]
"""A backend's answer: the newest rows (newest first), the count, the least and greatest
partition, whether an upsert row holds :data:`PRIVATE_MARK`."""


@dataclass(frozen=True, slots=True)
class HistoryTail:
    """The newest versions of an item and a summary of its whole history, read at once."""

    versions: list[Version]
    """The newest versions asked for, oldest first (all of them when there are fewer)."""
    total: int
    """How many versions the item has in all (0: it never existed, or was purged)."""
    partition: str | None
    """The one partition every version was placed in (``""``: untagged); ``None`` when
    the versions lived in several, or there are none. A delete is placed where the
    item it ended was."""
    maybe_private: bool
    """``False`` only when no version was private (``True`` may be a false alarm)."""

    @property
    def complete(self) -> bool:
        """Whether :attr:`versions` is the whole history."""
        return len(self.versions) == self.total


class HistoryTails:
    """:meth:`history_tail` for a journal: a mixin of :class:`~memstore.journal.JournalBase`."""

    @abstractmethod
    def _check_open(self) -> None: ...

    @abstractmethod
    def _rows_of(self, ids: Collection[str] | None, partition: str | None) -> Iterator[Row]: ...

    def history_tail(self, id: str, newest: int) -> HistoryTail:
        """The newest ``newest`` versions of ``id`` and a summary of all of them.

        One consistent read: the count and the summary describe the same
        history as the versions (a write landing meanwhile is in all or none).
        :meth:`history` is the whole list; this is its last ``newest``, and
        ``total`` is ``len(history(id))``.

        >>> import tempfile
        >>> from memstore import Memory
        >>> with tempfile.TemporaryDirectory() as d, Memory(d, embedder=None) as mem:
        ...     a = mem.add("v0", partition="acme")
        ...     for n in range(1, 5):
        ...         _ = mem.update(a.id, content=f"v{n}")
        ...     tail = mem.journal.history_tail(a.id, 2)
        ...     [v.item.content for v in tail.versions], tail.total, tail.partition
        (['v3', 'v4'], 5, 'acme')

        :raises InvalidItemError: ``newest`` is not 1..100,000.
        """
        id = arg.id_arg(id)
        newest = arg.count(newest, "newest", 1, MAX_TAIL)
        self._check_open()
        rows, total, low, high, private = self._tail_rows(id, newest)
        return HistoryTail(
            versions=[r.version() for r in reversed(rows)],
            total=total,
            partition=low if total and low == high else None,
            maybe_private=private,
        )

    def _tail_rows(self, id: str, limit: int) -> TailRows:
        """The newest ``limit`` rows of ``id`` (newest first) and the summary: every row read.

        A backend overrides it with one statement that reads the summary in
        the database and returns only ``limit`` rows.
        """
        rows = list(self._rows_of([id], None))
        parts = [r.partition for r in rows]
        private = any(r.op == "upsert" and PRIVATE_MARK in (r.item or "") for r in rows)
        low, high = (min(parts), max(parts)) if parts else (None, None)
        return rows[::-1][:limit], len(rows), low, high, private
