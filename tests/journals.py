"""The journal backends the journal tests run against, behind one small interface.

A *place* is where a journal lives: a file path (SQLite) or a DSN and schema
(PostgreSQL, :class:`~tests.pgtest.PgPlace`). :func:`open_journal` opens
either, and the few things a test does below the journal's API (make the
database refuse writes, count raw rows, fake a newer schema) have one helper
per backend here.

PostgreSQL journals opened here default to ``node_id=0`` (as SQLite's
default, so stamps are predictable) and ``durability="off"``
(``synchronous_commit = off``: a commit does not wait for the server's disk,
which only matters if the *server* crashes; the transactions are the same).
"""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path
from typing import Any

from memstore import Memory, Store
from memstore.journal import JournalBase, SqliteJournal
from tests.pgtest import PgPlace

Place = Path | PgPlace


def open_journal(place: Place, **kwargs: Any) -> JournalBase:
    """A journal at ``place`` (keyword arguments as the backend takes them)."""
    if isinstance(place, Path):
        return SqliteJournal(place, **kwargs)
    from memstore.journal.postgres import PostgresJournal

    options: dict[str, Any] = {"node_id": 0, "durability": "off", **kwargs}
    return PostgresJournal(place.dsn, schema=place.schema, **options)


def attached(place: Place) -> tuple[Store, JournalBase]:
    """A new store attached to a journal at ``place`` (a PostgreSQL one following no one)."""
    journal = (
        SqliteJournal(place) if isinstance(place, Path) else open_journal(place, replicate=False)
    )
    store = Store()
    journal.attach(store)
    return store, journal


def memory_state(mem: Memory) -> tuple[str, dict[str, Any]]:
    """All a memory holds: its export (every version) and its current items, to compare
    before and after a call that was refused and must have changed nothing."""
    buf = io.StringIO()
    mem.export(buf)
    with mem.store.lock:  # type: ignore[attr-defined]
        items = {it.id: it.model_dump() for it in mem.store.items_locked()}
    return buf.getvalue(), items


def place_of(journal: JournalBase) -> Place:
    if isinstance(journal, SqliteJournal):
        return Path(journal.path)
    return PgPlace(journal.dsn, journal.schema)  # type: ignore[attr-defined]


def refuse_writes(journal: JournalBase) -> None:
    """Make the database refuse every new version (a trigger raising 'refused by test')."""
    place = place_of(journal)
    if isinstance(place, Path):
        assert isinstance(journal, SqliteJournal)
        journal._conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON versions BEGIN "
            "SELECT RAISE(ABORT, 'refused by test'); END"
        )
        return
    place.sql(
        "CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'refused by test'; END $$"
    )
    place.sql(
        "CREATE TRIGGER refuse BEFORE INSERT ON {s}.versions "
        "FOR EACH ROW EXECUTE FUNCTION {s}.refuse()"
    )


def allow_writes(journal: JournalBase) -> None:
    """Undo :func:`refuse_writes`."""
    place = place_of(journal)
    if isinstance(place, Path):
        assert isinstance(journal, SqliteJournal)
        journal._conn.execute("DROP TRIGGER refuse")
        return
    place.sql("DROP TRIGGER refuse ON {s}.versions")
    place.sql("DROP FUNCTION {s}.refuse()")


def count_rows_like(journal: JournalBase, pattern: str) -> int:
    """Raw versions whose item JSON matches the SQL ``LIKE`` pattern."""
    place = place_of(journal)
    if isinstance(place, Path):
        assert isinstance(journal, SqliteJournal)
        row = journal._conn.execute(
            "SELECT count(*) FROM versions WHERE item LIKE ?", (pattern,)
        ).fetchone()
        return int(row[0])
    return int(place.sql("SELECT count(*) FROM {s}.versions WHERE item LIKE %s", pattern)[0][0])


def set_schema_version(place: Place, version: int) -> None:
    """Write another schema version into the journal's meta table."""
    if isinstance(place, Path):
        conn = sqlite3.connect(place)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        conn.commit()
        conn.close()
        return
    place.sql("UPDATE {s}.meta SET value = %s WHERE key = 'schema_version'", str(version))
