"""The PostgreSQL journal's bounded reads: one statement each, reading only what it answers.

:class:`~memstore.journal._tail.HistoryTails` and
:class:`~memstore.journal._stamps.CurrentStamps` read every row of an id
unless a backend does better; :class:`~memstore.journal.postgres.PostgresJournal`
answers them here, each with one statement over the primary key
``(id, lsn, node)`` (:class:`~memstore.journal._pgsql.Queries`).
"""

from __future__ import annotations

import psycopg

from memstore.journal._pgconn import Conn, Connections, translate
from memstore.journal._pgsql import Queries, ids_json
from memstore.journal._stamps import NewestStamp
from memstore.journal._tail import PRIVATE_MARK, TailRows
from memstore.journal.version import Row

__all__ = ["newest_stamps", "tail_rows"]


def tail_rows(db: Connections, q: Queries, id: str, limit: int) -> TailRows:
    """The newest ``limit`` rows of ``id`` (newest first) and the summary of all of them."""
    params = {"id": id, "limit": limit, "mark": PRIVATE_MARK}
    try:
        found = db.read(lambda conn: conn.execute(q.tail_of, params).fetchall())
    except psycopg.Error as e:
        raise translate(e, f"reading journal {db.where} failed") from e
    if not found:
        return [], 0, None, None, False
    total, low, high, private = found[0][-4:]
    return [Row(*r[:-4]) for r in found], int(total), low, high, bool(private)


def newest_stamps(db: Connections, q: Queries, ids: list[str]) -> list[NewestStamp]:
    """``(id, lsn, node, op)`` of the newest version of each of ``ids`` that has one.

    One index seek per id (a backward walk of the primary key, one row), so
    an id with thousands of versions costs what one with a single version does.
    """
    params = {"ids": ids_json(ids)}

    def read(conn: Conn) -> list[NewestStamp]:
        return [
            (str(i), int(lsn), int(node), str(op))
            for i, lsn, node, op in conn.execute(q.newest_of, params)
        ]

    try:
        return db.read(read)
    except psycopg.Error as e:
        raise translate(e, f"reading journal {db.where} failed") from e
