"""The stamps of many items' current versions, in one read.

A recall answers each hit with the stamp of its chunk's current version
(``valid_from``). Reading it as ``history(id)[-1]`` parses every version of
every hit: one read per hit, each as long as the item's history.
:meth:`CurrentStamps.current_stamps` answers for many ids at once and reads
one row per id: the newest by ``(lsn, node)``, which is what :meth:`history`
lists last, found by walking the primary key ``(id, lsn, node)`` backwards
(one index seek per id, whatever the history's length). Only the stamp and
the operation are read, never the item's JSON.

The backends answer it with one bounded statement per
:data:`STAMPS_PER_STATEMENT` ids (:meth:`CurrentStamps._newest_stamps`);
the fallback here reads every row of the ids.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Final

from memstore import arguments as arg
from memstore.config import Change
from memstore.journal.hlc import Hlc, Lsn
from memstore.journal.version import Row

__all__ = ["STAMPS_PER_STATEMENT", "CurrentStamps", "NewestStamp"]

STAMPS_PER_STATEMENT: Final = 500
"""How many ids one statement looks up (SQLite's oldest limit on parameters is 999)."""

NewestStamp = tuple[str, int, int, str]
"""A backend's answer for one id: ``(id, lsn, node, op)`` of its newest version."""


class CurrentStamps:
    """:meth:`current_stamps` for a journal: a mixin of :class:`~memstore.journal.JournalBase`."""

    _node_id: int
    lsn_of: Callable[[Change], Lsn | None]  # JournalBase.lsn_of

    @abstractmethod
    def _check_open(self) -> None: ...

    def stamp_of(self, change: Change) -> Hlc | None:
        """The stamp of the version a recently committed upsert ``change`` wrote.

        What :meth:`current_stamps` reads for the change's id right after its
        write group committed, with no read: the group's position
        (:meth:`lsn_of`) and this journal's node. ``None`` for a delete, a
        mirrored change (another writer's version, recorded there), or a
        change this journal did not record lately. Every change of a group
        shares its stamp: for an id the group wrote twice, its last change
        says whether the id ends live.
        """
        if change.op != "upsert" or change.mirrored:
            return None
        at = self.lsn_of(change)
        return None if at is None else Hlc(at.wall_ms, at.counter, self._node_id)

    @abstractmethod
    def _rows_of(self, ids: Collection[str] | None, partition: str | None) -> Iterator[Row]: ...

    def current_stamps(self, ids: Iterable[str]) -> dict[str, Hlc | None]:
        """The stamp of each id's current version, when that version is an upsert.

        Every id asked is a key of the answer. Its value is what
        ``history(id)[-1].valid_from`` is when that last version is an upsert
        (the item is live), and ``None`` when the last version is a delete,
        or when there is no version (an id never written, or purged). One
        index seek per id: an item's answer costs the same with one version
        or ten thousand, and no item is parsed.

        >>> import tempfile
        >>> from memstore import Memory
        >>> with tempfile.TemporaryDirectory() as d, Memory(d, embedder=None) as mem:
        ...     a, b = mem.add("pool at 40"), mem.add("cache at 2 GB")
        ...     a = mem.update(a.id, content="pool at 60")
        ...     _ = mem.delete(b.id)
        ...     stamps = mem.journal.current_stamps([a.id, b.id, "never"])
        ...     stamps[a.id] == mem.journal.history(a.id)[-1].valid_from, stamps[b.id]
        (True, None)

        Each statement is one consistent read of its ids; a write landing
        between two statements (more than :data:`STAMPS_PER_STATEMENT` ids)
        may be seen by one and not the other, as with one :meth:`history`
        per id.

        :raises InvalidItemError: ``ids`` is not a collection of ids (a bare
            string is refused, not read as its letters).
        """
        asked = sorted(set(arg.id_list(ids)))
        self._check_open()
        out: dict[str, Hlc | None] = dict.fromkeys(asked)
        for start in range(0, len(asked), STAMPS_PER_STATEMENT):
            for id, lsn, node, op in self._newest_stamps(
                asked[start : start + STAMPS_PER_STATEMENT]
            ):
                if op == "upsert":
                    at = Lsn.unpack(lsn)
                    out[id] = Hlc(at.wall_ms, at.counter, node)
        return out

    def _newest_stamps(self, ids: list[str]) -> Iterable[NewestStamp]:
        """The newest version of each of ``ids`` that has one: every row read.

        A backend overrides it with one statement that reads one row per id.
        """
        newest: dict[str, NewestStamp] = {}
        for r in self._rows_of(ids, None):  # ordered by id, lsn, node: the last one wins
            newest[r.id] = (r.id, r.lsn, r.node, r.op)
        return newest.values()
