"""Durable, versioned persistence: the store's record on disk.

A :class:`Journal` restores a :class:`~memstore.store.Store` on start and
then records every write group the store commits, as new versions stamped
with a hybrid logical clock, before the write is acknowledged. From the
record it answers what the store alone cannot: the state as of an earlier
position (:meth:`~Journal.as_of`), an item's history, a streaming snapshot,
hard deletes (:meth:`~Journal.purge`) and NDJSON export/import.

:class:`SqliteJournal` is the embedded default (one SQLite file, WAL mode).
``PostgresJournal`` (extra ``memstore-engine[postgres]``) shares one record between
many processes, each following the others' writes; it is imported on first
use, so the core does not need ``psycopg``.
"""

from typing import TYPE_CHECKING, Any

from memstore.journal._tail import HistoryTail
from memstore.journal.base import EXPORT_FORMAT, Journal, JournalBase, PurgeMatch
from memstore.journal.hlc import Hlc, HybridClock, InvalidLsnError, Lsn, to_lsn
from memstore.journal.sqlite import SCHEMA_VERSION, SqliteJournal
from memstore.journal.version import Version

if TYPE_CHECKING:
    from memstore.journal.postgres import PostgresJournal

__all__ = [
    "EXPORT_FORMAT",
    "SCHEMA_VERSION",
    "HistoryTail",
    "Hlc",
    "HybridClock",
    "InvalidLsnError",
    "Journal",
    "JournalBase",
    "Lsn",
    "PostgresJournal",
    "PurgeMatch",
    "SqliteJournal",
    "Version",
    "to_lsn",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresJournal":  # psycopg is optional: import it only when asked for
        from memstore.journal.postgres import PostgresJournal

        return PostgresJournal
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
